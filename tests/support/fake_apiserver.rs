//! An in-process HTTPS server that speaks the Kubernetes REST API for
//! ConfigMaps, for what the real API server cannot be made to do on demand:
//! faults, slowness, malformed answers.
//!
//! Faithful to the behaviours checked against a real kube-apiserver (see
//! shared/DESIGN.md): server-side apply creates (201) or updates (200) in one
//! PATCH and keeps other managers' labels, annotations and data keys; apply
//! without `fieldManager` is 400; GET of a missing object is 404; a bad
//! token is 401; errors are `kind: Status` bodies. It listens on 127.0.0.1
//! only and stops when dropped.
//!
//! Custom resources (`/apis/...`) are a plain store with the real server's
//! update rules: a GET of a stored object, a list of a collection, a PUT
//! that must carry the stored `resourceVersion` (else 409 Conflict, the
//! real message), a PUT to `.../status` that replaces only the status; a
//! group nobody stored anything under answers the plain-text
//! "404 page not found" a real server gives for an API it does not serve.
//! A list is answered as v1.20 answers it: from `resourceVersion=0` whole,
//! whatever the `limit` (the watch cache;
//! [`FakeApiServer::without_watch_cache`] pages it), from
//! `resourceVersion=N` with a `limit` at exactly N (410 Gone once
//! compacted), otherwise paged by `limit` and `continue`; a `continue`
//! beside a version is refused (400).
//! [`FakeApiServer::conflict_after_gets`] makes "another writer" update an
//! object right after opstatus read it, and [`FakeApiServer::endless_paging`]
//! makes a collection's pages never end, which a real server cannot be made
//! to do on demand.
//!
//! Collections can be watched as on the real server (`?watch=1` from a
//! `resourceVersion`, with `timeoutSeconds`): every change of a custom
//! resource since that version is streamed as an `ADDED` / `MODIFIED`
//! event, one JSON line each, in a chunked 200 answer that ends after
//! `timeoutSeconds`. A watch from a version older than the last
//! [`FakeApiServer::compact`] gets what the real server's watch cache
//! sends then: a 200 with one `ERROR` event, a `Status` with code 410
//! ("too old resource version"). [`FakeApiServer::cut_watches`] resets
//! the open watch streams, as a server that goes away does, and
//! [`FakeApiServer::fail_watches`] makes every watch fail at once (an
//! `ERROR` event, or a refusal) while lists work. Pods are stored, listed
//! and watched the same way (the `--watch-container` Pod).

use super::https::{HttpsServer, Recorded, Reply, Response, Streamed};
use super::pki::{self, TestPki};
use serde_json::{Value, json};
use std::collections::{HashMap, HashSet, VecDeque};
use std::net::SocketAddr;
use std::sync::{Arc, Condvar, Mutex};
use std::time::{Duration, Instant};

/// What every watch gets instead of a stream of changes (lists still work).
#[derive(Clone, Copy, Debug)]
pub enum WatchFault {
    /// A 200 with one `ERROR` event carrying a `Status` with this code
    /// (410: "too old resource version", as the watch cache sends), then
    /// the end of the stream.
    ErrorEvent(u16),
    /// The watch is refused with this status code.
    Refuse(u16),
    /// Once (the next watch only): this many `ADDED` events of new
    /// resources (`flood-N`, calm), as fast as they are read, then the end.
    Flood(u64),
}

/// What to do with the next request instead of serving it.
#[derive(Clone, Debug)]
pub enum Fault {
    /// Answer with this status code and a `Status` body (and `Retry-After`).
    Status { code: u16, retry_after: Option<String> },
    /// Answer with this status code and this raw body.
    Raw { code: u16, body: Vec<u8> },
    /// Read the request, then say nothing for this long and close.
    Hang(Duration),
    /// Read the request, then close the connection without an answer.
    Close,
    /// Answer normally, but one byte per this interval.
    Trickle(Duration),
    /// Answer normally, but reset the connection halfway through the body.
    CutBody,
    /// Answer normally, then, this long after, send these bytes on the same
    /// connection unasked (a second response, as a broken proxy sends).
    Stray(Duration, Vec<u8>),
}

#[derive(Default)]
struct State {
    objects: HashMap<(String, String), Value>,
    tokens: HashSet<String>,
    faults: VecDeque<Fault>,
    /// A fault served to every request until cleared.
    sticky: Option<Fault>,
    /// Requests whose path contains this hang for that long (one API of
    /// the server hangs, the others answer).
    hang_path: Option<(String, Duration)>,
    /// The first request whose query contains the part gets the fault.
    query_faults: Vec<(String, Fault)>,
    requests: Vec<Recorded>,
    resource_version: u64,
    /// Custom resources by path (`/apis/GROUP/VERSION/.../NAME`).
    custom: HashMap<String, Value>,
    /// Paths whose next GETs are each followed by another writer's update.
    conflicts: HashMap<String, usize>,
    /// Collections whose every list page says there is more: with a new
    /// token each time (`true`) or the same one (`false`).
    endless: HashMap<String, bool>,
    /// Collections of this many made-up resources, listed but never stored.
    many: HashMap<String, usize>,
    tokens_given: u64,
    /// Every change of a custom resource: (version, path, event).
    events: Vec<(u64, String, Value)>,
    /// Watches from a version below this get 410 (etcd compacted it).
    compacted: u64,
    /// Lists from `resourceVersion=0` are answered whole (v1.20's watch
    /// cache), not paged: see [`FakeApiServer::without_watch_cache`].
    watch_cache: bool,
    /// Bumped to cut the open watch streams.
    watch_generation: u64,
    watch_fault: Option<WatchFault>,
}

impl State {
    fn record(&mut self, path: &str, kind: &str, object: &Value) {
        let event = json!({"type": kind, "object": object});
        self.events.push((self.resource_version, path.to_string(), event));
    }
}

pub struct FakeApiServer {
    pub addr: SocketAddr,
    pub pki: TestPki,
    state: Arc<Mutex<State>>,
    /// Notified on every change a watch may stream.
    changed: Arc<Condvar>,
    _server: HttpsServer,
}

impl FakeApiServer {
    /// Starts a server on 127.0.0.1 with a certificate for 127.0.0.1 (an IP
    /// SAN) from a fresh CA, accepting `token`.
    pub fn start(token: &str) -> FakeApiServer {
        Self::start_with_pki(token, pki::generate("fake-apiserver-ca", &["127.0.0.1"]))
    }

    pub fn start_with_pki(token: &str, pki: TestPki) -> FakeApiServer {
        let state = Arc::new(Mutex::new(State { watch_cache: true, ..State::default() }));
        state.lock().unwrap().tokens.insert(token.to_string());
        let changed = Arc::new(Condvar::new());
        let (st, ch) = (state.clone(), changed.clone());
        let server = HttpsServer::start(
            &pki,
            Arc::new(move |request: &Recorded| {
                let fault = {
                    let mut s = st.lock().unwrap();
                    s.requests.push(request.clone());
                    let hangs = s.hang_path.as_ref().filter(|(part, _)| request.path.contains(part.as_str()));
                    let by_query = s.query_faults.iter().position(|(part, _)| request.query.contains(part.as_str()));
                    match (hangs, by_query) {
                        (Some((_, d)), _) => Some(Fault::Hang(*d)),
                        (None, Some(at)) => Some(s.query_faults.remove(at).1),
                        (None, None) => s.faults.pop_front().or_else(|| s.sticky.clone()),
                    }
                };
                match fault {
                    Some(Fault::Hang(d)) => Reply::Hang(d),
                    Some(Fault::Close) => Reply::Close,
                    Some(Fault::Status { code, retry_after }) => {
                        Reply::Answer(Response { retry_after, ..status_response(code, "injected fault") })
                    }
                    Some(Fault::Raw { code, body }) => Reply::Answer(Response { code, body, retry_after: None }),
                    Some(Fault::Trickle(interval)) => {
                        Reply::Trickle { response: handle(request, &mut st.lock().unwrap()), interval }
                    }
                    Some(Fault::CutBody) => Reply::CutBody(handle(request, &mut st.lock().unwrap())),
                    Some(Fault::Stray(after, stray)) => {
                        Reply::AnswerThenStray { response: handle(request, &mut st.lock().unwrap()), stray, after }
                    }
                    None if is_watch(request) => watch(request, st.clone(), ch.clone()),
                    None => {
                        let response = handle(request, &mut st.lock().unwrap());
                        ch.notify_all();
                        Reply::Answer(response)
                    }
                }
            }),
        );
        FakeApiServer { addr: server.addr, pki, state, changed, _server: server }
    }

    pub fn port(&self) -> u16 {
        self.addr.port()
    }

    pub fn url(&self) -> String {
        format!("https://127.0.0.1:{}", self.port())
    }

    /// Closes connections that idle `after` (see [`HttpsServer::close_idle_after`]).
    pub fn close_idle_after(&self, after: Duration) {
        self._server.close_idle_after(after);
    }

    /// TCP connections accepted so far.
    pub fn connections(&self) -> usize {
        self._server.connections()
    }

    /// Accept only `token` from now on.
    pub fn set_token(&self, token: &str) {
        let mut s = self.state.lock().unwrap();
        s.tokens.clear();
        s.tokens.insert(token.to_string());
    }

    /// Serve these faults to the next requests, in order.
    pub fn push_faults(&self, faults: impl IntoIterator<Item = Fault>) {
        self.state.lock().unwrap().faults.extend(faults);
    }

    /// Serve `fault` to every request until `clear_sticky_fault`.
    pub fn set_sticky_fault(&self, fault: Fault) {
        self.state.lock().unwrap().sticky = Some(fault);
    }

    /// Hang every request whose path contains `part` for `how_long`.
    pub fn hang_path(&self, part: &str, how_long: Duration) {
        self.state.lock().unwrap().hang_path = Some((part.to_string(), how_long));
    }

    /// Serve `fault` to the first request whose query contains `part`
    /// (a list's page: `continue=500`).
    pub fn fail_query_once(&self, part: &str, fault: Fault) {
        self.state.lock().unwrap().query_faults.push((part.to_string(), fault));
    }

    pub fn clear_sticky_fault(&self) {
        self.state.lock().unwrap().sticky = None;
    }

    pub fn requests(&self) -> Vec<Recorded> {
        self.state.lock().unwrap().requests.clone()
    }

    /// The status ConfigMap of namespace `ops` once it exists; `None` if
    /// that takes longer than `timeout`.
    pub fn wait_status_configmap(&self, timeout: Duration) -> Option<Value> {
        super::wait_for(timeout, Duration::from_millis(20), || self.object("ops", "kube9-operator-status"))
    }

    /// The requests so far, once there are at least `n`; `None` if that
    /// takes longer than `timeout`.
    pub fn wait_requests(&self, n: usize, timeout: Duration) -> Option<Vec<Recorded>> {
        super::wait_for(timeout, Duration::from_millis(50), || {
            let r = self.requests();
            (r.len() >= n).then_some(r)
        })
    }

    pub fn object(&self, namespace: &str, name: &str) -> Option<Value> {
        self.state.lock().unwrap().objects.get(&(namespace.into(), name.into())).cloned()
    }

    /// Deletes an object, as `kubectl delete` would.
    pub fn remove_object(&self, namespace: &str, name: &str) {
        self.state.lock().unwrap().objects.remove(&(namespace.into(), name.into()));
    }

    pub fn put_object(&self, namespace: &str, name: &str, object: Value) {
        self.state.lock().unwrap().objects.insert((namespace.into(), name.into()), object);
    }

    /// Stores the test CRD `foos.example.com` (namespaced, `v1` served and
    /// stored) with these `annotations` (the probes' expressions).
    pub fn put_foo_crd(&self, annotations: Value) {
        self.put_custom(
            "/apis/apiextensions.k8s.io/v1/customresourcedefinitions/foos.example.com",
            json!({"metadata": {"name": "foos.example.com", "annotations": annotations},
                   "spec": {"group": "example.com", "scope": "Namespaced", "names": {"plural": "foos", "kind": "Foo"},
                            "versions": [{"name": "v1", "served": true, "storage": true}]}}),
        );
    }

    /// Stores a custom resource at its path (resourceVersion set here).
    pub fn put_custom(&self, path: &str, mut object: Value) {
        let mut s = self.state.lock().unwrap();
        s.resource_version += 1;
        object["metadata"]["resourceVersion"] = json!(s.resource_version.to_string());
        let kind = if s.custom.contains_key(path) { "MODIFIED" } else { "ADDED" };
        s.record(path, kind, &object);
        s.custom.insert(path.to_string(), object);
        drop(s);
        self.changed.notify_all();
    }

    /// Forgets the history up to now, as etcd's compaction does: a watch
    /// from an older version gets 410 Gone.
    pub fn compact(&self) {
        let mut s = self.state.lock().unwrap();
        s.compacted = s.resource_version;
        drop(s);
        self.changed.notify_all();
    }

    /// Lists are served as without the API server's watch cache
    /// (`--watch-cache=false`, or a newer server that pages from it): a
    /// list from `resourceVersion=0` is paged by its `limit` too.
    pub fn without_watch_cache(&self) {
        self.state.lock().unwrap().watch_cache = false;
    }

    /// Every watch from now on fails this way (`None`: watches work again).
    pub fn fail_watches(&self, fault: Option<WatchFault>) {
        self.state.lock().unwrap().watch_fault = fault;
    }

    /// Resets every open watch stream (the server went away mid-stream).
    pub fn cut_watches(&self) {
        self.state.lock().unwrap().watch_generation += 1;
        self.changed.notify_all();
    }

    pub fn custom(&self, path: &str) -> Option<Value> {
        self.state.lock().unwrap().custom.get(path).cloned()
    }

    /// The next `n` GETs of `path` are each followed by another writer's
    /// update (a new resourceVersion), so a PUT based on them conflicts.
    pub fn conflict_after_gets(&self, path: &str, n: usize) {
        self.state.lock().unwrap().conflicts.insert(path.to_string(), n);
    }

    /// Makes every list page of `collection` carry a `continue` token, as a
    /// broken aggregated API can: a new one each page when `fresh`, else the
    /// same one (a real server cannot be made to do either).
    pub fn endless_paging(&self, collection: &str, fresh: bool) {
        self.state.lock().unwrap().endless.insert(collection.to_string(), fresh);
    }

    /// Makes `collection` hold `n` resources (`r-000000`, …, no
    /// conditions), written as a list asks for them and never stored: a
    /// collection larger than the real API server can be filled with in a
    /// test. A page says `remainingItemCount`, as the real server does.
    pub fn many(&self, collection: &str, n: usize) {
        self.state.lock().unwrap().many.insert(collection.to_string(), n);
    }

    /// The parsed `status` document of a ConfigMap.
    pub fn status_document(&self, namespace: &str, name: &str) -> Option<Value> {
        let cm = self.object(namespace, name)?;
        serde_json::from_str(cm["data"]["status"].as_str()?).ok()
    }
}

fn reason(code: u16) -> &'static str {
    match code {
        400 => "BadRequest",
        401 => "Unauthorized",
        403 => "Forbidden",
        404 => "NotFound",
        409 => "Conflict",
        410 => "Expired",
        415 => "UnsupportedMediaType",
        429 => "TooManyRequests",
        503 => "ServiceUnavailable",
        504 => "Timeout",
        _ => "InternalError",
    }
}

fn status_response(code: u16, message: &str) -> Response {
    let body = json!({"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
                      "message": message, "reason": reason(code), "code": code});
    Response { code, body: body.to_string().into_bytes(), retry_after: None }
}

fn json_response(code: u16, v: &Value) -> Response {
    Response { code, body: v.to_string().into_bytes(), retry_after: None }
}

fn handle(r: &Recorded, s: &mut State) -> Response {
    let token = r.authorization.as_deref().and_then(|a| a.strip_prefix("Bearer "));
    if !token.is_some_and(|t| s.tokens.contains(t)) {
        return status_response(401, "Unauthorized");
    }
    if r.path.starts_with("/apis/") || is_pods(&r.path) {
        return handle_custom(r, s);
    }
    let segments: Vec<&str> = r.path.trim_start_matches('/').split('/').collect();
    let ["api", "v1", "namespaces", ns, "configmaps", name] = segments[..] else {
        return status_response(404, "the server could not find the requested resource");
    };
    let key = (ns.to_string(), name.to_string());
    match r.method.as_str() {
        "GET" => match s.objects.get(&key) {
            Some(obj) => json_response(200, obj),
            None => status_response(404, &format!("configmaps \"{name}\" not found")),
        },
        "PATCH" if r.content_type.as_deref() == Some("application/apply-patch+yaml") => {
            if !r.query.split('&').any(|kv| kv.starts_with("fieldManager=")) {
                return status_response(400, "PATCH apply requires fieldManager");
            }
            let Ok(intent) = serde_json::from_slice::<Value>(&r.body) else {
                return status_response(400, "error decoding YAML/JSON");
            };
            if intent["metadata"]["name"] != json!(name) || intent["kind"] != json!("ConfigMap") {
                return status_response(400, "the name or kind of the object does not match the request");
            }
            // A resourceVersion in the apply body is a precondition on an
            // existing object (409 when it moved on), ignored when the apply
            // creates the object: both as kube-apiserver v1.20 does.
            let sent_rv = &intent["metadata"]["resourceVersion"];
            if let Some(stored) = s.objects.get(&key)
                && sent_rv.is_string()
                && stored["metadata"]["resourceVersion"] != *sent_rv
            {
                return status_response(
                    409,
                    &format!(
                        "Operation cannot be fulfilled on configmaps \"{name}\": the object has been modified; \
                         please apply your changes to the latest version and try again"
                    ),
                );
            }
            let created = !s.objects.contains_key(&key);
            let before = s.objects.get(&key).cloned();
            let obj = s.objects.entry(key).or_insert_with(
                || json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name, "namespace": ns}}),
            );
            // Apply merges this manager's fields into the object, keeping
            // fields other managers own.
            for section in ["labels", "annotations"] {
                if let Some(m) = intent["metadata"][section].as_object() {
                    for (k, v) in m {
                        obj["metadata"][section][k] = v.clone();
                    }
                }
            }
            if let Some(data) = intent["data"].as_object() {
                for (k, v) in data {
                    obj["data"][k] = v.clone();
                }
            }
            // An apply that changes nothing is no write: the version stays.
            if before.as_ref() != Some(obj) {
                s.resource_version += 1;
                obj["metadata"]["resourceVersion"] = json!(s.resource_version.to_string());
            }
            json_response(if created { 201 } else { 200 }, obj)
        }
        "PATCH" => match s.objects.get(&key) {
            Some(obj) => json_response(200, obj),
            None => status_response(404, &format!("configmaps \"{name}\" not found")),
        },
        _ => status_response(405, "method not allowed"),
    }
}

/// Custom resources: see the module doc.
/// A page of a [`FakeApiServer::many`] collection of `n`: from the watch
/// cache whole, else `limit` from the `continue` index.
fn many_page(r: &Recorded, s: &State, n: usize) -> Response {
    let whole = query(r, "resourceVersion") == Some("0") && s.watch_cache;
    let from: usize = query(r, "continue").and_then(|c| c.parse().ok()).unwrap_or(0);
    let limit = query(r, "limit").and_then(|l| l.parse().ok()).filter(|_| !whole).unwrap_or(usize::MAX);
    let to = from.saturating_add(limit).min(n);
    let namespace = r.path.split('/').nth(5).unwrap_or_default();
    let mut body = format!(r#"{{"kind":"List","metadata":{{"resourceVersion":"{}""#, s.resource_version);
    if to < n {
        body.push_str(&format!(r#","continue":"{to}","remainingItemCount":{}"#, n - to));
    }
    body.push_str(r#"},"items":["#);
    for i in from..to {
        let comma = if i == from { "" } else { "," };
        body.push_str(&format!(
            r#"{comma}{{"metadata":{{"name":"r-{i:06}","namespace":"{namespace}","resourceVersion":"1"}},"status":{{"conditions":[]}}}}"#
        ));
    }
    body.push_str("]}");
    Response { code: 200, body: body.into_bytes(), retry_after: None }
}

fn handle_custom(r: &Recorded, s: &mut State) -> Response {
    if let Some(n) = s.many.get(&r.path).copied().filter(|_| r.method == "GET") {
        return many_page(r, s, n);
    }
    let group = r.path.split('/').nth(2).unwrap_or_default();
    if !s.custom.keys().any(|p| p.split('/').nth(2) == Some(group)) {
        return Response { code: 404, body: b"404 page not found\n".to_vec(), retry_after: None };
    }
    let (path, status_only) = match r.path.strip_suffix("/status") {
        Some(base) => (base.to_string(), true),
        None => (r.path.clone(), false),
    };
    let name = path.rsplit('/').next().unwrap_or_default().to_string();
    let not_found = || status_response(404, &format!("\"{name}\" not found"));
    match r.method.as_str() {
        "GET" => {
            if let Some(object) = s.custom.get(&path).cloned() {
                if let Some(n) = s.conflicts.get_mut(&path).filter(|n| **n > 0) {
                    *n -= 1;
                    s.resource_version += 1;
                    let rv = s.resource_version.to_string();
                    s.custom.get_mut(&path).unwrap()["metadata"]["resourceVersion"] = json!(rv);
                }
                return json_response(200, &object);
            }
            let prefix = format!("{path}/");
            let mut items: Vec<(&String, &Value)> =
                s.custom.iter().filter(|(p, _)| p.starts_with(&prefix) && !p[prefix.len()..].contains('/')).collect();
            let version = query(r, "resourceVersion");
            if items.is_empty() && !r.query.contains("limit=") && version.is_none() {
                return not_found();
            }
            let token = query(r, "continue");
            if token.is_some() && version.is_some_and(|v| v != "0") {
                return status_response(400, "specifying resource version is not allowed when using continue");
            }
            let asked: Option<usize> = query(r, "limit").and_then(|l| l.parse().ok()).filter(|l| *l > 0);
            // v1.20: `resourceVersion=0` is answered from the watch cache,
            // whole, whatever the `limit`; `resourceVersion=N` with a
            // `limit` from etcd at exactly N (410 once compacted), without
            // one from the cache (not older than N).
            let limit = match version {
                Some("0") if s.watch_cache => None,
                Some(v) if v != "0" && asked.is_some() && token.is_none() => {
                    if v.parse::<u64>().is_ok_and(|n| n < s.compacted) {
                        return status_response(410, "The resourceVersion for the provided list is too old.");
                    }
                    asked
                }
                _ => asked,
            };
            // Pages as the real server gives them: in name order, `limit`
            // at a time, `continue` (here the index) while there are more.
            items.sort_by(|a, b| a.0.cmp(b.0));
            let from: usize = token.and_then(|c| c.parse().ok()).unwrap_or(0);
            let limit = limit.unwrap_or(usize::MAX);
            let more = items.len() > from.saturating_add(limit);
            let items: Vec<Value> = items.into_iter().skip(from).take(limit).map(|(_, o)| o.clone()).collect();
            let rv = s.resource_version.to_string();
            let mut list = json!({"kind": "List", "metadata": {"resourceVersion": rv}, "items": items});
            if more {
                list["metadata"]["continue"] = json!((from + limit).to_string());
            }
            if let Some(fresh) = s.endless.get(&path).copied() {
                s.tokens_given += 1;
                let token = if fresh {
                    format!("eyJ2IjoibWV0YS5rOHMuaW8vdjEiLCJzdGFydCI6{}+/=", s.tokens_given)
                } else {
                    "eyJ2IjoibWV0YS5rOHMuaW8vdjEiLCJzdGFydCI6ImEifQ==".to_string()
                };
                list["metadata"]["continue"] = json!(token);
            }
            json_response(200, &list)
        }
        "PUT" => {
            let Ok(mut sent) = serde_json::from_slice::<Value>(&r.body) else {
                return status_response(400, "error decoding JSON");
            };
            let Some(stored) = s.custom.get(&path).cloned() else { return not_found() };
            if sent["metadata"]["resourceVersion"] != stored["metadata"]["resourceVersion"] {
                return status_response(
                    409,
                    &format!(
                        "Operation cannot be fulfilled on \"{name}\": the object has been modified; \
                         please apply your changes to the latest version and try again"
                    ),
                );
            }
            if status_only {
                let mut updated = stored;
                updated["status"] = sent["status"].take();
                sent = updated;
            }
            s.resource_version += 1;
            sent["metadata"]["resourceVersion"] = json!(s.resource_version.to_string());
            s.record(&path, "MODIFIED", &sent);
            s.custom.insert(path, sent.clone());
            json_response(200, &sent)
        }
        _ => status_response(405, "method not allowed"),
    }
}

fn is_watch(r: &Recorded) -> bool {
    r.method == "GET"
        && (r.path.starts_with("/apis/") || is_pods(&r.path))
        && r.query.split('&').any(|kv| kv == "watch=1" || kv == "watch=true")
}

/// Pods (`/api/v1/namespaces/NS/pods[/NAME]`) are kept, listed and watched
/// as custom resources are ([`FakeApiServer::put_custom`] stores one); a
/// list's `fieldSelector` is not applied.
fn is_pods(path: &str) -> bool {
    path.starts_with("/api/v1/namespaces/") && path.split('/').nth(5) == Some("pods")
}

fn query<'a>(r: &'a Recorded, key: &str) -> Option<&'a str> {
    r.query.split('&').find_map(|kv| kv.strip_prefix(key).and_then(|v| v.strip_prefix('=')))
}

/// `n` `ADDED` events of new calm resources with versions after `from`,
/// a thousand a chunk, then the end of the stream.
fn flood(namespace: &str, from: u64, n: u64) -> Reply {
    let namespace = namespace.to_string();
    let mut sent = 0;
    Reply::Stream(Box::new(move || {
        if sent == n {
            return Streamed::End;
        }
        let mut chunk = Vec::new();
        for _ in 0..1000.min(n - sent) {
            sent += 1;
            let event = json!({"type": "ADDED", "object": {"metadata": {"name": format!("flood-{sent:07}"),
                "namespace": namespace, "resourceVersion": (from + sent).to_string()},
                "status": {"conditions": [{"type": "Migrating", "status": "False"}]}}});
            chunk.extend_from_slice(format!("{event}\n").as_bytes());
        }
        Streamed::Chunk(chunk)
    }))
}

/// A 200 watch answer with one event, then its end.
fn one_event_then_end(event: Value) -> Reply {
    let mut sent = false;
    Reply::Stream(Box::new(move || {
        if std::mem::replace(&mut sent, true) {
            Streamed::End
        } else {
            Streamed::Chunk(format!("{event}\n").into_bytes())
        }
    }))
}

/// A watch of a collection: see the module doc.
fn watch(r: &Recorded, state: Arc<Mutex<State>>, changed: Arc<Condvar>) -> Reply {
    let token = r.authorization.as_deref().and_then(|a| a.strip_prefix("Bearer "));
    let (generation, compacted, fault, base) = {
        let mut s = state.lock().unwrap();
        if !token.is_some_and(|t| s.tokens.contains(t)) {
            return Reply::Answer(status_response(401, "Unauthorized"));
        }
        let fault = s.watch_fault;
        if let Some(WatchFault::Flood(n)) = fault {
            s.watch_fault = None;
            s.resource_version += n;
        }
        (s.watch_generation, s.compacted, fault, s.resource_version)
    };
    match fault {
        Some(WatchFault::Flood(n)) => return flood(r.path.rsplit('/').nth(1).unwrap_or_default(), base - n, n),
        Some(WatchFault::Refuse(code)) => return Reply::Answer(status_response(code, "injected watch fault")),
        Some(WatchFault::ErrorEvent(code)) => {
            let error = json!({"type": "ERROR", "object": {"kind": "Status", "apiVersion": "v1", "metadata": {},
                "status": "Failure", "message": "injected watch fault", "reason": reason(code), "code": code}});
            return one_event_then_end(error);
        }
        None => {}
    }
    let Some(Ok(mut last)) = query(r, "resourceVersion").map(str::parse::<u64>) else {
        return Reply::Answer(status_response(400, "this fake watches from a resourceVersion only"));
    };
    let seconds = query(r, "timeoutSeconds").and_then(|v| v.parse().ok()).unwrap_or(1800);
    let until = Instant::now() + Duration::from_secs(seconds);
    let prefix = format!("{}/", r.path);
    if last < compacted {
        let gone = json!({"type": "ERROR", "object": {"kind": "Status", "apiVersion": "v1", "metadata": {},
            "status": "Failure", "message": format!("too old resource version: {last} ({compacted})"),
            "reason": "Expired", "code": 410}});
        return one_event_then_end(gone);
    }
    Reply::Stream(Box::new(move || {
        let mut s = state.lock().unwrap();
        loop {
            if s.watch_generation != generation {
                return Streamed::Cut;
            }
            let next = s
                .events
                .iter()
                .find(|(rv, path, _)| *rv > last && path.starts_with(&prefix) && !path[prefix.len()..].contains('/'));
            if let Some((rv, _, event)) = next {
                last = *rv;
                return Streamed::Chunk(format!("{event}\n").into_bytes());
            }
            let left = until.saturating_duration_since(Instant::now());
            if left.is_zero() {
                return Streamed::End;
            }
            s = changed.wait_timeout(s, left.min(Duration::from_millis(200))).unwrap().0;
        }
    }))
}
