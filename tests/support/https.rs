//! The HTTPS plumbing the in-process fakes share: a TLS listener on
//! 127.0.0.1 that reads each request, asks a handler what to do, and does
//! it (answer, hang, or close). Stops when dropped.

use super::pki::TestPki;
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};
use std::io::{BufRead, BufReader, Write};
use std::net::{Shutdown, SocketAddr, TcpListener, TcpStream};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

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
    /// The name the client asked for in its TLS handshake (SNI), if any.
    pub server_name: Option<String>,
}

/// An answer with a JSON (or raw) body.
#[derive(Clone, Debug)]
pub struct Response {
    pub code: u16,
    pub body: Vec<u8>,
    pub retry_after: Option<String>,
}

/// What to do with a request.
pub enum Reply {
    Answer(Response),
    /// Say nothing for this long, then close.
    Hang(Duration),
    /// Close the connection without an answer.
    Close,
    /// Send the answer one byte per `interval` (a slow or congested server).
    Trickle {
        response: Response,
        interval: Duration,
    },
    /// Send the headers and half the body, then reset the connection.
    CutBody(Response),
    /// Answer, then, `after` later, send `stray` on the same connection
    /// unasked (a second response, as a broken server or proxy sends).
    AnswerThenStray {
        response: Response,
        stray: Vec<u8>,
        after: Duration,
    },
    /// A streamed answer (a watch): 200 with a chunked body, one chunk per
    /// [`Streamed::Chunk`] the closure returns, until it says the stream
    /// ends (the connection stays open for the next request) or is cut.
    Stream(Box<dyn FnMut() -> Streamed + Send>),
}

/// The next part of a streamed answer.
pub enum Streamed {
    Chunk(Vec<u8>),
    End,
    /// Reset the connection mid-stream (a server that went away).
    Cut,
}

pub type Handler = dyn Fn(&Recorded) -> Reply + Send + Sync;

pub struct HttpsServer {
    pub addr: SocketAddr,
    stop: Arc<AtomicBool>,
    accept_thread: Option<JoinHandle<()>>,
    /// How long a connection may idle before the server closes it, in ms.
    idle_close: Arc<AtomicU64>,
    connections: Arc<AtomicUsize>,
}

/// A connection the server has waited on this long for a request is
/// closed, as real servers close idle keep-alive connections.
const IDLE_CLOSE: Duration = Duration::from_secs(20);

impl HttpsServer {
    pub fn start(pki: &TestPki, handler: Arc<Handler>) -> HttpsServer {
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
        let stop = Arc::new(AtomicBool::new(false));
        let idle_close = Arc::new(AtomicU64::new(IDLE_CLOSE.as_millis() as u64));
        let connections = Arc::new(AtomicUsize::new(0));
        let (sp, idle, count) = (stop.clone(), idle_close.clone(), connections.clone());
        let accept_thread = std::thread::spawn(move || {
            for conn in listener.incoming() {
                if sp.load(Ordering::SeqCst) {
                    break;
                }
                let Ok(conn) = conn else { continue };
                count.fetch_add(1, Ordering::SeqCst);
                let (tls, handler, sp, idle) = (tls.clone(), handler.clone(), sp.clone(), idle.clone());
                std::thread::spawn(move || serve_connection(conn, tls, &*handler, &sp, &idle));
            }
        });
        HttpsServer { addr, stop, accept_thread: Some(accept_thread), idle_close, connections }
    }

    /// From now on, close a connection that waited `after` for its next
    /// request (a connection already waiting keeps its old limit for that
    /// wait).
    pub fn close_idle_after(&self, after: Duration) {
        self.idle_close.store(after.as_millis() as u64, Ordering::SeqCst);
    }

    /// TCP connections accepted so far.
    pub fn connections(&self) -> usize {
        self.connections.load(Ordering::SeqCst)
    }
}

impl Drop for HttpsServer {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::SeqCst);
        // Wake the blocking accept so the thread sees the flag.
        let _ = TcpStream::connect(self.addr);
        if let Some(t) = self.accept_thread.take() {
            let _ = t.join();
        }
    }
}

fn serve_connection(
    tcp: TcpStream,
    tls: Arc<rustls::ServerConfig>,
    handler: &Handler,
    stop: &AtomicBool,
    idle_close: &AtomicU64,
) {
    let Ok(conn) = rustls::ServerConnection::new(tls) else { return };
    let mut stream = BufReader::new(rustls::StreamOwned::new(conn, tcp));
    while !stop.load(Ordering::SeqCst) {
        let idle = Duration::from_millis(idle_close.load(Ordering::SeqCst).max(1));
        let _ = stream.get_ref().sock.set_read_timeout(Some(idle));
        let Some(mut request) = read_request(&mut stream) else { return };
        request.server_name = stream.get_ref().conn.server_name().map(String::from);
        match handler(&request) {
            Reply::Hang(d) => {
                std::thread::sleep(d);
                return;
            }
            Reply::Close => {
                let _ = stream.get_mut().sock.shutdown(Shutdown::Both);
                return;
            }
            Reply::Answer(response) => {
                if write_response(stream.get_mut(), &response).is_err() {
                    return;
                }
            }
            Reply::AnswerThenStray { response, stray, after } => {
                if write_response(stream.get_mut(), &response).is_err() {
                    return;
                }
                std::thread::sleep(after);
                if stream.get_mut().write_all(&stray).and_then(|_| stream.get_mut().flush()).is_err() {
                    return;
                }
            }
            Reply::Trickle { response, interval } => {
                let mut bytes = Vec::new();
                let _ = write_response(&mut bytes, &response);
                for byte in bytes {
                    if stop.load(Ordering::SeqCst)
                        || stream.get_mut().write_all(&[byte]).and_then(|_| stream.get_mut().flush()).is_err()
                    {
                        return;
                    }
                    std::thread::sleep(interval);
                }
            }
            Reply::Stream(mut next) => {
                let head = "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\n";
                if stream.get_mut().write_all(head.as_bytes()).and_then(|_| stream.get_mut().flush()).is_err() {
                    return;
                }
                loop {
                    if stop.load(Ordering::SeqCst) {
                        return;
                    }
                    let chunk = match next() {
                        Streamed::Chunk(bytes) => {
                            let mut chunk = format!("{:x}\r\n", bytes.len()).into_bytes();
                            chunk.extend_from_slice(&bytes);
                            chunk.extend_from_slice(b"\r\n");
                            chunk
                        }
                        Streamed::End => b"0\r\n\r\n".to_vec(),
                        Streamed::Cut => {
                            let _ = stream.get_mut().sock.shutdown(Shutdown::Both);
                            return;
                        }
                    };
                    let end = chunk == b"0\r\n\r\n";
                    if stream.get_mut().write_all(&chunk).and_then(|_| stream.get_mut().flush()).is_err() {
                        return;
                    }
                    if end {
                        break;
                    }
                }
            }
            Reply::CutBody(response) => {
                let mut bytes = Vec::new();
                let _ = write_response(&mut bytes, &response);
                let cut = bytes.len() - response.body.len() / 2;
                let _ = stream.get_mut().write_all(&bytes[..cut]);
                let _ = stream.get_mut().flush();
                let _ = stream.get_mut().sock.shutdown(Shutdown::Both);
                return;
            }
        }
    }
}

pub fn read_request(stream: &mut impl BufRead) -> Option<Recorded> {
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
    Some(Recorded { method, path, query, content_type, authorization, body, at: Instant::now(), server_name: None })
}

pub fn write_response(stream: &mut impl Write, r: &Response) -> std::io::Result<()> {
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
