//! The endpoint's pure half: parsing a request head and answering it
//! from a [`Snapshot`]. No sockets here; unit-tested.

use super::{MAX_HEAD, Snapshot};
use crate::status::Health;

/// The outcome of reading a request head so far.
#[derive(Debug, PartialEq, Eq)]
pub enum Parsed<'a> {
    /// More bytes are needed.
    Incomplete,
    Request {
        method: &'a str,
        path: &'a str,
    },
    Bad,
    TooLarge,
}

/// Header lines a request may have (kubelet sends four): more is 431, as a
/// head over [`MAX_HEAD`] is. Kept on the endpoint thread's stack.
const MAX_HEADERS: usize = 64;

/// Parses an HTTP/1.x request head with `httparse`, under opstatus's own
/// rules: a head not complete within [`MAX_HEAD`] bytes is too large; the
/// method is upper case, the target a path (its query dropped), the
/// version 1.0 or 1.1; anything else is bad. Header values are not used,
/// bodies never read.
pub fn parse_request(buf: &[u8]) -> Parsed<'_> {
    // httparse skips blank lines before a request line; here one is bad.
    if matches!(buf.first(), Some(b'\r' | b'\n')) {
        return Parsed::Bad;
    }
    let mut headers = [httparse::EMPTY_HEADER; MAX_HEADERS];
    let mut request = httparse::Request::new(&mut headers);
    match request.parse(buf) {
        Ok(httparse::Status::Complete(_)) => {}
        Err(httparse::Error::TooManyHeaders) => return Parsed::TooLarge,
        _ if buf.len() >= MAX_HEAD => return Parsed::TooLarge,
        Ok(httparse::Status::Partial) => return Parsed::Incomplete,
        Err(_) => return Parsed::Bad,
    }
    let (Some(method), Some(target)) = (request.method, request.path) else {
        return Parsed::Bad;
    };
    if !method.bytes().all(|b| b.is_ascii_uppercase()) || !target.starts_with('/') {
        return Parsed::Bad;
    }
    let path = target.split('?').next().unwrap_or(target);
    Parsed::Request { method, path }
}

/// An answer: status code, content type, body.
#[derive(Debug, PartialEq, Eq)]
pub(crate) struct Response {
    pub code: u16,
    pub content_type: &'static str,
    pub body: String,
}

const TEXT: &str = "text/plain; charset=utf-8";

pub(crate) fn text(code: u16, body: impl Into<String>) -> Response {
    Response { code, content_type: TEXT, body: body.into() }
}

/// Routes one request against the current snapshot.
pub(crate) fn respond(parsed: &Parsed<'_>, snapshot: &Snapshot, now: std::time::Instant) -> Response {
    let (method, path) = match parsed {
        Parsed::Request { method, path } => (*method, *path),
        Parsed::TooLarge => return text(431, "request header too large\n"),
        Parsed::Bad | Parsed::Incomplete => return text(400, "bad request\n"),
    };
    if !matches!(path, "/healthz" | "/readyz" | "/status" | "/metrics" | "/prestop" | "/leader") {
        return text(404, "not found: try /healthz, /readyz, /status, /metrics or /leader\n");
    }
    if method != "GET" {
        return text(405, "method not allowed: use GET\n");
    }
    let reason = snapshot.verdict.error.as_deref().unwrap_or("");
    match path {
        // kubelet's preStop hook: the endpoint's loop notes it for the agent.
        "/prestop" => text(200, "the pod is stopping: handing the status over\n"),
        "/healthz" => {
            let quiet = now.saturating_duration_since(snapshot.last_tick);
            if quiet > snapshot.liveness_window {
                text(503, format!("the agent loop has not completed a tick for {}s\n", quiet.as_secs()))
            } else {
                text(200, "ok\n")
            }
        }
        "/readyz" => {
            let ready = &snapshot.readiness;
            let why = ready.error.as_deref().unwrap_or("");
            let mut body = match ready.health {
                Health::Unhealthy => return text(503, format!("unhealthy: {why}\n")),
                Health::Degraded => format!("degraded: {why}"),
                Health::Healthy => "healthy".to_string(),
            };
            // What readiness leaves out is still said.
            if snapshot.verdict != *ready {
                body += &format!("; opstatus: {}", snapshot.verdict.health.as_str());
                if !reason.is_empty() {
                    body += &format!(": {reason}");
                }
            }
            text(200, body + "\n")
        }
        // For people and monitoring, never for readiness: standby pods
        // stay Ready, so rollouts proceed.
        "/leader" => match &snapshot.leader {
            None => text(404, "not found: /leader needs --leader-service\n"),
            Some(view) => text(if view.leads { 200 } else { 503 }, format!("{}\n", view.says)),
        },
        "/status" => match &snapshot.status {
            None => text(503, "no status yet: the agent is starting\n"),
            Some(view) => Response { code: 200, content_type: "application/json", body: view.to_json() + "\n" },
        },
        _ => Response {
            code: 200,
            content_type: "text/plain; version=0.0.4; charset=utf-8",
            body: snapshot.metrics.render(snapshot.verdict.health),
        },
    }
}

pub(crate) fn encode(r: &Response) -> Vec<u8> {
    let allow = if r.code == 405 { "Allow: GET\r\n" } else { "" };
    let head = format!(
        "HTTP/1.1 {} {}\r\nContent-Type: {}\r\nContent-Length: {}\r\n{allow}Cache-Control: no-store\r\nConnection: close\r\n\r\n",
        r.code,
        ureq::http::StatusCode::from_u16(r.code).ok().and_then(|c| c.canonical_reason()).unwrap_or(""),
        r.content_type,
        r.body.len()
    );
    let mut out = head.into_bytes();
    out.extend_from_slice(r.body.as_bytes());
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::endpoint::prometheus::Metrics;
    use crate::endpoint::status_view::StatusView;
    use crate::status::{StatusDocument, Verdict};
    use std::time::{Duration, Instant};

    fn snapshot(health: Health, error: Option<&str>) -> Snapshot {
        Snapshot {
            verdict: Verdict { health, error: error.map(String::from) },
            readiness: Verdict { health, error: error.map(String::from) },
            status: Some(StatusView {
                doc: StatusDocument::example(),
                publisher: None,
                publishing: true,
                write_error: None,
                unseen: Vec::new(),
                listing: Vec::new(),
                yielded_to: None,
                credentials: String::new(),
                overwriting: None,
                pending: Vec::new(),
                conditions: Vec::new(),
            }),
            metrics: Metrics::default(),
            pod_stopping: false,
            leader: None,
            last_tick: Instant::now(),
            liveness_window: Duration::from_secs(180),
        }
    }

    fn get(path: &str) -> String {
        format!("GET {path} HTTP/1.1\r\nHost: x\r\nUser-Agent: kube-probe/1.30\r\n\r\n")
    }

    #[test]
    fn parses_complete_requests_and_waits_for_partial_ones() {
        assert_eq!(parse_request(get("/readyz?x=1").as_bytes()), Parsed::Request { method: "GET", path: "/readyz" });
        assert_eq!(parse_request(b"GET /healthz HTTP/1.0\n\n"), Parsed::Request { method: "GET", path: "/healthz" });
        let full = get("/metrics");
        for cut in 0..full.len() - 1 {
            assert_eq!(parse_request(&full.as_bytes()[..cut]), Parsed::Incomplete, "cut at {cut}");
        }
    }

    #[test]
    fn refuses_bad_and_oversize_heads() {
        for bad in [
            &b"\r\n\r\n"[..],
            b"GET\r\n\r\n",
            b"GET /x\r\n\r\n",
            b"get /x HTTP/1.1\r\n\r\n",
            b"GET x HTTP/1.1\r\n\r\n",
            b"GET /x HTTP/2\r\n\r\n",
            b"GET /x HTTP/1.1 extra\r\n\r\n",
            b"\xff\xfe /x HTTP/1.1\r\n\r\n",
        ] {
            assert_eq!(parse_request(bad), Parsed::Bad, "{:?}", String::from_utf8_lossy(bad));
        }
        let mut huge = b"GET / HTTP/1.1\r\nX: ".to_vec();
        huge.resize(MAX_HEAD, b'a');
        assert_eq!(parse_request(&huge), Parsed::TooLarge);
        assert_eq!(respond(&Parsed::TooLarge, &snapshot(Health::Healthy, None), Instant::now()).code, 431);
        assert_eq!(respond(&Parsed::Bad, &snapshot(Health::Healthy, None), Instant::now()).code, 400);
    }

    #[test]
    fn opstatus_rules_on_top_of_httparse() {
        // Too many header lines is too large a head; a bad header line is bad.
        let mut many = b"GET /readyz HTTP/1.1\r\n".to_vec();
        for i in 0..=MAX_HEADERS {
            many.extend_from_slice(format!("X-{i}: a\r\n").as_bytes());
        }
        many.extend_from_slice(b"\r\n");
        assert_eq!(parse_request(&many), Parsed::TooLarge);
        assert_eq!(parse_request(b"GET /readyz HTTP/1.1\r\nno colon\r\n\r\n"), Parsed::Bad);
        // A blank line before the request line, a bad line seen early.
        assert_eq!(parse_request(b"\nGET /readyz HTTP/1.1\r\n\r\n"), Parsed::Bad);
        assert_eq!(parse_request(b"GET /x HTTP/3"), Parsed::Bad);
        // A complete head of exactly the cap is still read.
        let mut full = b"GET /readyz?a=b HTTP/1.1\r\nX: ".to_vec();
        full.resize(MAX_HEAD - 4, b'a');
        full.extend_from_slice(b"\r\n\r\n");
        assert_eq!(parse_request(&full), Parsed::Request { method: "GET", path: "/readyz" });
    }

    #[test]
    fn routes() {
        let s = snapshot(Health::Degraded, Some("Operator health check http://x failed: HTTP 500"));
        let now = Instant::now();
        let answer = |req: &str| respond(&parse_request(req.as_bytes()), &s, now);
        assert_eq!(answer(&get("/healthz")), text(200, "ok\n"));
        assert_eq!(answer(&get("/readyz")), text(200, "degraded: Operator health check http://x failed: HTTP 500\n"));
        assert_eq!(
            answer(&get("/status")),
            Response {
                code: 200,
                content_type: "application/json",
                body: s.status.as_ref().expect("a view").to_json() + "\n"
            }
        );
        let metrics = answer(&get("/metrics"));
        assert_eq!((metrics.code, metrics.content_type), (200, "text/plain; version=0.0.4; charset=utf-8"));
        assert!(metrics.body.contains("kube9_operator_health_status{health=\"degraded\"} 1"));
        assert_eq!(answer(&get("/prestop")), text(200, "the pod is stopping: handing the status over\n"));
        assert_eq!(answer("POST /prestop HTTP/1.1\r\n\r\n").code, 405);
        assert_eq!(answer(&get("/")).code, 404);
        assert_eq!(answer(&get("/readyz/extra")).code, 404);
        assert_eq!(answer("POST /readyz HTTP/1.1\r\n\r\n").code, 405);
        assert_eq!(answer("HEAD /metrics HTTP/1.1\r\n\r\n").code, 405);
    }

    #[test]
    fn leader_is_200_in_the_leaders_pod_503_elsewhere_and_leaves_readyz_alone() {
        use crate::endpoint::LeaderView;
        let now = Instant::now();
        let with = |leader| Snapshot { leader, ..snapshot(Health::Healthy, None) };
        let answer = |s: &Snapshot, path| respond(&parse_request(get(path).as_bytes()), s, now);
        let off = with(None);
        assert_eq!(answer(&off, "/leader"), text(404, "not found: /leader needs --leader-service\n"));
        let leads = with(Some(LeaderView { leads: true, says: "leader: this pod (op-0) leads".into() }));
        assert_eq!(answer(&leads, "/leader"), text(200, "leader: this pod (op-0) leads\n"));
        let standby = with(Some(LeaderView { leads: false, says: "not the leader: op-0 leads".into() }));
        assert_eq!(answer(&standby, "/leader"), text(503, "not the leader: op-0 leads\n"));
        assert_eq!(answer(&standby, "/readyz"), answer(&leads, "/readyz"), "a standby is as ready as the leader");
        assert_eq!(answer(&standby, "/readyz"), text(200, "healthy\n"));
        assert_eq!(respond(&parse_request(b"POST /leader HTTP/1.1\r\n\r\n"), &leads, now).code, 405);
    }

    #[test]
    fn readyz_fails_when_unhealthy_and_healthz_when_the_loop_stalls() {
        let s = snapshot(Health::Unhealthy, Some("Failed to write status ConfigMap: 403 Forbidden"));
        let now = s.last_tick;
        let r = respond(&parse_request(get("/readyz").as_bytes()), &s, now);
        assert_eq!(r, text(503, "unhealthy: Failed to write status ConfigMap: 403 Forbidden\n"));
        let healthy = respond(&parse_request(get("/readyz").as_bytes()), &snapshot(Health::Healthy, None), now);
        assert_eq!(healthy, text(200, "healthy\n"));
        let starting = Snapshot { status: None, ..s.clone() };
        assert_eq!(respond(&parse_request(get("/status").as_bytes()), &starting, now).code, 503);
        let stalled = respond(&parse_request(get("/healthz").as_bytes()), &s, now + Duration::from_secs(181));
        assert_eq!(stalled, text(503, "the agent loop has not completed a tick for 181s\n"));
    }

    #[test]
    fn readyz_answers_for_the_operator_and_says_what_it_leaves_out() {
        let now = Instant::now();
        let readyz = |s: &Snapshot| respond(&parse_request(get("/readyz").as_bytes()), s, now);
        // The API server is down: opstatus is unhealthy, the operator is not.
        let outage = Snapshot {
            readiness: Verdict { health: Health::Healthy, error: None },
            ..snapshot(Health::Unhealthy, Some("Failed to write status ConfigMap: connection refused"))
        };
        assert_eq!(
            readyz(&outage),
            text(200, "healthy; opstatus: unhealthy: Failed to write status ConfigMap: connection refused\n")
        );
        // The operator is down: not ready, whatever opstatus's own state.
        let down = "Operator health check http://127.0.0.1:8081/healthz failed: HTTP 500";
        let operator_down = Snapshot {
            readiness: Verdict { health: Health::Unhealthy, error: Some(down.to_string()) },
            ..outage.clone()
        };
        assert_eq!(readyz(&operator_down), text(503, format!("unhealthy: {down}\n")));
    }

    #[test]
    fn answers_are_complete_http_with_connection_close() {
        let bytes = encode(&text(405, "method not allowed: use GET\n"));
        let s = String::from_utf8(bytes).unwrap();
        assert!(s.starts_with("HTTP/1.1 405 Method Not Allowed\r\n"), "{s}");
        assert!(
            s.contains("\r\nAllow: GET\r\n")
                && s.contains("\r\nConnection: close\r\n")
                && s.contains("\r\nContent-Length: 28\r\n"),
            "{s}"
        );
        assert!(s.ends_with("\r\n\r\nmethod not allowed: use GET\n"));
    }

    #[test]
    fn each_answer_carries_its_own_reason_phrase() {
        let head = |r: &Response| String::from_utf8(encode(r)).unwrap().lines().next().unwrap().to_string();
        let phrases = [
            (200, "OK"),
            (400, "Bad Request"),
            (403, "Forbidden"),
            (404, "Not Found"),
            (431, "Request Header Fields Too Large"),
            (503, "Service Unavailable"),
        ];
        for (code, phrase) in phrases {
            assert_eq!(head(&text(code, "")), format!("HTTP/1.1 {code} {phrase}"));
        }
    }
}
