//! A loopback TCP proxy in front of a server (the real API server), that a
//! test can cut: while cut, every connection through it is closed and new
//! ones are closed at once, so the server is unreachable to the client
//! without being stopped. Its threads end when the proxy is dropped.

use std::io::{Read, Write};
use std::net::{Shutdown, SocketAddr, TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::thread;
use std::time::Duration;

pub struct TcpProxy {
    port: u16,
    cut: Arc<AtomicBool>,
    stop: Arc<AtomicBool>,
    open: Arc<Mutex<Vec<TcpStream>>>,
}

impl TcpProxy {
    /// Listens on 127.0.0.1 (a free port) and forwards to `127.0.0.1:to`.
    pub fn start(to: u16) -> TcpProxy {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        listener.set_nonblocking(true).unwrap();
        let port = listener.local_addr().unwrap().port();
        let (cut, stop) = (Arc::new(AtomicBool::new(false)), Arc::new(AtomicBool::new(false)));
        let open: Arc<Mutex<Vec<TcpStream>>> = Arc::default();
        let (c, s, o) = (cut.clone(), stop.clone(), open.clone());
        let target = SocketAddr::from(([127, 0, 0, 1], to));
        thread::spawn(move || {
            while !s.load(Ordering::SeqCst) {
                let client = match listener.accept() {
                    Ok((client, _)) => client,
                    Err(_) => {
                        thread::sleep(Duration::from_millis(10));
                        continue;
                    }
                };
                client.set_nonblocking(false).unwrap();
                if c.load(Ordering::SeqCst) {
                    continue; // dropped: closed at once
                }
                let Ok(server) = TcpStream::connect_timeout(&target, Duration::from_secs(2)) else { continue };
                let mut open = o.lock().unwrap();
                open.retain(|s| s.peer_addr().is_ok());
                open.push(client.try_clone().unwrap());
                open.push(server.try_clone().unwrap());
                pipe(client.try_clone().unwrap(), server.try_clone().unwrap());
                pipe(server, client);
            }
        });
        TcpProxy { port, cut, stop, open }
    }

    pub fn port(&self) -> u16 {
        self.port
    }

    /// Closes every connection through the proxy and refuses new ones
    /// until [`TcpProxy::restore`].
    pub fn cut(&self) {
        self.cut.store(true, Ordering::SeqCst);
        for s in self.open.lock().unwrap().drain(..) {
            let _ = s.shutdown(Shutdown::Both);
        }
    }

    pub fn restore(&self) {
        self.cut.store(false, Ordering::SeqCst);
    }
}

impl Drop for TcpProxy {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::SeqCst);
        self.cut();
    }
}

/// Copies `from` to `to` on a thread until either side closes.
pub(super) fn pipe(mut from: TcpStream, mut to: TcpStream) {
    thread::spawn(move || {
        let mut buf = [0u8; 16 * 1024];
        while let Ok(n) = from.read(&mut buf) {
            if n == 0 || to.write_all(&buf[..n]).is_err() {
                break;
            }
        }
        let _ = to.shutdown(Shutdown::Both);
        let _ = from.shutdown(Shutdown::Both);
    });
}
