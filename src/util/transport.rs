//! The connection under ureq for the Kubernetes and kube9-server clients
//! and the operator health checks: TCP, then TLS on the rustls opstatus
//! links (verified against the roots given, with the client certificate if
//! any), or plain TCP for an `http://` URL (kube9-server, when the user
//! opted in; the operator's own endpoints).
//!
//! What it does that ureq's own TCP + rustls stack does not:
//! - **One write per request.** ureq hands over a request's head and then
//!   its body as two pieces; they are held here until the answer is
//!   awaited (or 16 KiB are waiting), then leave as one TLS record in one
//!   `write`. ureq's stack sends two records in two `sendto`s.
//! - **One system call to tell whether a kept connection can take the next
//!   request.** ureq's pool asks a connection whether it is open when it is
//!   returned and when it is taken again; ureq's TCP transport answers each
//!   with a non-blocking read (three system calls each). Here the return
//!   is answered from what is known (an error or a close seen, bytes left
//!   unread in rustls), and the take with one `epoll_wait` that does not
//!   wait ([`Quiet`]): anything the server sent since its answer (a stray
//!   second response, its close, a reset) means the connection is closed,
//!   never read as the next request's answer.
//! - **A request that cannot have reached the server is marked**
//!   ([`unsent`]): on a kept connection, its write failed, or the server
//!   closed or reset the connection before a byte of the answer (an idle
//!   close crossing the request). The Kubernetes client and the health
//!   checks send such a request once more on a new connection; a timeout
//!   is never such a failure (the server may be working on the request).
//! - **Deadlines kept, not approximated**: each blocking read or write
//!   waits at most the phase's time left, and one that timed out early is
//!   waited again for the rest, so a phase ends at its deadline, neither
//!   before nor (through a peer that reads slowly) after. Socket timeouts
//!   are set only when they change: the time left rounded down to
//!   [`TIMEOUT_STEP`](deadline::TIMEOUT_STEP), so a steady client sets them once, not before every
//!   read and write.
//! - **Headers nobody reads dropped** from an answer's head before ureq
//!   builds its header map ([`head`]): each header there costs
//!   allocations, a check and a hash.
//! - **The host resolved when a connection is opened**, not before every
//!   request (ureq resolves before it looks in its pool, and nearly every
//!   request goes out on the kept connection: [`AtConnect`]), within the
//!   connect phase's time ([`Resolver`]).
//!
//! A request's head goes out as ureq wrote it: the transport holds and
//! joins the pieces it is handed, it never edits them, so a header (the
//! `Authorization` line among them) reaches the server whatever the
//! agent's timeouts and buffers.
//!
//! The per-phase timeouts are ureq's (a held request is written under its
//! own send deadline, not the answer's). `Agent::shutdown` reaches the
//! socket as with ureq's transport, so a blocked read ends at once.
//! Proxies are not supported: the agents built on this have none.

mod deadline;
mod head;
mod quiet;
mod tls;

use super::resolve::{Resolver, Unresolved};
use deadline::{Deadline, is_timeout, socket_timeout};
use quiet::Quiet;
use std::io::{self, Read, Write};
use std::net::TcpStream;
use std::sync::{Arc, Weak};
use std::time::Duration;
pub(crate) use tls::tls_config;

use rustls::pki_types::ServerName;
use rustls::{ClientConfig, ClientConnection};
use ureq::Error;
use ureq::config::Config;
use ureq::http::Uri;
use ureq::unversioned::resolver::{ResolvedSocketAddrs, Resolver as UreqResolver};
use ureq::unversioned::transport::{
    Buffers, ConnectionDetails, Connector, LazyBuffers, NextTimeout, ShutdownHandle, Transport,
};

/// How long a kept connection counts as fresh for a request that must not
/// be sent twice (a POST, a watch): one idle longer is not taken for it.
/// A connection the server closed is seen when it is taken ([`Quiet`]),
/// but a middlebox that forgot an idle flow says nothing; servers and
/// middleboxes forget idle connections after tens of seconds, not a few.
pub(crate) const FRESH_FOR: Duration = Duration::from_secs(5);

/// Held request bytes are written once this many are waiting: a TLS
/// record's largest plaintext, so a large body streams in full records.
const FLUSH_AT: usize = 16 * 1024;

/// Opens [`Connection`]s: TLS for `https://` with `tls`; plain TCP for
/// `http://`. An `https://` URL without a TLS configuration is refused.
#[derive(Clone)]
pub(crate) struct Connect {
    pub tls: Option<Arc<ClientConfig>>,
    pub resolver: Resolver,
    /// The name a TLS handshake asks for (SNI) and verifies, when not the
    /// URL's host: a kubeconfig's `tls-server-name`, as in client-go.
    pub server_name: Option<ServerName<'static>>,
}

impl std::fmt::Debug for Connect {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Connect")
    }
}

/// An agent on [`Connect`] with `config`.
pub(crate) fn agent(config: ureq::config::Config, tls: Option<Arc<ClientConfig>>) -> ureq::Agent {
    agent_named(config, tls, Resolver::default(), None)
}

/// An agent on [`Connect`] with `config`, names looked up by `resolver`,
/// its TLS connections made to `server_name` (SNI and verification) when
/// one is given, whatever host the URL names.
pub(crate) fn agent_named(
    config: ureq::config::Config,
    tls: Option<Arc<ClientConfig>>,
    resolver: Resolver,
    server_name: Option<ServerName<'static>>,
) -> ureq::Agent {
    ureq::Agent::with_parts(config, Connect { tls, resolver, server_name }, AtConnect)
}

/// ureq's resolver, asked before every request: it answers with no
/// address, and [`Connect`] resolves the host when it opens a connection.
#[derive(Debug)]
struct AtConnect;

impl UreqResolver for AtConnect {
    fn resolve(&self, _: &Uri, _: &Config, _: NextTimeout) -> Result<ResolvedSocketAddrs, Error> {
        Ok(self.empty())
    }
}

/// Whether `e` is a request's failure on a kept connection that cannot
/// have reached the server (see the module's doc): worth sending once more
/// on a new connection. Never a timeout.
pub(crate) fn unsent(e: &Error) -> bool {
    matches!(e, Error::Io(io) if io.get_ref().is_some_and(|inner| inner.is::<Unsent>()))
}

/// The mark of [`unsent`], inside the `io::Error` that says what happened.
#[derive(Debug)]
struct Unsent(&'static str);

impl std::fmt::Display for Unsent {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.0)
    }
}

impl std::error::Error for Unsent {}

impl Connector<()> for Connect {
    type Out = Connection;

    fn connect(&self, details: &ConnectionDetails, _: Option<()>) -> Result<Option<Connection>, Error> {
        let tls = match (details.needs_tls(), &self.tls) {
            (true, Some(config)) => Some(config),
            (true, None) => return Err(Error::Tls("no TLS configuration for an https:// URL")),
            (false, _) => None,
        };
        let deadline = Deadline::new(details.timeout);
        let (socket, quiet) = Quiet::watching(self.connect_tcp(details, &deadline)?)?;
        let socket = Arc::new(socket);
        if details.config.no_delay() {
            socket.set_nodelay(true)?;
        }
        (details.register_shutdown)(Arc::downgrade(&socket) as Weak<dyn ShutdownHandle>)?;
        let buffers = LazyBuffers::new(details.config.input_buffer_size(), details.config.output_buffer_size());
        let mut connection = Connection {
            socket,
            quiet,
            tls: None,
            buffers,
            held: Vec::new(),
            held_deadline: None,
            read_timeout: None,
            write_timeout: None,
            broken: false,
            exchange: false,
            reused: false,
            answered: false,
        };
        if let Some(config) = tls {
            let name = match &self.server_name {
                Some(name) => name.clone(),
                None => {
                    let host = details.uri.host().unwrap_or_default();
                    ServerName::try_from(host.trim_start_matches('[').trim_end_matches(']').to_string())
                        .map_err(|_| Error::Tls("the server's host is not a valid TLS server name"))?
                }
            };
            let tls = ClientConnection::new(config.clone(), name)?;
            connection.handshake(tls, &deadline)?;
        }
        Ok(Some(connection))
    }
}

impl Connect {
    /// A TCP connection to the URL's host, its name looked up and each
    /// address tried within the connect phase's time.
    fn connect_tcp(&self, details: &ConnectionDetails, deadline: &Deadline) -> Result<TcpStream, Error> {
        let addresses = match details.addrs.is_empty() {
            false => details.addrs.to_vec(),
            true => {
                let uri = details.uri;
                let default_port = if details.needs_tls() { 443 } else { 80 };
                let port = uri.port_u16().unwrap_or(default_port);
                let host = uri.host().ok_or(Error::HostNotFound)?;
                self.resolver.resolve(host, port, deadline.left()?).map_err(|e| match e {
                    Unresolved::TimedOut => Error::Timeout(deadline.reason),
                    Unresolved::Failed(e) if e.kind() == io::ErrorKind::NotFound => Error::HostNotFound,
                    Unresolved::Failed(e) => Error::Io(e),
                })?
            }
        };
        let mut last = None;
        for addr in &addresses {
            let result = match deadline.left()? {
                Some(left) => TcpStream::connect_timeout(addr, left),
                None => TcpStream::connect(addr),
            };
            match result {
                Ok(socket) => return Ok(socket),
                Err(e) if is_timeout(&e) => return Err(Error::Timeout(deadline.reason)),
                Err(e) => last = Some(e),
            }
        }
        Err(last.map_or(Error::ConnectionFailed, Error::Io))
    }
}

/// Which socket timeout an operation waits under.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Wait {
    Read,
    Write,
}

/// One connection: TCP, with TLS on it unless the URL is `http://`.
pub(crate) struct Connection {
    socket: Arc<TcpStream>,
    quiet: Quiet,
    tls: Option<ClientConnection>,
    buffers: LazyBuffers,
    /// Request bytes not yet written (see the module's doc).
    held: Vec<u8>,
    /// The send deadline of the earliest held bytes.
    held_deadline: Option<Deadline>,
    /// The socket timeouts as last set.
    read_timeout: Option<Duration>,
    write_timeout: Option<Duration>,
    /// An error or the server's close was seen: never reused.
    broken: bool,
    /// A request is under way: its first bytes were handed over, and the
    /// connection was not returned to the pool since.
    exchange: bool,
    /// The connection carried an answered request before this one.
    reused: bool,
    /// A byte of the current request's answer was read.
    answered: bool,
}

impl std::fmt::Debug for Connection {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Connection").field("peer", &self.socket.peer_addr().ok()).finish()
    }
}

impl Connection {
    fn handshake(&mut self, tls: ClientConnection, deadline: &Deadline) -> Result<(), Error> {
        self.tls = Some(tls);
        while let Some(tls) = &mut self.tls
            && tls.is_handshaking()
        {
            if tls.wants_write() {
                self.within(deadline, Wait::Write, &mut |c| match &mut c.tls {
                    Some(tls) => tls.write_tls(&mut &*c.socket),
                    None => Ok(0),
                })?;
                continue;
            }
            let read = self.within(deadline, Wait::Read, &mut |c| match &mut c.tls {
                Some(tls) => tls.read_tls(&mut &*c.socket),
                None => Ok(0),
            })?;
            if read == 0 {
                return Err(Error::Io(io::ErrorKind::UnexpectedEof.into()));
            }
            self.process_tls()?;
        }
        Ok(())
    }

    /// Decrypts what rustls read; a TLS error ends the connection, with the
    /// alert that says why sent first.
    fn process_tls(&mut self) -> Result<(), Error> {
        let Some(tls) = &mut self.tls else { return Ok(()) };
        if let Err(e) = tls.process_new_packets() {
            self.broken = true;
            let _ = tls.write_tls(&mut &*self.socket);
            return Err(Error::Io(io::Error::new(io::ErrorKind::InvalidData, e)));
        }
        Ok(())
    }

    /// Runs `op`, one blocking read or write on the socket, until it
    /// succeeds, fails, or `deadline` passes: the socket timeout is the
    /// time left rounded down, so one that fires before the deadline is
    /// waited again for the rest. A write that makes progress returns, and
    /// the next one waits only what is then left: a peer that reads slowly
    /// cannot stretch a send past its deadline.
    fn within(
        &mut self,
        deadline: &Deadline,
        wait: Wait,
        op: &mut dyn FnMut(&mut Self) -> io::Result<usize>,
    ) -> Result<usize, Error> {
        loop {
            let left = deadline.left().inspect_err(|_| self.broken = true)?;
            let wanted = socket_timeout(left);
            let current = if wait == Wait::Read { &mut self.read_timeout } else { &mut self.write_timeout };
            if wanted != *current {
                match wait {
                    Wait::Read => self.socket.set_read_timeout(wanted)?,
                    Wait::Write => self.socket.set_write_timeout(wanted)?,
                }
                *current = wanted;
            }
            match op(self) {
                Ok(done) => return Ok(done),
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) if is_timeout(&e) && left.is_some() => {}
                Err(e) => return Err(self.failed(e, deadline)),
            }
        }
    }

    /// `e` from the socket as ureq's error; the connection is not reused.
    /// A close or reset on a kept connection before a byte of the answer
    /// is marked [`unsent`].
    fn failed(&mut self, e: io::Error, deadline: &Deadline) -> Error {
        use io::ErrorKind::{BrokenPipe, ConnectionAborted, ConnectionReset, NotConnected, UnexpectedEof};
        self.broken = true;
        if is_timeout(&e) {
            return Error::Timeout(deadline.reason);
        }
        let closed =
            matches!(e.kind(), ConnectionReset | ConnectionAborted | BrokenPipe | UnexpectedEof | NotConnected);
        if closed && self.exchange && self.reused && !self.answered {
            return Error::Io(io::Error::new(e.kind(), Unsent("the kept connection was closed before any answer")));
        }
        Error::Io(e)
    }

    /// Writes the held request bytes, as one TLS record per 16 KiB, in as
    /// few writes as the socket takes, each within the send deadline.
    fn flush(&mut self) -> Result<(), Error> {
        let Some(deadline) = self.held_deadline.take() else {
            return Ok(());
        };
        let held = std::mem::take(&mut self.held);
        let result = self.write_held(&held, &deadline);
        self.held = held;
        self.held.clear();
        result
    }

    fn write_held(&mut self, held: &[u8], deadline: &Deadline) -> Result<(), Error> {
        let Some(tls) = &mut self.tls else {
            let mut sent = 0;
            while sent < held.len() {
                match self.within(deadline, Wait::Write, &mut |c| (&*c.socket).write(&held[sent..]))? {
                    0 => return Err(self.failed(io::ErrorKind::WriteZero.into(), deadline)),
                    written => sent += written,
                }
            }
            return Ok(());
        };
        // Into rustls's buffer: it encrypts, the socket is not touched.
        tls.writer().write_all(held)?;
        while self.tls.as_ref().is_some_and(|tls| tls.wants_write()) {
            self.within(deadline, Wait::Write, &mut |c| match &mut c.tls {
                Some(tls) => tls.write_tls(&mut &*c.socket),
                None => Ok(0),
            })?;
        }
        Ok(())
    }

    /// Reads what the server sent (decrypted) into the input buffer; `false`
    /// when it closed the connection cleanly after a byte of the answer.
    fn read_input(&mut self, deadline: &Deadline) -> Result<bool, Error> {
        let read = loop {
            let Some(tls) = &mut self.tls else {
                break self.within(deadline, Wait::Read, &mut |c| (&*c.socket).read(c.buffers.input_append_buf()))?;
            };
            match tls.reader().read(self.buffers.input_append_buf()) {
                Ok(read) => break read,
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => {}
                // The server closed without a TLS close_notify.
                Err(e) => return Err(self.failed(e, deadline)),
            }
            // No plaintext yet: one read from the socket, then decrypt.
            let read = self.within(deadline, Wait::Read, &mut |c| match &mut c.tls {
                Some(tls) => tls.read_tls(&mut &*c.socket),
                None => Ok(0),
            })?;
            self.process_tls()?;
            if read > 0 && self.tls.as_ref().is_some_and(|tls| tls.wants_write()) {
                // A key update asks for an answer of ours.
                self.within(deadline, Wait::Write, &mut |c| match &mut c.tls {
                    Some(tls) => tls.write_tls(&mut &*c.socket),
                    None => Ok(0),
                })?;
            }
        };
        if read == 0 {
            // The server closed the connection: the end of a body read to
            // its close, or no answer at all.
            self.broken = true;
            if self.reused && !self.answered {
                return Err(self.failed(io::ErrorKind::UnexpectedEof.into(), deadline));
            }
            return Ok(false);
        }
        let read = match self.answered {
            // The answer's first bytes: its head, usually whole.
            false => head::drop_unread_headers(&mut self.buffers.input_append_buf()[..read]),
            true => read,
        };
        self.buffers.input_appended(read);
        self.answered = true;
        Ok(true)
    }
}

impl Transport for Connection {
    fn buffers(&mut self) -> &mut dyn Buffers {
        &mut self.buffers
    }

    fn transmit_output(&mut self, amount: usize, timeout: NextTimeout) -> Result<(), Error> {
        let deadline = Deadline::new(timeout.for_write());
        deadline.left()?;
        if !self.exchange {
            self.exchange = true;
            self.answered = false;
        }
        self.held.extend_from_slice(&self.buffers.output()[..amount]);
        self.held_deadline.get_or_insert(deadline);
        if self.held.len() >= FLUSH_AT { self.flush() } else { Ok(()) }
    }

    fn await_input(&mut self, timeout: NextTimeout) -> Result<bool, Error> {
        self.flush()?;
        self.read_input(&Deadline::new(timeout.for_read()))
    }

    /// Asked when the connection is returned to the pool after its answer,
    /// and when it is taken again for a new request (see the module's doc).
    fn is_open(&mut self) -> bool {
        if self.broken || !self.held.is_empty() {
            return false;
        }
        if !self.exchange {
            // Taken again: nothing left over, nothing arrived since.
            return self.buffers.input().is_empty() && self.quiet.is_quiet();
        }
        // Returned: what is known, without a system call.
        self.exchange = false;
        self.reused = true;
        match &mut self.tls {
            // A close or bytes already received and decrypted: not reusable.
            Some(tls) => tls
                .process_new_packets()
                .is_ok_and(|state| state.plaintext_bytes_to_read() == 0 && !state.peer_has_closed()),
            None => true,
        }
    }

    fn is_tls(&self) -> bool {
        self.tls.is_some()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::util::http::{Timeouts, agent_config};
    use std::net::{SocketAddr, TcpListener};
    use std::time::Instant;
    use ureq::Timeout;

    fn timeouts(each: Duration) -> Timeouts {
        Timeouts { connect: each, send: each, response: each, body: each }
    }

    /// A name whose lookup takes 20 s (a DNS server that does not answer).
    fn slow_lookup(_: &str, port: u16) -> io::Result<Vec<SocketAddr>> {
        std::thread::sleep(Duration::from_secs(20));
        Ok(vec![SocketAddr::from(([127, 0, 0, 1], port))])
    }

    #[test]
    fn a_slow_lookup_ends_with_the_connect_phase() {
        let config = agent_config(timeouts(Duration::from_millis(500))).build();
        let agent = agent_named(config, None, Resolver::with(slow_lookup), None);
        let started = Instant::now();
        let answer = agent.get("http://opstatus-slow-dns.test:1/").call();
        let took = started.elapsed();
        println!("the lookup ended after {took:?}: {answer:?}");
        assert!(matches!(answer, Err(Error::Timeout(Timeout::Connect))), "{answer:?}");
        // Ended by the connect phase, not by the lookup: far from both on
        // a loaded machine.
        assert!(took < Duration::from_secs(10), "the 500 ms connect phase took {took:?}");
    }

    /// A peer that reads 64 KiB every 100 ms, for at most 30 s, counting
    /// what it read.
    fn slow_reader() -> (SocketAddr, Arc<std::sync::atomic::AtomicUsize>) {
        use std::sync::atomic::{AtomicUsize, Ordering};
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = listener.local_addr().unwrap();
        let read = Arc::new(AtomicUsize::new(0));
        let counted = read.clone();
        std::thread::spawn(move || {
            let (mut peer, _) = listener.accept().unwrap();
            let started = Instant::now();
            let mut buffer = vec![0u8; 64 * 1024];
            while started.elapsed() < Duration::from_secs(30) {
                match peer.read(&mut buffer) {
                    Ok(n) if n > 0 => counted.fetch_add(n, Ordering::SeqCst),
                    _ => break,
                };
                std::thread::sleep(Duration::from_millis(100));
            }
        });
        (addr, read)
    }

    #[test]
    fn a_peer_that_reads_slowly_cannot_push_a_send_past_its_deadline() {
        // One large output buffer: ureq hands the body over in 16 MiB
        // pieces, so one flush spans many socket writes that each make a
        // little progress. Were each write given the whole phase anew, the
        // flush would last as long as the peer takes to read the piece
        // (about 20 s, less what the socket buffers hold); kept to its
        // deadlines (1 s for the head, 1 s for the body) it ends with the
        // peer far from the end. Counted, not timed closely: a loaded
        // machine's peer reads less, never more.
        let config = agent_config(timeouts(Duration::from_secs(1)));
        let agent = agent(config.output_buffer_size(16 * 1024 * 1024).build(), None);
        let body = vec![b'x'; 24 * 1024 * 1024];
        let (addr, peer_read) = slow_reader();
        let started = Instant::now();
        let answer = agent.put(format!("http://{addr}/")).send(&body[..]);
        let took = started.elapsed();
        let read = peer_read.load(std::sync::atomic::Ordering::SeqCst);
        println!("the send ended after {took:?}, the peer having read {read} bytes: {answer:?}");
        assert!(matches!(answer, Err(Error::Timeout(Timeout::SendBody | Timeout::SendRequest))), "{answer:?}");
        assert!(read < 8 * 1024 * 1024, "the send went on while the peer read {read} bytes");
        assert!(took < Duration::from_secs(10), "the send took {took:?}");
    }

    /// A server that answers the first request on each connection and,
    /// per `close_under_the_second`, reads the next one and closes (`true`) or never
    /// answers it (`false`).
    fn answers_once(close_under_the_second: bool) -> SocketAddr {
        use std::io::BufRead;
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = listener.local_addr().unwrap();
        std::thread::spawn(move || {
            for peer in listener.incoming().take(4) {
                let Ok(mut peer) = peer else { return };
                std::thread::spawn(move || {
                    let _ = peer.set_read_timeout(Some(Duration::from_secs(10)));
                    let mut reader = io::BufReader::new(peer.try_clone().unwrap());
                    for nth in 0..2 {
                        let mut line = String::new();
                        while reader.read_line(&mut line).is_ok_and(|n| n > 0) && !line.ends_with("\r\n\r\n") {}
                        if nth == 0 {
                            let _ = peer.write_all(b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok");
                        } else if close_under_the_second {
                            return;
                        } else {
                            std::thread::sleep(Duration::from_secs(3));
                        }
                    }
                });
            }
        });
        addr
    }

    /// A server that answers `count` requests on one connection with an
    /// empty 200 and sends each request (head and body) back as it read it.
    fn recording(count: usize) -> (SocketAddr, std::sync::mpsc::Receiver<String>) {
        use std::io::BufRead;
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = listener.local_addr().unwrap();
        let (sent, received) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            let (peer, _) = listener.accept().unwrap();
            let _ = peer.set_read_timeout(Some(Duration::from_secs(10)));
            let mut reader = io::BufReader::new(peer.try_clone().unwrap());
            for _ in 0..count {
                let mut request = String::new();
                while reader.read_line(&mut request).is_ok_and(|n| n > 0) && !request.ends_with("\r\n\r\n") {}
                let length =
                    request.lines().find_map(|l| l.strip_prefix("content-length: ")).map_or(0, |n| n.parse().unwrap());
                let mut body = vec![0u8; length];
                let _ = reader.read_exact(&mut body);
                request.push_str(&String::from_utf8_lossy(&body));
                let _ = (&peer).write_all(b"HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n");
                let _ = sent.send(request);
            }
        });
        (addr, received)
    }

    /// What the server read of one request carrying a bearer token as the
    /// Kubernetes client sends it, on an agent built from `config`.
    fn sent_with_token(config: ureq::config::ConfigBuilder<ureq::typestate::AgentScope>) -> String {
        let agent = agent(config.build(), None);
        let (addr, requests) = recording(1);
        let header = crate::util::http::bearer("the-token").unwrap();
        agent
            .put(format!("http://{addr}/x"))
            .header(ureq::http::header::AUTHORIZATION, header)
            .send("{\"body\":1}")
            .unwrap();
        requests.recv_timeout(Duration::from_secs(10)).unwrap()
    }

    #[test]
    fn the_authorization_line_goes_out_whatever_the_agent_s_timeouts_and_buffers() {
        // The whole call bounded closer than its phases: the deadline
        // nearest is the call's, not the send phase's.
        let each = timeouts(Duration::from_secs(5));
        let call = Some(Duration::from_secs(4));
        let configs = [
            ("a global timeout", agent_config(each).timeout_global(call)),
            ("a per-call timeout", agent_config(each).timeout_per_call(call)),
            ("no send-request timeout", agent_config(each).timeout_send_request(None)),
            ("a 64-byte output buffer (the head in many pieces)", agent_config(each).output_buffer_size(64)),
        ];
        let mut without = Vec::new();
        for (what, config) in configs {
            let sent = sent_with_token(config).to_ascii_lowercase();
            if sent.matches("\r\nauthorization: bearer the-token\r\n").count() != 1 {
                without.push(format!("with {what}: {sent:?}"));
            }
        }
        assert!(without.is_empty(), "requests not carrying the line once:\n{}", without.join("\n"));
    }

    #[test]
    fn only_a_kept_connection_closed_before_any_answer_marks_the_request_unsent() {
        let agent = agent(agent_config(timeouts(Duration::from_secs(1))).build(), None);
        let url = format!("http://{}/", answers_once(true));
        // Read to its end, so that the connection is kept.
        let read = |agent: &ureq::Agent, url: &str| agent.get(url).call()?.body_mut().read_to_string();
        assert_eq!(read(&agent, &url).unwrap(), "ok", "the first request, on a new connection");
        let closed = agent.get(&url).call().unwrap_err();
        assert!(unsent(&closed), "closed under the second, on the kept connection: {closed:?}");

        let agent = super::agent(agent_config(timeouts(Duration::from_secs(1))).build(), None);
        let url = format!("http://{}/", answers_once(false));
        assert_eq!(read(&agent, &url).unwrap(), "ok");
        let timed_out = agent.get(&url).call().unwrap_err();
        assert!(matches!(timed_out, Error::Timeout(Timeout::RecvResponse)), "{timed_out:?}");
        assert!(!unsent(&timed_out), "the server may be working on it");
    }
}
