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
//! [`routes`] is the pure half (parsing and answering), unit-tested;
//! [`prometheus`] renders `/metrics`.

pub mod prometheus;
pub mod routes;

use crate::status::Verdict;
use mio::net::{TcpListener, TcpStream};
use mio::{Events, Interest, Poll, Token};
use prometheus::Metrics;
use routes::{Parsed, encode, parse_request, respond};
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
