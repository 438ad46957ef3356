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

use std::collections::VecDeque;
use std::io;
use std::net::{IpAddr, SocketAddr, ToSocketAddrs};
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
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
    answer: Arc<Answer>,
}

/// Where the helper thread leaves a lookup's result for its caller.
#[derive(Default)]
struct Answer {
    found: Mutex<Option<io::Result<Vec<SocketAddr>>>>,
    ready: Condvar,
}

/// The lookups waiting for the helper thread, and whether it runs.
#[derive(Default)]
struct Queue {
    jobs: VecDeque<Job>,
    running: bool,
    /// Every [`Resolver`] sharing the thread is gone: it ends.
    closed: bool,
}

/// What the helper thread and its resolvers share (std's `Mutex` and
/// `Condvar`: the channels' generic code would cost the binary more).
#[derive(Default)]
struct Desk {
    queue: Mutex<Queue>,
    work: Condvar,
}

fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
}

/// Resolves host names on one helper thread of its own (see the module's
/// doc). Clones share the thread; it ends when the last one is dropped.
#[derive(Clone)]
pub(crate) struct Resolver {
    owner: Arc<Owner>,
}

/// Closes the desk when the last [`Resolver`] clone goes.
struct Owner {
    lookup: Lookup,
    desk: Arc<Desk>,
}

impl Drop for Owner {
    fn drop(&mut self) {
        lock(&self.desk.queue).closed = true;
        self.desk.work.notify_all();
    }
}

impl Default for Resolver {
    fn default() -> Resolver {
        Resolver::with(system_lookup)
    }
}

impl Resolver {
    pub(crate) fn with(lookup: Lookup) -> Resolver {
        Resolver { owner: Arc::new(Owner { lookup, desk: Arc::default() }) }
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
        let until = within.map(|left| Instant::now() + left);
        let answer = Arc::new(Answer::default());
        self.submit(Job { host: host.to_string(), port, until, answer: answer.clone() }).map_err(Unresolved::Failed)?;
        let mut found = lock(&answer.found);
        let found = loop {
            if let Some(found) = found.take() {
                break found;
            }
            found = match until.map(|until| until.saturating_duration_since(Instant::now())) {
                Some(left) if left.is_zero() => return Err(Unresolved::TimedOut),
                Some(left) => answer.ready.wait_timeout(found, left).unwrap_or_else(|p| p.into_inner()).0,
                None => answer.ready.wait(found).unwrap_or_else(|p| p.into_inner()),
            };
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
        let desk = &self.owner.desk;
        let mut queue = lock(&desk.queue);
        if !queue.running {
            let (desk, lookup) = (desk.clone(), self.owner.lookup);
            std::thread::Builder::new().name("opstatus-resolve".into()).spawn(move || serve(&desk, lookup))?;
            queue.running = true;
        }
        queue.jobs.push_back(job);
        desk.work.notify_one();
        Ok(())
    }
}

/// The helper thread: one lookup at a time, until every [`Resolver`]
/// sharing it is gone.
fn serve(desk: &Desk, lookup: Lookup) {
    let mut queue = lock(&desk.queue);
    loop {
        let Some(job) = queue.jobs.pop_front() else {
            if queue.closed {
                return;
            }
            queue = desk.work.wait(queue).unwrap_or_else(|p| p.into_inner());
            continue;
        };
        if job.until.is_some_and(|until| Instant::now() >= until) {
            continue;
        }
        drop(queue);
        let found = lookup(&job.host, job.port);
        *lock(&job.answer.found) = Some(found);
        job.answer.ready.notify_one();
        queue = lock(&desk.queue);
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

    fn quick(_: &str, port: u16) -> io::Result<Vec<SocketAddr>> {
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
        assert!(!lock(&resolver.owner.desk.queue).running, "no thread started");
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

    #[test]
    fn the_thread_ends_with_the_last_resolver() {
        let resolver = Resolver::with(quick);
        let sibling = resolver.clone();
        resolver.resolve("api.example", 1, Some(Duration::from_secs(20))).unwrap();
        let desk = resolver.owner.desk.clone();
        drop(resolver);
        sibling.resolve("api.example", 2, Some(Duration::from_secs(20))).unwrap();
        drop(sibling);
        // The thread's own reference goes when it ends.
        let started = Instant::now();
        while Arc::strong_count(&desk) > 1 && started.elapsed() < Duration::from_secs(10) {
            std::thread::sleep(Duration::from_millis(10));
        }
        assert_eq!(Arc::strong_count(&desk), 1, "the thread still runs");
    }
}
