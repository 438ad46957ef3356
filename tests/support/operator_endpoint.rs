//! A stand-in for the operator's own health endpoint that keeps
//! connections alive, with the habits of real servers that the health
//! checks must live with: an idle close after a few seconds (gunicorn's
//! keep-alive is 2 s), a close that crosses the next request, a slow
//! answer or none, an error status. It records what it saw. Listens on
//! 127.0.0.1, stops when dropped.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{Shutdown, SocketAddr, TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// How the endpoint behaves.
#[derive(Clone, Copy, Debug)]
pub struct Habits {
    /// A connection idle this long is closed.
    pub keep_alive: Duration,
    /// How long it takes to answer; `None`: it never does, and waits for
    /// the client to give up.
    pub answer_after: Option<Duration>,
    /// A second request on a connection is read, then the connection is
    /// closed without an answer (an idle close that crossed it).
    pub close_under_reuse: bool,
    /// The requests (counted from 0 over all connections) never answered,
    /// whatever `answer_after` says: an endpoint late now and then.
    pub unanswered: &'static [usize],
    /// The requests answered `HTTP 500` (when answered at all).
    pub failing: &'static [usize],
}

impl Default for Habits {
    fn default() -> Habits {
        Habits {
            keep_alive: Duration::from_secs(30),
            answer_after: Some(Duration::ZERO),
            close_under_reuse: false,
            unanswered: &[],
            failing: &[],
        }
    }
}

/// A request the endpoint read.
#[derive(Clone, Debug)]
pub struct Seen {
    pub at: Instant,
    /// The connection's number, from 0, and the request's on it.
    pub connection: usize,
    pub nth_on_connection: usize,
    /// How long after the request the client closed the connection, when
    /// the endpoint never answered.
    pub given_up_after: Option<Duration>,
}

pub struct OperatorEndpoint {
    pub addr: SocketAddr,
    seen: Arc<Mutex<Vec<Seen>>>,
    stop: Arc<AtomicBool>,
}

impl OperatorEndpoint {
    pub fn start(habits: Habits) -> OperatorEndpoint {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = listener.local_addr().unwrap();
        let seen = Arc::new(Mutex::new(Vec::new()));
        let stop = Arc::new(AtomicBool::new(false));
        let (record, stopped) = (seen.clone(), stop.clone());
        std::thread::spawn(move || {
            let count = AtomicUsize::new(0);
            // Requests are numbered as they are read: an unanswered one is
            // recorded only once the client gives up, maybe after the next.
            let requests = Arc::new(AtomicUsize::new(0));
            for stream in listener.incoming() {
                if stopped.load(Ordering::SeqCst) {
                    break;
                }
                let Ok(stream) = stream else { continue };
                let (connection, record) = (count.fetch_add(1, Ordering::SeqCst), record.clone());
                let requests = requests.clone();
                std::thread::spawn(move || serve(stream, connection, habits, &requests, &record));
            }
        });
        OperatorEndpoint { addr, seen, stop }
    }

    pub fn url(&self) -> String {
        format!("http://{}/healthz", self.addr)
    }

    pub fn seen(&self) -> Vec<Seen> {
        self.seen.lock().unwrap().clone()
    }
}

impl Drop for OperatorEndpoint {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::SeqCst);
        let _ = TcpStream::connect(self.addr);
    }
}

fn serve(stream: TcpStream, connection: usize, habits: Habits, requests: &AtomicUsize, seen: &Mutex<Vec<Seen>>) {
    let mut reader = BufReader::new(stream.try_clone().unwrap());
    let mut writer = stream;
    for nth_on_connection in 0..1000 {
        let _ = writer.set_read_timeout(Some(habits.keep_alive));
        // The request head; an idle close (the keep-alive ran out) or the
        // client's close ends the connection.
        let mut line = String::new();
        loop {
            line.clear();
            match reader.read_line(&mut line) {
                Ok(0) | Err(_) => return,
                Ok(_) if line == "\r\n" => break,
                Ok(_) => {}
            }
        }
        let at = Instant::now();
        let nth_request = requests.fetch_add(1, Ordering::SeqCst);
        let record = |given_up_after| {
            seen.lock().unwrap().push(Seen { at, connection, nth_on_connection, given_up_after });
        };
        if habits.close_under_reuse && nth_on_connection > 0 {
            record(None);
            let _ = writer.shutdown(Shutdown::Both);
            return;
        }
        let answer_after = habits.answer_after.filter(|_| !habits.unanswered.contains(&nth_request));
        let Some(after) = answer_after else {
            // Waits (boundedly) for the client to give up and close.
            let _ = writer.set_read_timeout(Some(Duration::from_secs(10)));
            let closed = matches!(reader.read(&mut [0u8; 64]), Ok(0));
            record(closed.then(|| at.elapsed()));
            return;
        };
        record(None);
        std::thread::sleep(after);
        let status = if habits.failing.contains(&nth_request) { "500 Internal Server Error" } else { "200 OK" };
        let answer = format!("HTTP/1.1 {status}\r\nContent-Length: 2\r\n\r\nok");
        if writer.write_all(answer.as_bytes()).is_err() {
            return;
        }
    }
}

/// A port on 127.0.0.1 nobody listens on (yet): connections to it are
/// refused until [`operator_up`] listens there.
pub fn free_addr() -> SocketAddr {
    TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap()
}

/// The operator's health endpoint coming up: it answers 200 on `addr` (an
/// address handed out earlier, as an operator that starts after its
/// sidecar) from now on, one answer per connection, until `stop` is set
/// (then one more connection ends it).
pub fn operator_up(addr: SocketAddr, stop: Arc<AtomicBool>) {
    let listener = TcpListener::bind(addr).expect("the operator's port is still free");
    std::thread::spawn(move || {
        for stream in listener.incoming() {
            if stop.load(Ordering::SeqCst) {
                return;
            }
            let Ok(mut stream) = stream else { continue };
            let _ = stream.set_read_timeout(Some(Duration::from_secs(5)));
            let mut head = BufReader::new(stream.try_clone().unwrap());
            let mut line = String::new();
            while head.read_line(&mut line).is_ok_and(|n| n > 0) && line != "\r\n" {
                line.clear();
            }
            let _ = stream.write_all(b"HTTP/1.1 200 OK\r\nContent-Length: 3\r\nConnection: close\r\n\r\nok\n");
        }
    });
}
