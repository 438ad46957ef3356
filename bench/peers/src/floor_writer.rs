//! The floor: the least any client can do for opstatus's job. One rustls
//! connection kept open; one PATCH (server-side apply of the kube9 status
//! ConfigMap) serialised once, its timestamp overwritten in place, written
//! in one write per heartbeat; the answer read (head, then its
//! Content-Length or chunked body) and dropped; nothing printed. Same
//! environment and arguments as kube_writer.rs; the token is read once (the
//! benchmark's tokens last an hour).
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, ServerName};
use std::io::{Read, Write};
use std::net::TcpStream;
use std::sync::Arc;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

const CM: &str = "kube9-operator-status";
const STAMP: &str = "0000000000";

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let sa = std::env::var("OPSTATUS_SERVICE_ACCOUNT_DIR")?;
    let interval: f64 = std::env::args().nth(1).map_or(Ok(60.0), |s| s.parse())?;
    let host = std::env::var("KUBERNETES_SERVICE_HOST")?;
    let port: u16 = std::env::var("KUBERNETES_SERVICE_PORT")?.parse()?;
    let token = std::fs::read_to_string(format!("{sa}/token"))?.trim().to_string();
    let ns = std::fs::read_to_string(format!("{sa}/namespace"))?.trim().to_string();
    let mut roots = rustls::RootCertStore::empty();
    for cert in CertificateDer::pem_file_iter(format!("{sa}/ca.crt"))? {
        roots.add(cert?)?;
    }
    let config = rustls::ClientConfig::builder().with_root_certificates(roots).with_no_client_auth();
    let connection = rustls::ClientConnection::new(Arc::new(config), ServerName::try_from(host.clone())?)?;
    let socket = TcpStream::connect((host.as_str(), port))?;
    socket.set_nodelay(true)?;
    let mut tls = rustls::StreamOwned::new(connection, socket);
    let status = format!(
        r#"{{\"mode\":\"operated\",\"tier\":\"free\",\"version\":\"1.0.0\",\"health\":\"healthy\",\"lastUpdate\":\"{STAMP}\",\"registered\":false,\"error\":null,\"namespace\":\"{ns}\"}}"#
    );
    let body = format!(
        r#"{{"apiVersion":"v1","kind":"ConfigMap","metadata":{{"name":"{CM}","namespace":"{ns}"}},"data":{{"status":"{status}"}}}}"#
    );
    let mut request = format!(
        "PATCH /api/v1/namespaces/{ns}/configmaps/{CM}?fieldManager=floor-writer&force=true HTTP/1.1\r\n\
         Host: {host}:{port}\r\nAuthorization: Bearer {token}\r\nContent-Type: application/apply-patch+yaml\r\n\
         Accept: application/json\r\nContent-Length: {}\r\n\r\n{body}",
        body.len()
    )
    .into_bytes();
    let stamp_at = request.windows(STAMP.len()).position(|w| w == STAMP.as_bytes()).ok_or("no stamp")?;
    let mut answer = vec![0u8; 64 * 1024];
    loop {
        let now = SystemTime::now().duration_since(UNIX_EPOCH)?.as_secs();
        request[stamp_at..stamp_at + STAMP.len()].copy_from_slice(format!("{now:010}").as_bytes());
        tls.write_all(&request)?;
        read_answer(&mut tls, &mut answer)?;
        std::thread::sleep(Duration::from_secs_f64(interval));
    }
}

/// Reads one HTTP answer; fails on a status other than 2xx (the first
/// apply creates: 201).
fn read_answer(tls: &mut impl Read, buf: &mut [u8]) -> Result<(), Box<dyn std::error::Error>> {
    let mut filled = 0;
    let head_end = loop {
        let n = tls.read(&mut buf[filled..])?;
        if n == 0 {
            return Err("connection closed".into());
        }
        filled += n;
        if let Some(at) = buf[..filled].windows(4).position(|w| w == b"\r\n\r\n") {
            break at + 4;
        }
    };
    let head = std::str::from_utf8(&buf[..head_end])?.to_ascii_lowercase();
    if !head.starts_with("http/1.1 20") {
        return Err(format!("answer: {}", head.lines().next().unwrap_or("")).into());
    }
    let length = head.lines().find_map(|l| l.strip_prefix("content-length:").map(|v| v.trim().parse::<usize>()));
    let done = |b: &[u8]| match &length {
        Some(Ok(n)) => b.len() >= *n,
        _ => b.ends_with(b"0\r\n\r\n"),
    };
    while !done(&buf[head_end..filled]) {
        let n = tls.read(&mut buf[filled..])?;
        if n == 0 {
            return Err("connection closed mid-answer".into());
        }
        filled += n;
    }
    Ok(())
}
