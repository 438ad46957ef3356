//! The probe and metrics endpoint: `/healthz`, `/readyz`, `/status`,
//! `/metrics`.
//!
//! It runs on a thread of its own because the agent's API calls block (up to
//! their timeouts when the API server hangs) and kubelet's probes must still
//! be answered within a second. That thread is one readiness loop (mio), so
//! any number of slow or silent clients cost it nothing but their socket:
//! every connection has a deadline ([`CONNECTION_TIMEOUT`]), a request-head
//! cap ([`MAX_HEAD`]) and is closed after one answer. Memory is bounded by
//! `MAX_CONNECTIONS × MAX_HEAD` (1 MiB) plus one response each.
//!
//! Kubelet must get its answer even when someone holds every slot: past
//! [`MAX_CONNECTIONS`] a new connection evicts an idle one (no complete
//! request yet), the oldest of the peer holding the most ([`victim`]). A
//! probe sends its request at once, so it is never the idle one for long,
//! and kubelet (one connection from the node) is never the busiest peer
//! while a flood from elsewhere lasts. A per-peer cap alone would not do:
//! kubelet and a local flood can share an address. Shortened deadlines
//! would not either: a flood reconnects faster than any deadline.
//!
//! An `accept` error that is not the peer's (EMFILE, ENFILE, ENOBUFS)
//! pauses accepting for [`ACCEPT_PAUSE`] instead of retrying at once: the
//! loop goes on serving and closing connections, which frees descriptors.
//!
//! [`routes`] is the pure half (parsing and answering), unit-tested;
//! [`prometheus`] renders `/metrics`, [`status_view`] `/status`.

pub(crate) mod prometheus;
pub(crate) mod routes;
pub(crate) mod status_view;

use crate::status::Verdict;
use crate::util::shutdown::Nudge;
use mio::net::{TcpListener, TcpStream};
use mio::{Events, Interest, Poll, Token};
use prometheus::Metrics;
use routes::{Parsed, encode, parse_request, respond};
use status_view::StatusView;
use std::collections::HashMap;
use std::io::{self, Read, Write};
use std::net::{IpAddr, SocketAddr};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// A request head larger than this is refused (431).
pub const MAX_HEAD: usize = 4096;
/// Connections served at once; more are closed on accept.
pub(crate) const MAX_CONNECTIONS: usize = 256;
/// A connection must have sent its request and taken its answer by then.
pub(crate) const CONNECTION_TIMEOUT: Duration = Duration::from_secs(2);
/// How long accepting pauses after an error that retrying at once would
/// only repeat (out of descriptors): ten tries a second cost nothing, and a
/// probe waits at most this long once a descriptor is free.
pub(crate) const ACCEPT_PAUSE: Duration = Duration::from_millis(100);

/// What the agent shares with the endpoint, updated on every tick.
#[derive(Clone, Debug)]
pub(crate) struct Snapshot {
    /// The current health, write failures included.
    pub verdict: Verdict,
    /// What `/readyz` answers for (see the agent's readiness contract).
    pub readiness: Verdict,
    /// What `/status` serves; `None` until the first tick.
    pub status: Option<StatusView>,
    pub metrics: Metrics,
    /// When the agent's loop last completed a tick.
    pub last_tick: Instant,
    /// `/healthz` fails when no tick completed for this long.
    pub liveness_window: Duration,
    /// kubelet's preStop hook came (`GET /prestop`): the pod is being
    /// stopped. Set here, read by the agent.
    pub pod_stopping: bool,
    /// What `/leader` answers (`--leader-service`); `None`: off.
    pub leader: Option<LeaderView>,
}

/// Whether this pod's operator leads, as `/leader` answers it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct LeaderView {
    /// 200 when it does, 503 when not.
    pub leads: bool,
    /// One line saying who leads, or why nobody does.
    pub says: String,
}

pub(crate) type Shared = Arc<Mutex<Snapshot>>;
/// Binds `addr` now (so a bad address fails at start) and serves on a
/// thread of its own. Returns the bound address.
/// `nudge` wakes the agent when kubelet's preStop hook comes.
pub(crate) fn spawn(addr: SocketAddr, shared: Shared, nudge: Nudge) -> io::Result<SocketAddr> {
    let std_listener = std::net::TcpListener::bind(addr)?;
    std_listener.set_nonblocking(true)?;
    let listener = TcpListener::from_std(std_listener);
    let bound = listener.local_addr()?;
    std::thread::Builder::new().name("endpoint".into()).stack_size(128 * 1024).spawn(move || {
        if let Err(e) = serve(listener, &Agentward { shared, nudge }) {
            log::error!("The probe endpoint stopped: {e}");
        }
    })?;
    Ok(bound)
}

const LISTENER: Token = Token(usize::MAX);

struct Connection {
    stream: TcpStream,
    peer: IpAddr,
    /// Accept order, for eviction: lower is older.
    serial: u64,
    head: Vec<u8>,
    /// The encoded answer and how much of it is written; `None` while the
    /// request is still being read.
    answer: Option<(Vec<u8>, usize)>,
    deadline: Instant,
}

/// What the endpoint shares with the agent: the snapshot, and the nudge.
struct Agentward {
    shared: Shared,
    nudge: Nudge,
}

fn serve(mut listener: TcpListener, shared: &Agentward) -> io::Result<()> {
    let mut poll = Poll::new()?;
    poll.registry().register(&mut listener, LISTENER, Interest::READABLE)?;
    let mut events = Events::with_capacity(64);
    let mut slots: Vec<Option<Connection>> = Vec::new();
    let mut accepting = Accepting::default();
    loop {
        let now = Instant::now();
        let deadlines = slots.iter().flatten().map(|c| c.deadline).chain(accepting.resume_at);
        let timeout = deadlines.map(|d| d.saturating_duration_since(now)).min();
        if let Err(e) = poll.poll(&mut events, timeout) {
            if e.kind() == io::ErrorKind::Interrupted {
                continue;
            }
            return Err(e);
        }
        for event in &events {
            if event.token() == LISTENER {
                if accepting.resume_at.is_none() {
                    accept_all(&listener, &poll, &mut slots, &mut accepting, shared);
                }
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
        // Edge-triggered: the listener will not be reported again for the
        // connections still queued, so go on once the pause is over.
        if accepting.resume_at.is_some_and(|at| at <= now) {
            accepting.resume_at = None;
            accept_all(&listener, &poll, &mut slots, &mut accepting, shared);
        }
    }
}

/// The listener's state between events.
#[derive(Default)]
struct Accepting {
    /// Accept nothing until then: set after an error that is not the
    /// peer's (a pause), or after a full batch (at once, once the events
    /// already reported are served).
    resume_at: Option<Instant>,
    /// The error, logged once when it starts and once when it clears.
    failing: bool,
    serial: u64,
}

/// Connections accepted before the loop serves the events it was given:
/// under a flood, a probe accepted in one batch is read before the next
/// batch could make it the oldest idle connection.
const ACCEPT_BATCH: usize = 64;

fn accept_all(
    listener: &TcpListener,
    poll: &Poll,
    slots: &mut Vec<Option<Connection>>,
    accepting: &mut Accepting,
    shared: &Agentward,
) {
    for _ in 0..ACCEPT_BATCH {
        let (mut stream, peer) = match listener.accept() {
            Ok(s) => s,
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => return,
            // The peer gave up before we accepted: the next one may not.
            Err(e) if matches!(e.kind(), io::ErrorKind::ConnectionAborted | io::ErrorKind::Interrupted) => continue,
            Err(e) => {
                if !accepting.failing {
                    log::warn!("The probe endpoint cannot accept connections ({e}); retrying every 100 ms");
                    accepting.failing = true;
                }
                accepting.resume_at = Some(Instant::now() + ACCEPT_PAUSE);
                return;
            }
        };
        if accepting.failing {
            log::info!("The probe endpoint accepts connections again");
            accepting.failing = false;
        }
        let free = slots.iter().position(Option::is_none);
        let i = match free {
            Some(i) => i,
            None if slots.len() < MAX_CONNECTIONS => {
                slots.push(None);
                slots.len() - 1
            }
            None => match victim(slots) {
                Some(i) => {
                    close(poll, slots, i);
                    i
                }
                None => continue, // Every slot is answering: dropping the stream closes it.
            },
        };
        if poll.registry().register(&mut stream, Token(i), Interest::READABLE | Interest::WRITABLE).is_err() {
            continue;
        }
        accepting.serial += 1;
        let mut conn = Connection {
            stream,
            peer: peer.ip(),
            serial: accepting.serial,
            head: Vec::new(),
            answer: None,
            deadline: Instant::now() + CONNECTION_TIMEOUT,
        };
        // A probe's request is usually there already: answer it now, before
        // it could be taken for an idle connection.
        let done = advance(&mut conn, shared);
        slots[i] = Some(conn);
        if done {
            close(poll, slots, i);
        }
    }
    accepting.resume_at = Some(Instant::now());
}

/// The connection to close for a new one when every slot is taken: of the
/// idle ones (no complete request yet), the oldest of the peer that holds
/// the most connections. `None` when every connection is being answered
/// (that takes a moment, not a deadline).
fn victim(slots: &[Option<Connection>]) -> Option<usize> {
    let candidates = slots.iter().enumerate().filter_map(|(i, c)| Some((i, c.as_ref()?)));
    pick_victim(candidates.map(|(i, c)| (i, c.peer, c.serial, c.answer.is_none())))
}

/// [`victim`]'s rule over `(slot, peer, serial, idle)`; pure.
fn pick_victim(conns: impl Iterator<Item = (usize, IpAddr, u64, bool)> + Clone) -> Option<usize> {
    let mut held: HashMap<IpAddr, usize> = HashMap::new();
    for (_, peer, _, _) in conns.clone() {
        *held.entry(peer).or_default() += 1;
    }
    conns
        .filter(|&(_, _, _, idle)| idle)
        .max_by_key(|&(_, peer, serial, _)| (held[&peer], std::cmp::Reverse(serial)))
        .map(|(i, ..)| i)
}

fn close(poll: &Poll, slots: &mut [Option<Connection>], i: usize) {
    if let Some(mut conn) = slots[i].take() {
        let _ = poll.registry().deregister(&mut conn.stream);
    }
}

/// Moves a connection as far as its socket allows; true when it is finished
/// (answered or broken) and should be closed.
fn advance(conn: &mut Connection, agentward: &Agentward) -> bool {
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
                        let prestop = parsed == Parsed::Request { method: "GET", path: "/prestop" };
                        let mut guard = agentward.shared.lock().unwrap_or_else(|p| p.into_inner());
                        // From inside the pod only (`opstatus prestop`, exec'd by kubelet).
                        let inside = conn.peer.to_canonical().is_loopback();
                        guard.pod_stopping |= prestop && inside;
                        let snapshot = guard.clone();
                        drop(guard);
                        if prestop && inside {
                            agentward.nudge.nudge();
                        }
                        let answer = match prestop && !inside {
                            true => routes::text(403, "forbidden: /prestop is for opstatus prestop, inside the pod\n"),
                            false => respond(&parsed, &snapshot, Instant::now()),
                        };
                        conn.answer = Some((encode(&answer), 0));
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

    #[test]
    fn the_victim_is_the_oldest_idle_connection_of_the_busiest_peer() {
        let (kubelet, flood, other): (IpAddr, IpAddr, IpAddr) =
            ("10.0.0.1".parse().unwrap(), "10.0.0.9".parse().unwrap(), "10.0.0.5".parse().unwrap());
        // (slot, peer, serial, idle)
        let conns = [
            (0, kubelet, 1, true),
            (1, flood, 5, true),
            (2, flood, 3, false),
            (3, flood, 4, true),
            (4, other, 2, true),
            (5, other, 6, true),
        ];
        assert_eq!(pick_victim(conns.iter().copied()), Some(3), "the flood's oldest idle one");
        // One peer (kubelet and a local flood on one address): the oldest idle.
        let same = [(0, kubelet, 7, true), (1, kubelet, 2, false), (2, kubelet, 4, true), (3, kubelet, 9, true)];
        assert_eq!(pick_victim(same.iter().copied()), Some(2));
        // Everything is being answered: nothing to evict.
        let busy = [(0, flood, 1, false), (1, kubelet, 2, false)];
        assert_eq!(pick_victim(busy.iter().copied()), None);
        assert_eq!(pick_victim([].iter().copied()), None);
    }
}
