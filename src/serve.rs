//! The probe and metrics endpoint: `/healthz`, `/readyz`, `/status`,
//! `/metrics`.
//!
//! It runs on a thread of its own because the agent's API calls block (up to
//! their timeouts when the API server hangs) and kubelet's probes must still
//! be answered within a second. That thread is one readiness loop (mio), so
//! any number of slow or silent clients cost it nothing but their socket:
//! every connection has a deadline ([`CONNECTION_TIMEOUT`]), a request-head
//! cap ([`MAX_HEAD`]) and is closed after one answer; past
//! [`MAX_CONNECTIONS`] new ones are closed at once. Memory is bounded by
//! `MAX_CONNECTIONS × MAX_HEAD` (1 MiB) plus one response each.
//!
//! [`parse_request`] and [`respond`] are pure and unit-tested.

use crate::metrics::Metrics;
use crate::status::{Health, Verdict};
use mio::net::{TcpListener, TcpStream};
use mio::{Events, Interest, Poll, Token};
use std::io::{self, Read, Write};
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// A request head larger than this is refused (431).
pub const MAX_HEAD: usize = 4096;
/// Connections served at once; more are closed on accept.
pub const MAX_CONNECTIONS: usize = 256;
/// A connection must have sent its request and taken its answer by then.
pub const CONNECTION_TIMEOUT: Duration = Duration::from_secs(2);

/// What the agent shares with the endpoint, updated on every tick.
#[derive(Clone, Debug)]
pub struct Snapshot {
    /// The current health, write failures included.
    pub verdict: Verdict,
    /// The current status document, as JSON.
    pub status_json: String,
    pub metrics: Metrics,
    /// When the agent's loop last completed a tick.
    pub last_tick: Instant,
    /// `/healthz` fails when no tick completed for this long.
    pub liveness_window: Duration,
}

pub type Shared = Arc<Mutex<Snapshot>>;

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

/// Parses an HTTP/1.x request head. Only the request line matters here;
/// headers are skipped, bodies never read.
pub fn parse_request(buf: &[u8]) -> Parsed<'_> {
    let end = buf.windows(2).position(|w| w == b"\n\n").or_else(|| buf.windows(4).position(|w| w == b"\r\n\r\n"));
    if end.is_none() {
        return if buf.len() >= MAX_HEAD { Parsed::TooLarge } else { Parsed::Incomplete };
    }
    let line_end = buf.iter().position(|&b| b == b'\n').unwrap_or(buf.len());
    let Ok(line) = std::str::from_utf8(&buf[..line_end]) else {
        return Parsed::Bad;
    };
    let mut parts = line.trim_end_matches('\r').split(' ');
    let (Some(method), Some(target), Some(version), None) = (parts.next(), parts.next(), parts.next(), parts.next())
    else {
        return Parsed::Bad;
    };
    let method_ok = !method.is_empty() && method.bytes().all(|b| b.is_ascii_uppercase());
    if !method_ok || !target.starts_with('/') || !matches!(version, "HTTP/1.0" | "HTTP/1.1") {
        return Parsed::Bad;
    }
    let path = target.split('?').next().unwrap_or(target);
    Parsed::Request { method, path }
}

/// An answer: status code, content type, body.
#[derive(Debug, PartialEq, Eq)]
pub struct Response {
    pub code: u16,
    pub content_type: &'static str,
    pub body: String,
}

const TEXT: &str = "text/plain; charset=utf-8";

fn text(code: u16, body: impl Into<String>) -> Response {
    Response { code, content_type: TEXT, body: body.into() }
}

/// Routes one request against the current snapshot.
pub fn respond(parsed: &Parsed<'_>, snapshot: &Snapshot, now: Instant) -> Response {
    let (method, path) = match parsed {
        Parsed::Request { method, path } => (*method, *path),
        Parsed::TooLarge => return text(431, "request header too large\n"),
        Parsed::Bad | Parsed::Incomplete => return text(400, "bad request\n"),
    };
    if !matches!(path, "/healthz" | "/readyz" | "/status" | "/metrics") {
        return text(404, "not found: try /healthz, /readyz, /status or /metrics\n");
    }
    if method != "GET" {
        return text(405, "method not allowed: use GET\n");
    }
    let reason = snapshot.verdict.error.as_deref().unwrap_or("");
    match path {
        "/healthz" => {
            let quiet = now.saturating_duration_since(snapshot.last_tick);
            if quiet > snapshot.liveness_window {
                text(503, format!("the agent loop has not completed a tick for {}s\n", quiet.as_secs()))
            } else {
                text(200, "ok\n")
            }
        }
        "/readyz" => match snapshot.verdict.health {
            Health::Unhealthy => text(503, format!("unhealthy: {reason}\n")),
            Health::Degraded => text(200, format!("degraded: {reason}\n")),
            Health::Healthy => text(200, "healthy\n"),
        },
        "/status" if snapshot.status_json.is_empty() => text(503, "no status yet: the agent is starting\n"),
        "/status" => {
            Response { code: 200, content_type: "application/json", body: snapshot.status_json.clone() + "\n" }
        }
        _ => Response {
            code: 200,
            content_type: "text/plain; version=0.0.4; charset=utf-8",
            body: snapshot.metrics.render(snapshot.verdict.health),
        },
    }
}

fn reason_phrase(code: u16) -> &'static str {
    match code {
        200 => "OK",
        400 => "Bad Request",
        404 => "Not Found",
        405 => "Method Not Allowed",
        431 => "Request Header Fields Too Large",
        _ => "Service Unavailable",
    }
}

fn encode(r: &Response) -> Vec<u8> {
    let allow = if r.code == 405 { "Allow: GET\r\n" } else { "" };
    let head = format!(
        "HTTP/1.1 {} {}\r\nContent-Type: {}\r\nContent-Length: {}\r\n{allow}Cache-Control: no-store\r\nConnection: close\r\n\r\n",
        r.code,
        reason_phrase(r.code),
        r.content_type,
        r.body.len()
    );
    let mut out = head.into_bytes();
    out.extend_from_slice(r.body.as_bytes());
    out
}

/// Binds `addr` now (so a bad address fails at start) and serves on a
/// thread of its own. Returns the bound address.
pub fn spawn(addr: SocketAddr, shared: Shared) -> io::Result<SocketAddr> {
    let std_listener = std::net::TcpListener::bind(addr)?;
    std_listener.set_nonblocking(true)?;
    let listener = TcpListener::from_std(std_listener);
    let bound = listener.local_addr()?;
    std::thread::Builder::new().name("endpoint".into()).stack_size(128 * 1024).spawn(move || {
        if let Err(e) = serve(listener, &shared) {
            log::error!("The probe endpoint stopped: {e}");
        }
    })?;
    Ok(bound)
}

const LISTENER: Token = Token(usize::MAX);

struct Connection {
    stream: TcpStream,
    head: Vec<u8>,
    /// The encoded answer and how much of it is written; `None` while the
    /// request is still being read.
    answer: Option<(Vec<u8>, usize)>,
    deadline: Instant,
}

fn serve(mut listener: TcpListener, shared: &Shared) -> io::Result<()> {
    let mut poll = Poll::new()?;
    poll.registry().register(&mut listener, LISTENER, Interest::READABLE)?;
    let mut events = Events::with_capacity(64);
    let mut slots: Vec<Option<Connection>> = Vec::new();
    loop {
        let now = Instant::now();
        let timeout = slots.iter().flatten().map(|c| c.deadline.saturating_duration_since(now)).min();
        if let Err(e) = poll.poll(&mut events, timeout) {
            if e.kind() == io::ErrorKind::Interrupted {
                continue;
            }
            return Err(e);
        }
        for event in &events {
            if event.token() == LISTENER {
                accept_all(&listener, &poll, &mut slots);
                continue;
            }
            let i = event.token().0;
            let done = match slots.get_mut(i).and_then(Option::as_mut) {
                Some(conn) => advance(conn, shared),
                None => false,
            };
            if done {
                close(&poll, &mut slots, i);
            }
        }
        let now = Instant::now();
        for i in 0..slots.len() {
            if slots[i].as_ref().is_some_and(|c| c.deadline <= now) {
                close(&poll, &mut slots, i);
            }
        }
    }
}

fn accept_all(listener: &TcpListener, poll: &Poll, slots: &mut Vec<Option<Connection>>) {
    loop {
        let (mut stream, _) = match listener.accept() {
            Ok(s) => s,
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => return,
            Err(_) => continue, // The peer gave up before we accepted.
        };
        let free = slots.iter().position(Option::is_none);
        let i = match free {
            Some(i) => i,
            None if slots.len() < MAX_CONNECTIONS => {
                slots.push(None);
                slots.len() - 1
            }
            None => continue, // Full: dropping the stream closes it.
        };
        if poll.registry().register(&mut stream, Token(i), Interest::READABLE | Interest::WRITABLE).is_ok() {
            slots[i] = Some(Connection {
                stream,
                head: Vec::new(),
                answer: None,
                deadline: Instant::now() + CONNECTION_TIMEOUT,
            });
        }
    }
}

fn close(poll: &Poll, slots: &mut [Option<Connection>], i: usize) {
    if let Some(mut conn) = slots[i].take() {
        let _ = poll.registry().deregister(&mut conn.stream);
    }
}

/// Moves a connection as far as its socket allows; true when it is finished
/// (answered or broken) and should be closed.
fn advance(conn: &mut Connection, shared: &Shared) -> bool {
    if conn.answer.is_none() {
        let mut chunk = [0u8; 1024];
        loop {
            match conn.stream.read(&mut chunk) {
                Ok(0) => return true,
                Ok(n) => {
                    let room = MAX_HEAD.saturating_sub(conn.head.len());
                    conn.head.extend_from_slice(&chunk[..n.min(room)]);
                    let parsed = parse_request(&conn.head);
                    if parsed != Parsed::Incomplete {
                        let snapshot = shared.lock().unwrap_or_else(|p| p.into_inner()).clone();
                        conn.answer = Some((encode(&respond(&parsed, &snapshot, Instant::now())), 0));
                        conn.head = Vec::new();
                        break;
                    }
                }
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => return false,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(_) => return true,
            }
        }
    }
    let Some((bytes, written)) = conn.answer.as_mut() else { return false };
    while *written < bytes.len() {
        match conn.stream.write(&bytes[*written..]) {
            Ok(0) => return true,
            Ok(n) => *written += n,
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => return false,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(_) => return true,
        }
    }
    let _ = conn.stream.shutdown(std::net::Shutdown::Write);
    true
}

#[cfg(test)]
mod tests {
    use super::*;

    fn snapshot(health: Health, error: Option<&str>) -> Snapshot {
        Snapshot {
            verdict: Verdict { health, error: error.map(String::from) },
            status_json: r#"{"mode":"operated"}"#.into(),
            metrics: Metrics::default(),
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
    fn routes() {
        let s = snapshot(Health::Degraded, Some("Operator health check http://x failed: HTTP 500"));
        let now = Instant::now();
        let answer = |req: &str| respond(&parse_request(req.as_bytes()), &s, now);
        assert_eq!(answer(&get("/healthz")), text(200, "ok\n"));
        assert_eq!(answer(&get("/readyz")), text(200, "degraded: Operator health check http://x failed: HTTP 500\n"));
        assert_eq!(
            answer(&get("/status")),
            Response { code: 200, content_type: "application/json", body: "{\"mode\":\"operated\"}\n".into() }
        );
        let metrics = answer(&get("/metrics"));
        assert_eq!((metrics.code, metrics.content_type), (200, "text/plain; version=0.0.4; charset=utf-8"));
        assert!(metrics.body.contains("kube9_operator_health_status{health=\"degraded\"} 1"));
        assert_eq!(answer(&get("/")).code, 404);
        assert_eq!(answer(&get("/readyz/extra")).code, 404);
        assert_eq!(answer("POST /readyz HTTP/1.1\r\n\r\n").code, 405);
        assert_eq!(answer("HEAD /metrics HTTP/1.1\r\n\r\n").code, 405);
    }

    #[test]
    fn readyz_fails_when_unhealthy_and_healthz_when_the_loop_stalls() {
        let s = snapshot(Health::Unhealthy, Some("Failed to write status ConfigMap: 403 Forbidden"));
        let now = s.last_tick;
        let r = respond(&parse_request(get("/readyz").as_bytes()), &s, now);
        assert_eq!(r, text(503, "unhealthy: Failed to write status ConfigMap: 403 Forbidden\n"));
        let healthy = respond(&parse_request(get("/readyz").as_bytes()), &snapshot(Health::Healthy, None), now);
        assert_eq!(healthy, text(200, "healthy\n"));
        let starting = Snapshot { status_json: String::new(), ..s.clone() };
        assert_eq!(respond(&parse_request(get("/status").as_bytes()), &starting, now).code, 503);
        let stalled = respond(&parse_request(get("/healthz").as_bytes()), &s, now + Duration::from_secs(181));
        assert_eq!(stalled, text(503, "the agent loop has not completed a tick for 181s\n"));
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
}
