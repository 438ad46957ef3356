//! Host names looked up within a request's deadline.
//!
//! std's lookup (`getaddrinfo`) blocks its thread for as long as the
//! system's resolver takes: seconds per attempt, several attempts, when a
//! DNS server does not answer. The caller must not wait that long (the
//! kube9-server registration runs inside the agent's tick), so a
//! [`Resolver`] runs lookups on a helper thread of its own and waits for
//! the answer at most the time left of the connect phase. The thread is
//! started at the first name looked up and kept for the next ones (no
//! thread per request); an IP address needs no lookup and no thread (the
//! API server's usually is one). A lookup the caller gave up on is not
//! started when the thread gets to it late; one that was under way ends
//! on the thread, unheard. Each agent has its own resolver, so a slow
//! lookup for one server never delays another server's.

use std::io;
use std::net::{IpAddr, SocketAddr, ToSocketAddrs};
use std::sync::mpsc::{self, Receiver, RecvTimeoutError, Sender, SyncSender};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// Looks a host up: the system's resolver ([`system_lookup`]), or a
/// stand-in in tests.
pub(crate) type Lookup = fn(&str, u16) -> io::Result<Vec<SocketAddr>>;

/// The system's resolver, as std asks it.
pub(crate) fn system_lookup(host: &str, port: u16) -> io::Result<Vec<SocketAddr>> {
    Ok((host, port).to_socket_addrs()?.collect())
}

/// Why no address came back.
#[derive(Debug)]
pub(crate) enum Unresolved {
    /// The time allowed ran out first.
    TimedOut,
    /// The lookup failed, or found no address.
    Failed(io::Error),
}

/// A lookup for the helper thread, with where to answer.
struct Job {
    host: String,
    port: u16,
    /// When the caller stops waiting: the lookup is not started after it.
    until: Option<Instant>,
    answer: SyncSender<io::Result<Vec<SocketAddr>>>,
}

/// Resolves host names on one helper thread of its own (see the module's
/// doc). Clones share the thread.
#[derive(Clone)]
pub(crate) struct Resolver {
    lookup: Lookup,
    thread: Arc<Mutex<Option<Sender<Job>>>>,
}

impl Default for Resolver {
    fn default() -> Resolver {
        Resolver::with(system_lookup)
    }
}

impl Resolver {
    pub(crate) fn with(lookup: Lookup) -> Resolver {
        Resolver { lookup, thread: Arc::new(Mutex::new(None)) }
    }

    /// The addresses of `host` (a name, or an IP address, bracketed or
    /// not) at `port`, waiting at most `within` (`None`: no bound).
    pub(crate) fn resolve(
        &self,
        host: &str,
        port: u16,
        within: Option<Duration>,
    ) -> Result<Vec<SocketAddr>, Unresolved> {
        if let Ok(ip) = host.trim_start_matches('[').trim_end_matches(']').parse::<IpAddr>() {
            return Ok(vec![SocketAddr::new(ip, port)]);
        }
        let (answer, answered) = mpsc::sync_channel(1);
        let until = within.map(|left| Instant::now() + left);
        self.submit(Job { host: host.to_string(), port, until, answer }).map_err(Unresolved::Failed)?;
        let found = match within {
            Some(left) => answered.recv_timeout(left).map_err(|e| match e {
                RecvTimeoutError::Timeout => Unresolved::TimedOut,
                RecvTimeoutError::Disconnected => Unresolved::Failed(io::Error::other("the lookup thread ended")),
            })?,
            None => answered.recv().map_err(|_| Unresolved::Failed(io::Error::other("the lookup thread ended")))?,
        };
        match found {
            Ok(addresses) if addresses.is_empty() => {
                Err(Unresolved::Failed(io::Error::new(io::ErrorKind::NotFound, "no address")))
            }
            Ok(addresses) => Ok(addresses),
            Err(e) => Err(Unresolved::Failed(e)),
        }
    }

    /// Hands `job` to the helper thread, starting it if it is not running.
    fn submit(&self, job: Job) -> io::Result<()> {
        let mut thread = self.thread.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
        let job = match thread.as_ref() {
            Some(jobs) => match jobs.send(job) {
                Ok(()) => return Ok(()),
                // The thread ended (it cannot, short of a panic): a new one.
                Err(mpsc::SendError(job)) => job,
            },
            None => job,
        };
        let (jobs, queue) = mpsc::channel();
        let lookup = self.lookup;
        std::thread::Builder::new().name("opstatus-resolve".into()).spawn(move || serve(queue, lookup))?;
        jobs.send(job).map_err(|_| io::Error::other("the lookup thread ended"))?;
        *thread = Some(jobs);
        Ok(())
    }
}

/// The helper thread: one lookup at a time, until every [`Resolver`]
/// sharing it is gone.
fn serve(queue: Receiver<Job>, lookup: Lookup) {
    for job in queue {
        if job.until.is_some_and(|until| Instant::now() >= until) {
            continue;
        }
        let _ = job.answer.send(lookup(&job.host, job.port));
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Mutex as StdMutex;
    use std::thread::ThreadId;

    static THREADS: StdMutex<Vec<ThreadId>> = StdMutex::new(Vec::new());

    fn loopback(_: &str, port: u16) -> io::Result<Vec<SocketAddr>> {
        THREADS.lock().unwrap().push(std::thread::current().id());
        Ok(vec![SocketAddr::from(([127, 0, 0, 1], port))])
    }

    fn never(_: &str, _: u16) -> io::Result<Vec<SocketAddr>> {
        std::thread::sleep(Duration::from_secs(3));
        Ok(vec![SocketAddr::from(([127, 0, 0, 1], 1))])
    }

    #[test]
    fn an_ip_address_needs_no_lookup() {
        let resolver = Resolver::with(never);
        let started = Instant::now();
        let found = resolver.resolve("[::1]", 6443, Some(Duration::from_millis(10))).unwrap();
        assert_eq!(found, vec!["[::1]:6443".parse().unwrap()]);
        assert_eq!(resolver.resolve("10.96.0.1", 443, None).unwrap(), vec!["10.96.0.1:443".parse().unwrap()]);
        assert!(started.elapsed() < Duration::from_secs(1));
        assert!(resolver.thread.lock().unwrap().is_none(), "no thread started");
    }

    #[test]
    fn names_are_looked_up_on_one_kept_thread() {
        let resolver = Resolver::with(loopback);
        for port in [1, 2, 3] {
            let found = resolver.resolve("api.example", port, Some(Duration::from_secs(20))).unwrap();
            assert_eq!(found, vec![SocketAddr::from(([127, 0, 0, 1], port))]);
        }
        let threads = THREADS.lock().unwrap().clone();
        assert_eq!(threads.len(), 3);
        assert!(threads.iter().all(|t| *t == threads[0]), "one thread for all: {threads:?}");
        assert_ne!(threads[0], std::thread::current().id(), "not the caller's");
    }
}
