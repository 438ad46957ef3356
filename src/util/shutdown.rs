//! SIGTERM, SIGINT and SIGHUP: wake the agent at once, and make sure the
//! process is gone within [`GRACE`] even when the agent is stuck in an API
//! call.
//!
//! SIGHUP stops the agent as SIGTERM does (the final status, the lock
//! handed over): its default action ends the process without either, and
//! opstatus has no configuration to reload on it. A terminal that closes
//! under `opstatus run`, or a supervisor that sends it, so leaves the
//! status as a clean stop does.
//!
//! A process running as PID 1 in a container gets no default signal
//! handlers, so without this `kubectl delete pod` would wait out the whole
//! grace period. signal-hook writes a byte to a socket from the handler
//! (async-signal-safe; no `unsafe` here). A small watchdog thread blocks on
//! that socket: on a signal it marks shutdown as requested, wakes the agent
//! (whose thread sleeps parked with a timeout: one futex wait per sleep, no
//! polling), and, if the agent has not finished within [`GRACE`], runs the
//! last-resort cleanup and exits.
//!
//! The agent is woken early for another reason: a [`Nudge`] (a probe's
//! watch saw a resource's verdict change) asks for a check now instead of
//! at the next check tick. The flags say what happened; the wake-up only
//! ends the sleep, so a spurious or early one costs a look, never an event.

use signal_hook::consts::{SIGHUP, SIGINT, SIGTERM};
use std::io::{self, Read};
use std::os::unix::net::UnixStream;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::Thread;
use std::time::{Duration, Instant};

/// How long the agent has to publish its last status and clean up after a
/// signal before the watchdog exits for it, whatever the API server does.
/// Long enough for the handover write and the final status where the CPU
/// is shared out thinly (the manifests' 5m request on a busy node, a slow
/// ARM board: 1.5 s lost the final status there); short enough that a hung
/// API server delays a pod's stop by seconds, far inside kubelet's 30 s.
pub(crate) const GRACE: Duration = Duration::from_secs(5);

pub(crate) struct Shutdown {
    /// The thread that installed this and waits in [`Shutdown::wait_until`].
    agent: Thread,
    nudged: Arc<AtomicBool>,
    requested: Arc<AtomicBool>,
    /// A later deadline the agent asked for while it hands over (its API
    /// calls work, so it is not hanging).
    extended: Arc<Mutex<Option<Instant>>>,
}

impl Shutdown {
    /// Installs the handlers; the calling thread is the one
    /// [`Shutdown::wait_until`] wakes. `on_overrun` runs (on the watchdog
    /// thread) when the agent has not exited within [`GRACE`] of a signal,
    /// just before the process exits with code 0.
    pub(crate) fn install(on_overrun: impl FnOnce() + Send + 'static) -> io::Result<Shutdown> {
        let (mut signals, from_handler) = UnixStream::pair()?;
        signal_hook::low_level::pipe::register(SIGTERM, from_handler.try_clone()?)?;
        signal_hook::low_level::pipe::register(SIGHUP, from_handler.try_clone()?)?;
        signal_hook::low_level::pipe::register(SIGINT, from_handler)?;
        let agent = std::thread::current();
        let waker = agent.clone();
        let requested = Arc::new(AtomicBool::new(false));
        let flag = requested.clone();
        let extended = Arc::new(Mutex::new(None::<Instant>));
        let extension = extended.clone();
        std::thread::Builder::new().name("shutdown".into()).stack_size(64 * 1024).spawn(move || {
            let mut buf = [0u8; 8];
            loop {
                match signals.read(&mut buf) {
                    Ok(n) if n > 0 => break,
                    Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                    // The handler side is gone: no signal can come.
                    _ => return,
                }
            }
            flag.store(true, Ordering::SeqCst);
            waker.unpark();
            std::thread::sleep(GRACE);
            let until = *extension.lock().unwrap_or_else(|p| p.into_inner());
            if let Some(until) = until {
                std::thread::sleep(until.saturating_duration_since(Instant::now()));
            }
            log::warn!("Shutdown did not finish in time (an API call is hanging); exiting");
            on_overrun();
            std::process::exit(0);
        })?;
        Ok(Shutdown { agent, nudged: Arc::new(AtomicBool::new(false)), requested, extended })
    }

    /// Lets the shutdown run until `deadline` (plus [`GRACE`] for the last
    /// call) instead of [`GRACE`] after the signal: for a holder that hands
    /// the status over, which waits on purpose.
    pub(crate) fn extend_until(&self, deadline: Instant) {
        *self.extended.lock().unwrap_or_else(|p| p.into_inner()) = Some(deadline + GRACE);
    }

    /// Whether a signal has arrived.
    pub(crate) fn requested(&self) -> bool {
        self.requested.load(Ordering::SeqCst)
    }

    /// A handle that wakes [`Shutdown::wait_until`] early, from any thread.
    pub(crate) fn nudge(&self) -> Nudge {
        Nudge { agent: self.agent.clone(), nudged: self.nudged.clone() }
    }

    /// Whether a nudge came since the last call (and forgets it).
    pub(crate) fn take_nudge(&self) -> bool {
        self.nudged.swap(false, Ordering::SeqCst)
    }

    /// Sleeps until `deadline`, a signal or a nudge; true when a signal
    /// arrived. One futex wait per sleep (`park_timeout`), woken early by
    /// [`Thread::unpark`]; an early or spurious wake-up looks at the flags
    /// and sleeps again.
    pub(crate) fn wait_until(&mut self, deadline: Instant) -> bool {
        while !self.requested() && !self.nudged.load(Ordering::SeqCst) {
            let remaining = deadline.saturating_duration_since(Instant::now());
            if remaining.is_zero() {
                break;
            }
            std::thread::park_timeout(remaining);
        }
        self.requested()
    }
}

/// Asks the agent's loop for a check now. Nudges before the loop took the
/// last one are one: a nudge never blocks and a burst of changes costs one
/// check.
#[derive(Clone)]
pub(crate) struct Nudge {
    agent: Thread,
    nudged: Arc<AtomicBool>,
}

impl Nudge {
    pub(crate) fn nudge(&self) {
        if !self.nudged.swap(true, Ordering::SeqCst) {
            self.agent.unpark();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_nudge_wakes_the_wait_once_and_bursts_are_one() {
        let mut shutdown = Shutdown::install(|| {}).unwrap();
        let nudge = shutdown.nudge();
        for _ in 0..1000 {
            nudge.nudge();
        }
        let started = Instant::now();
        assert!(!shutdown.wait_until(started + Duration::from_secs(30)), "a nudge is no signal");
        assert!(started.elapsed() < Duration::from_secs(5), "woken early");
        assert!(shutdown.take_nudge());
        assert!(!shutdown.take_nudge(), "taken once");
        // A wake-up the burst left ends the next sleep early; the wait
        // still lasts to its deadline.
        let started = Instant::now();
        shutdown.wait_until(started + Duration::from_millis(200));
        assert!(started.elapsed() >= Duration::from_millis(200));
    }
}
