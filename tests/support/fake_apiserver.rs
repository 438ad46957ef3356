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

use super::pki::{self, TestPki};
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};
use serde_json::{Value, json};
use std::collections::{HashMap, HashSet, VecDeque};
use std::io::{BufRead, BufReader, Write};
use std::net::{Shutdown, SocketAddr, TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

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
}

/// A request as the server saw it.
#[derive(Clone, Debug)]
pub struct Recorded {
    pub method: String,
    pub path: String,
    pub query: String,
    pub content_type: Option<String>,
    pub authorization: Option<String>,
    pub body: Vec<u8>,
    pub at: Instant,
}

#[derive(Default)]
struct State {
    objects: HashMap<(String, String), Value>,
    tokens: HashSet<String>,
    faults: VecDeque<Fault>,
    /// A fault served to every request until cleared.
    sticky: Option<Fault>,
    requests: Vec<Recorded>,
    resource_version: u64,
}

pub struct FakeApiServer {
    pub addr: SocketAddr,
    pub pki: TestPki,
    state: Arc<Mutex<State>>,
    stop: Arc<AtomicBool>,
    accept_thread: Option<JoinHandle<()>>,
}

impl FakeApiServer {
    /// Starts a server on 127.0.0.1 with a certificate for 127.0.0.1 (an IP
    /// SAN) from a fresh CA, accepting `token`.
    pub fn start(token: &str) -> FakeApiServer {
        Self::start_with_pki(token, pki::generate("fake-apiserver-ca", &["127.0.0.1"]))
    }

    pub fn start_with_pki(token: &str, pki: TestPki) -> FakeApiServer {
        let certs = vec![CertificateDer::from_pem_slice(pki.server_cert_pem.as_bytes()).unwrap()];
        let key = PrivateKeyDer::from_pem_slice(pki.server_key_pem.as_bytes()).unwrap();
        let tls = rustls::ServerConfig::builder_with_provider(Arc::new(rustls::crypto::ring::default_provider()))
            .with_safe_default_protocol_versions()
            .unwrap()
            .with_no_client_auth()
            .with_single_cert(certs, key)
            .unwrap();
        let tls = Arc::new(tls);
        let listener = TcpListener::bind("127.0.0.1:0").expect("bind 127.0.0.1");
        let addr = listener.local_addr().unwrap();
        let state = Arc::new(Mutex::new(State::default()));
        state.lock().unwrap().tokens.insert(token.to_string());
        let stop = Arc::new(AtomicBool::new(false));
        let (st, sp) = (state.clone(), stop.clone());
        let accept_thread = std::thread::spawn(move || {
            for conn in listener.incoming() {
                if sp.load(Ordering::SeqCst) {
                    break;
                }
                let Ok(conn) = conn else { continue };
                let (st, tls, sp) = (st.clone(), tls.clone(), sp.clone());
                std::thread::spawn(move || serve_connection(conn, tls, st, sp));
            }
        });
        FakeApiServer { addr, pki, state, stop, accept_thread: Some(accept_thread) }
    }

    pub fn port(&self) -> u16 {
        self.addr.port()
    }

    pub fn url(&self) -> String {
        format!("https://127.0.0.1:{}", self.port())
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

    pub fn clear_sticky_fault(&self) {
        self.state.lock().unwrap().sticky = None;
    }

    pub fn requests(&self) -> Vec<Recorded> {
        self.state.lock().unwrap().requests.clone()
    }

    pub fn object(&self, namespace: &str, name: &str) -> Option<Value> {
        self.state.lock().unwrap().objects.get(&(namespace.into(), name.into())).cloned()
    }

    pub fn put_object(&self, namespace: &str, name: &str, object: Value) {
        self.state.lock().unwrap().objects.insert((namespace.into(), name.into()), object);
    }

    /// The parsed `status` document of a ConfigMap.
    pub fn status_document(&self, namespace: &str, name: &str) -> Option<Value> {
        let cm = self.object(namespace, name)?;
        serde_json::from_str(cm["data"]["status"].as_str()?).ok()
    }
}

impl Drop for FakeApiServer {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::SeqCst);
        // Wake the blocking accept so the thread sees the flag.
        let _ = TcpStream::connect(self.addr);
        if let Some(t) = self.accept_thread.take() {
            let _ = t.join();
        }
    }
}

fn serve_connection(tcp: TcpStream, tls: Arc<rustls::ServerConfig>, state: Arc<Mutex<State>>, stop: Arc<AtomicBool>) {
    let _ = tcp.set_read_timeout(Some(Duration::from_secs(20)));
    let Ok(conn) = rustls::ServerConnection::new(tls) else {
        return;
    };
    let mut stream = BufReader::new(rustls::StreamOwned::new(conn, tcp));
    while !stop.load(Ordering::SeqCst) {
        let Some(request) = read_request(&mut stream) else {
            return;
        };
        let fault = {
            let mut s = state.lock().unwrap();
            s.requests.push(request.clone());
            s.faults.pop_front().or_else(|| s.sticky.clone())
        };
        let response = match fault {
            Some(Fault::Hang(d)) => {
                std::thread::sleep(d);
                return;
            }
            Some(Fault::Close) => {
                let _ = stream.get_mut().sock.shutdown(Shutdown::Both);
                return;
            }
            Some(Fault::Status { code, retry_after }) => {
                let mut r = status_response(code, "injected fault");
                r.retry_after = retry_after;
                r
            }
            Some(Fault::Raw { code, body }) => Response { code, body, retry_after: None },
            None => handle(&request, &mut state.lock().unwrap()),
        };
        if write_response(stream.get_mut(), &response).is_err() {
            return;
        }
    }
}

fn read_request(stream: &mut impl BufRead) -> Option<Recorded> {
    let mut line = String::new();
    if stream.read_line(&mut line).ok()? == 0 {
        return None;
    }
    let mut parts = line.split_whitespace();
    let (method, target) = (parts.next()?.to_string(), parts.next()?.to_string());
    let (mut content_type, mut authorization, mut length) = (None, None, 0usize);
    loop {
        let mut header = String::new();
        if stream.read_line(&mut header).ok()? == 0 {
            return None;
        }
        let header = header.trim_end();
        if header.is_empty() {
            break;
        }
        let (name, value) = header.split_once(':')?;
        let value = value.trim().to_string();
        match name.to_ascii_lowercase().as_str() {
            "content-type" => content_type = Some(value),
            "authorization" => authorization = Some(value),
            "content-length" => length = value.parse().ok()?,
            _ => {}
        }
    }
    let mut body = vec![0; length];
    stream.read_exact(&mut body).ok()?;
    let (path, query) = match target.split_once('?') {
        Some((p, q)) => (p.to_string(), q.to_string()),
        None => (target, String::new()),
    };
    Some(Recorded { method, path, query, content_type, authorization, body, at: Instant::now() })
}

struct Response {
    code: u16,
    body: Vec<u8>,
    retry_after: Option<String>,
}

fn write_response(stream: &mut impl Write, r: &Response) -> std::io::Result<()> {
    let mut head =
        format!("HTTP/1.1 {} X\r\nContent-Type: application/json\r\nContent-Length: {}\r\n", r.code, r.body.len());
    if let Some(ra) = &r.retry_after {
        head += &format!("Retry-After: {ra}\r\n");
    }
    head += "\r\n";
    stream.write_all(head.as_bytes())?;
    stream.write_all(&r.body)?;
    stream.flush()
}

fn reason(code: u16) -> &'static str {
    match code {
        400 => "BadRequest",
        401 => "Unauthorized",
        403 => "Forbidden",
        404 => "NotFound",
        409 => "Conflict",
        415 => "UnsupportedMediaType",
        429 => "TooManyRequests",
        503 => "ServiceUnavailable",
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
            s.resource_version += 1;
            let rv = s.resource_version.to_string();
            let created = !s.objects.contains_key(&key);
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
            obj["metadata"]["resourceVersion"] = json!(rv);
            json_response(if created { 201 } else { 200 }, obj)
        }
        "PATCH" => match s.objects.get(&key) {
            Some(obj) => json_response(200, obj),
            None => status_response(404, &format!("configmaps \"{name}\" not found")),
        },
        _ => status_response(405, "method not allowed"),
    }
}
