//! The connection under ureq for the Kubernetes and kube9-server clients:
//! TCP, then TLS on the rustls opstatus links (verified against the roots
//! given, with the client certificate if any), or plain TCP for an
//! `http://` URL (kube9-server, when the user opted in).
//!
//! What it does that ureq's own TCP + rustls stack does not:
//! - **One write per request.** ureq hands over a request's head and then
//!   its body as two pieces; they are held here until the answer is
//!   awaited (or 16 KiB are waiting), then leave as one TLS record in one
//!   `write`. ureq's stack sends two records in two `sendto`s.
//! - **No probe of a connection it has just used.** ureq's pool asks a
//!   connection whether it is open when it is returned and when it is taken
//!   again; ureq's TCP transport answers each with a non-blocking read (three
//!   system calls). Here a connection answers from what it knows (an error
//!   or a close seen, bytes left unread). An agent whose caller cannot send
//!   a request again ([`Probe::IdleConnections`]: the operator health checks,
//!   kube9-server) also probes a connection that idled [`PROBE_AFTER`] or
//!   more, when it is taken; the Kubernetes client needs no probe
//!   ([`Probe::Never`]): it sends a request again when a kept connection
//!   broke under it, and sends none that cannot be repeated on a connection
//!   idle that long.
//! - **Socket timeouts set only when they change**: each phase's remaining
//!   time is rounded down to [`TIMEOUT_STEP`], so a steady client sets them
//!   once, not before every read and write.
//! - **The host resolved when a connection is opened**, not before every
//!   request: ureq resolves before it looks in its pool, and nearly every
//!   request goes out on the kept connection ([`AtConnect`]).
//!
//! The per-phase timeouts are ureq's (a held request is written under its
//! own send deadline, not the answer's). `Agent::shutdown` reaches the
//! socket as with ureq's transport, so a blocked read ends at once.
//! Proxies are not supported: the agents built on this have none.

use std::io::{self, Read, Write};
use std::net::TcpStream;
use std::sync::{Arc, Weak};
use std::time::{Duration, Instant};

use rustls::pki_types::{CertificateDer, PrivateKeyDer, ServerName};
use rustls::{ClientConfig, ClientConnection, RootCertStore};
use ureq::config::Config;
use ureq::http::Uri;
use ureq::unversioned::resolver::{DefaultResolver, ResolvedSocketAddrs, Resolver};
use ureq::unversioned::transport::time::Duration as Remaining;
use ureq::unversioned::transport::{
    Buffers, ConnectionDetails, Connector, LazyBuffers, NextTimeout, ShutdownHandle, Transport,
};
use ureq::{Error, Timeout};

/// How long a kept connection may idle before it is probed when taken
/// again. A connection the server closed while idle is then replaced
/// before a request that cannot be sent twice (a POST) goes out on it;
/// below this, a close crossing the request is what the Kubernetes client's
/// one resend covers, and servers and middleboxes close idle connections
/// after tens of seconds, not a few.
pub(crate) const PROBE_AFTER: Duration = Duration::from_secs(5);

/// Held request bytes are written once this many are waiting: a TLS
/// record's largest plaintext, so a large body streams in full records.
const FLUSH_AT: usize = 16 * 1024;

/// Socket timeouts are the phase's remaining time rounded down to this, so
/// that consecutive requests set the same value and the system call is
/// skipped; a timeout so fires at most this much early, never late.
const TIMEOUT_STEP: Duration = Duration::from_millis(250);

/// The TLS client configuration: the roots a server's certificate must
/// chain to, and the client certificate (chain and key, checked at start)
/// when the user authenticates with one.
pub(crate) fn tls_config(
    roots: &[ureq::tls::Certificate<'static>],
    identity: Option<(Vec<CertificateDer<'static>>, PrivateKeyDer<'static>)>,
) -> Result<Arc<ClientConfig>, String> {
    let mut store = RootCertStore::empty();
    let (added, _) = store.add_parsable_certificates(roots.iter().map(|c| CertificateDer::from(c.der())));
    if added == 0 {
        return Err("none of the CA certificates can be parsed as X.509".into());
    }
    let builder = ClientConfig::builder_with_provider(Arc::new(rustls::crypto::ring::default_provider()))
        .with_protocol_versions(rustls::ALL_VERSIONS)
        .map_err(|e| e.to_string())?
        .with_root_certificates(store);
    let config = match identity {
        Some((chain, key)) => builder.with_client_auth_cert(chain, key).map_err(|e| e.to_string())?,
        None => builder.with_no_client_auth(),
    };
    Ok(Arc::new(config))
}

/// Whether a kept connection is probed before it is used again.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Probe {
    /// When it idled [`PROBE_AFTER`] or more: for callers that cannot send
    /// a request again when the server closed the connection meanwhile.
    IdleConnections,
    /// Never: the caller sends a request again on a new connection when a
    /// kept one broke under it, and keeps a request that cannot be sent
    /// twice off connections idle [`PROBE_AFTER`] or more.
    Never,
}

/// Opens [`Connection`]s: TLS for `https://` with `tls`; plain TCP for
/// `http://`. An `https://` URL without a TLS configuration is refused.
#[derive(Clone)]
pub(crate) struct Connect {
    pub tls: Option<Arc<ClientConfig>>,
    pub probe: Probe,
}

impl std::fmt::Debug for Connect {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Connect")
    }
}

/// An agent on [`Connect`] with `config`.
pub(crate) fn agent(config: ureq::config::Config, tls: Option<Arc<ClientConfig>>, probe: Probe) -> ureq::Agent {
    ureq::Agent::with_parts(config, Connect { tls, probe }, AtConnect)
}

/// ureq's resolver, asked before every request: it answers with no
/// address, and [`Connect`] resolves the host when it opens a connection
/// (an IP address is parsed; a name is looked up as ureq would, without a
/// thread).
#[derive(Debug)]
struct AtConnect;

impl Resolver for AtConnect {
    fn resolve(&self, _: &Uri, _: &Config, _: NextTimeout) -> Result<ResolvedSocketAddrs, Error> {
        Ok(self.empty())
    }
}

/// The addresses to connect to for `details`: those given, else the host's.
fn addresses(details: &ConnectionDetails) -> Result<ResolvedSocketAddrs, Error> {
    if !details.addrs.is_empty() {
        return Ok(details.addrs.clone());
    }
    let unbounded = NextTimeout { after: Remaining::NotHappening, reason: Timeout::Resolve, ..NextTimeout::default() };
    DefaultResolver::default().resolve(details.uri, details.config, unbounded)
}

impl Connector<()> for Connect {
    type Out = Connection;

    fn connect(&self, details: &ConnectionDetails, _: Option<()>) -> Result<Option<Connection>, Error> {
        let tls = match (details.needs_tls(), &self.tls) {
            (true, Some(config)) => Some(config),
            (true, None) => return Err(Error::Tls("no TLS configuration for an https:// URL")),
            (false, _) => None,
        };
        let deadline = Deadline::new(details.timeout);
        let socket = Arc::new(connect_tcp(details, &deadline)?);
        if details.config.no_delay() {
            socket.set_nodelay(true)?;
        }
        (details.register_shutdown)(Arc::downgrade(&socket) as Weak<dyn ShutdownHandle>)?;
        let buffers = LazyBuffers::new(details.config.input_buffer_size(), details.config.output_buffer_size());
        let mut connection = Connection {
            socket,
            tls: None,
            buffers,
            held: Vec::new(),
            held_deadline: None,
            read_timeout: None,
            write_timeout: None,
            last_used: Instant::now(),
            broken: false,
            probe: self.probe,
        };
        if let Some(config) = tls {
            let host = details.uri.host().unwrap_or_default();
            let name = ServerName::try_from(host.trim_start_matches('[').trim_end_matches(']').to_string())
                .map_err(|_| Error::Tls("the server's host is not a valid TLS server name"))?;
            let tls = ClientConnection::new(config.clone(), name)?;
            connection.handshake(tls, &deadline)?;
        }
        Ok(Some(connection))
    }
}

fn connect_tcp(details: &ConnectionDetails, deadline: &Deadline) -> Result<TcpStream, Error> {
    let mut last = None;
    for addr in &addresses(details)? {
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

/// When a phase ends, from ureq's remaining time when it was given.
#[derive(Clone, Copy)]
struct Deadline {
    at: Option<Instant>,
    reason: Timeout,
}

impl Deadline {
    fn new(timeout: NextTimeout) -> Deadline {
        let at = match timeout.after {
            Remaining::NotHappening => None,
            Remaining::Exact(after) => Some(Instant::now() + after),
        };
        Deadline { at, reason: timeout.reason }
    }

    /// The time left, `None` for no bound; a phase already over is its timeout.
    fn left(&self) -> Result<Option<Duration>, Error> {
        match self.at.map(|at| at.saturating_duration_since(Instant::now())) {
            Some(left) if left.is_zero() => Err(Error::Timeout(self.reason)),
            left => Ok(left),
        }
    }
}

/// The socket timeout for `left` of a phase: rounded down to
/// [`TIMEOUT_STEP`] when that leaves a step or more, so it rarely changes.
fn socket_timeout(left: Option<Duration>) -> Option<Duration> {
    let left = left?;
    let steps = left.as_nanos() / TIMEOUT_STEP.as_nanos();
    Some(if steps == 0 { left } else { TIMEOUT_STEP * steps as u32 })
}

fn is_timeout(e: &io::Error) -> bool {
    matches!(e.kind(), io::ErrorKind::TimedOut | io::ErrorKind::WouldBlock)
}

/// One connection: TCP, with TLS on it unless the URL is `http://`.
pub(crate) struct Connection {
    socket: Arc<TcpStream>,
    tls: Option<ClientConnection>,
    buffers: LazyBuffers,
    /// Request bytes not yet written (see the module's doc).
    held: Vec<u8>,
    /// The send deadline of the earliest held bytes.
    held_deadline: Option<Deadline>,
    /// The socket timeouts as last set.
    read_timeout: Option<Duration>,
    write_timeout: Option<Duration>,
    last_used: Instant,
    /// An error or the server's close was seen: never reused.
    broken: bool,
    probe: Probe,
}

impl std::fmt::Debug for Connection {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Connection").field("peer", &self.socket.peer_addr().ok()).finish()
    }
}

impl Connection {
    fn handshake(&mut self, mut tls: ClientConnection, deadline: &Deadline) -> Result<(), Error> {
        while tls.is_handshaking() {
            if tls.wants_write() {
                self.write_timeout(deadline)?;
                tls.write_tls(&mut &*self.socket).map_err(|e| self.failed(e, deadline))?;
            } else {
                self.read_timeout(deadline)?;
                let read = tls.read_tls(&mut &*self.socket).map_err(|e| self.failed(e, deadline))?;
                if read == 0 {
                    return Err(Error::Io(io::ErrorKind::UnexpectedEof.into()));
                }
                if let Err(e) = tls.process_new_packets() {
                    // The alert that says why goes out before the error.
                    let _ = tls.write_tls(&mut &*self.socket);
                    return Err(Error::Io(io::Error::new(io::ErrorKind::InvalidData, e)));
                }
            }
        }
        self.tls = Some(tls);
        Ok(())
    }

    /// `e` from the socket as ureq's error; the connection is not reused.
    fn failed(&mut self, e: io::Error, deadline: &Deadline) -> Error {
        self.broken = true;
        if is_timeout(&e) { Error::Timeout(deadline.reason) } else { Error::Io(e) }
    }

    fn read_timeout(&mut self, deadline: &Deadline) -> Result<(), Error> {
        let wanted = socket_timeout(deadline.left()?);
        if wanted != self.read_timeout {
            self.socket.set_read_timeout(wanted)?;
            self.read_timeout = wanted;
        }
        Ok(())
    }

    fn write_timeout(&mut self, deadline: &Deadline) -> Result<(), Error> {
        let wanted = socket_timeout(deadline.left()?);
        if wanted != self.write_timeout {
            self.socket.set_write_timeout(wanted)?;
            self.write_timeout = wanted;
        }
        Ok(())
    }

    /// Writes the held request bytes, as one TLS record per 16 KiB, in as
    /// few writes as the socket takes.
    fn flush(&mut self) -> Result<(), Error> {
        let Some(deadline) = self.held_deadline.take() else {
            return Ok(());
        };
        self.write_timeout(&deadline)?;
        let result = match &mut self.tls {
            Some(tls) => {
                tls.writer().write_all(&self.held)?;
                let mut written = Ok(());
                while tls.wants_write() && written.is_ok() {
                    written = tls.write_tls(&mut &*self.socket).map(drop);
                }
                written
            }
            None => (&*self.socket).write_all(&self.held),
        };
        self.held.clear();
        result.map_err(|e| self.failed(e, &deadline))
    }

    /// Reads what the server sent (decrypted) into the input buffer; `false`
    /// when it closed the connection cleanly.
    fn read_input(&mut self, deadline: &Deadline) -> Result<bool, Error> {
        let read = loop {
            let Some(tls) = &mut self.tls else {
                self.read_timeout(deadline)?;
                let read = (&*self.socket).read(self.buffers.input_append_buf());
                break read.map_err(|e| self.failed(e, deadline))?;
            };
            match tls.reader().read(self.buffers.input_append_buf()) {
                Ok(read) => break read,
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => {}
                Err(e) => {
                    self.broken = true;
                    return Err(Error::Io(e));
                }
            }
            // No plaintext yet: one read from the socket, then decrypt.
            self.read_timeout(deadline)?;
            let Some(tls) = &mut self.tls else { continue };
            let read = tls.read_tls(&mut &*self.socket);
            let read = read.map_err(|e| self.failed(e, deadline))?;
            let Some(tls) = &mut self.tls else { continue };
            if let Err(e) = tls.process_new_packets() {
                self.broken = true;
                // The alert that says why goes out before the error.
                let _ = tls.write_tls(&mut &*self.socket);
                return Err(Error::Io(io::Error::new(io::ErrorKind::InvalidData, e)));
            }
            if read > 0 && tls.wants_write() {
                // A key update asks for an answer of ours.
                self.write_timeout(deadline)?;
                let Some(tls) = &mut self.tls else { continue };
                let written = tls.write_tls(&mut &*self.socket).map(drop);
                written.map_err(|e| self.failed(e, deadline))?;
            }
        };
        self.buffers.input_appended(read);
        self.broken |= read == 0;
        Ok(read > 0)
    }

    /// Whether a connection that idled since its last use can take a request:
    /// see [`PROBE_AFTER`].
    fn probe(&self) -> bool {
        let socket = &*self.socket;
        if socket.set_nonblocking(true).is_err() {
            return false;
        }
        // Bytes (a server's garbage or its TLS close), an end or an error:
        // not reusable. Nothing to read: open.
        let open = matches!((&*socket).read(&mut [0u8; 1]), Err(e) if e.kind() == io::ErrorKind::WouldBlock);
        open && socket.set_nonblocking(false).is_ok()
    }
}

impl Transport for Connection {
    fn buffers(&mut self) -> &mut dyn Buffers {
        &mut self.buffers
    }

    fn transmit_output(&mut self, amount: usize, timeout: NextTimeout) -> Result<(), Error> {
        let timeout = timeout.for_write();
        let deadline = Deadline::new(timeout);
        deadline.left()?;
        self.held.extend_from_slice(&self.buffers.output()[..amount]);
        self.held_deadline.get_or_insert(deadline);
        self.last_used = Instant::now();
        if self.held.len() >= FLUSH_AT { self.flush() } else { Ok(()) }
    }

    fn await_input(&mut self, timeout: NextTimeout) -> Result<bool, Error> {
        self.flush()?;
        let result = self.read_input(&Deadline::new(timeout.for_read()));
        self.last_used = Instant::now();
        result
    }

    fn is_open(&mut self) -> bool {
        if self.broken || !self.held.is_empty() {
            return false;
        }
        if let Some(tls) = &mut self.tls {
            // A close or bytes already received and decrypted: not reusable.
            match tls.process_new_packets() {
                Ok(state) if state.plaintext_bytes_to_read() == 0 && !state.peer_has_closed() => {}
                _ => return false,
            }
        }
        self.probe == Probe::Never || self.last_used.elapsed() < PROBE_AFTER || self.probe()
    }

    fn is_tls(&self) -> bool {
        self.tls.is_some()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_socket_timeout_is_rounded_down_to_a_step_and_never_lengthened() {
        let ms = Duration::from_millis;
        assert_eq!(socket_timeout(None), None);
        assert_eq!(socket_timeout(Some(ms(4_999))), Some(ms(4_750)));
        assert_eq!(socket_timeout(Some(ms(4_800))), Some(ms(4_750)));
        assert_eq!(socket_timeout(Some(ms(250))), Some(ms(250)));
        assert_eq!(socket_timeout(Some(ms(120))), Some(ms(120)));
    }
}
