//! A loopback CONNECT proxy, as corporate networks run them: each tunnel
//! a client asks for is recorded (the target and the `Proxy-Authorization`
//! header) and opened to 127.0.0.1 at the target's port, whatever host the
//! target names: it never connects anywhere else. It stops when dropped
//! (its accept loop within 50 ms, its tunnels as their ends close), and
//! after 5 minutes at the latest.
//!
//! And [`with_hosts`]: a command that runs a binary with host names of
//! its own (an `/etc/hosts` bind-mounted in a mount namespace of the
//! process's own, root needed), so a request sent straight to a name
//! reaches loopback without a DNS query leaving the machine.

use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::thread;
use std::time::{Duration, Instant};

#[derive(Clone, Debug)]
pub struct Tunnel {
    /// `host:port` as the client asked for it.
    pub target: String,
    /// The `Proxy-Authorization` header's value, if any.
    pub authorization: Option<String>,
}

pub struct ConnectProxy {
    port: u16,
    tunnels: Arc<Mutex<Vec<Tunnel>>>,
    stop: Arc<AtomicBool>,
}

impl ConnectProxy {
    pub fn start() -> ConnectProxy {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        listener.set_nonblocking(true).unwrap();
        let port = listener.local_addr().unwrap().port();
        let (tunnels, stop) = (Arc::<Mutex<Vec<Tunnel>>>::default(), Arc::new(AtomicBool::new(false)));
        let (recorded, stopped) = (tunnels.clone(), stop.clone());
        thread::spawn(move || {
            let until = Instant::now() + Duration::from_secs(300);
            while !stopped.load(Ordering::SeqCst) && Instant::now() < until {
                match listener.accept() {
                    Ok((client, _)) => {
                        let recorded = recorded.clone();
                        thread::spawn(move || tunnel(client, &recorded));
                    }
                    Err(_) => thread::sleep(Duration::from_millis(50)),
                }
            }
        });
        ConnectProxy { port, tunnels, stop }
    }

    /// `http://127.0.0.1:PORT`, with `userinfo@` when given.
    pub fn url(&self, userinfo: &str) -> String {
        format!("http://{userinfo}127.0.0.1:{}", self.port)
    }

    pub fn tunnels(&self) -> Vec<Tunnel> {
        self.tunnels.lock().unwrap().clone()
    }
}

impl Drop for ConnectProxy {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::SeqCst);
    }
}

/// Reads a CONNECT request (bounded: 8 KiB, 10 s), records it, and
/// relays between the client and 127.0.0.1 at the target's port.
fn tunnel(mut client: TcpStream, recorded: &Mutex<Vec<Tunnel>>) {
    client.set_nonblocking(false).unwrap();
    let _ = client.set_read_timeout(Some(Duration::from_secs(10)));
    let mut head = Vec::new();
    let mut byte = [0u8; 1];
    while !head.ends_with(b"\r\n\r\n") && head.len() < 8192 && client.read(&mut byte).is_ok_and(|n| n == 1) {
        head.push(byte[0]);
    }
    let head = String::from_utf8_lossy(&head).to_string();
    let mut lines = head.lines();
    let target = match lines.next().unwrap_or_default().split(' ').collect::<Vec<_>>()[..] {
        ["CONNECT", target, _] => target.to_string(),
        _ => {
            let _ = client.write_all(b"HTTP/1.1 405 Method Not Allowed\r\nContent-Length: 0\r\n\r\n");
            return;
        }
    };
    let authorization = lines.find_map(|l| {
        let (name, value) = l.split_once(':')?;
        name.eq_ignore_ascii_case("proxy-authorization").then(|| value.trim().to_string())
    });
    recorded.lock().unwrap().push(Tunnel { target: target.clone(), authorization });
    let port: Option<u16> = target.rsplit_once(':').and_then(|(_, p)| p.parse().ok());
    let Some(server) = port.and_then(|p| TcpStream::connect(("127.0.0.1", p)).ok()) else {
        let _ = client.write_all(b"HTTP/1.1 502 Bad Gateway\r\nContent-Length: 0\r\n\r\n");
        return;
    };
    let _ = client.set_read_timeout(None);
    if client.write_all(b"HTTP/1.1 200 Connection established\r\n\r\n").is_err() {
        return;
    }
    super::tcp_proxy::pipe(server.try_clone().unwrap(), client.try_clone().unwrap());
    super::tcp_proxy::pipe(client, server);
}

/// An executable in `dir` that runs `bin` with its arguments in a mount
/// namespace of its own whose `/etc/hosts` maps each of `names` to
/// 127.0.0.1 (`unshare` execs, so the process keeps its PID).
pub fn with_hosts(dir: &Path, bin: &Path, names: &[&str]) -> PathBuf {
    let hosts = dir.join("hosts");
    let lines: String = names.iter().map(|n| format!("127.0.0.1 {n}\n")).collect();
    std::fs::write(&hosts, format!("127.0.0.1 localhost\n{lines}")).unwrap();
    let wrapper = dir.join("opstatus-with-hosts");
    std::fs::write(
        &wrapper,
        format!(
            "#!/bin/sh\nexec /usr/bin/unshare --mount /bin/sh -c '/usr/bin/mount --bind {} /etc/hosts && exec \"$0\" \"$@\"' {} \"$@\"\n",
            hosts.display(),
            bin.display()
        ),
    )
    .unwrap();
    let mut permissions = std::fs::metadata(&wrapper).unwrap().permissions();
    std::os::unix::fs::PermissionsExt::set_mode(&mut permissions, 0o755);
    std::fs::set_permissions(&wrapper, permissions).unwrap();
    wrapper
}
