//! SIGTERM and SIGINT: wake the agent at once, and make sure the process
//! is gone within [`GRACE`] even when the agent is stuck in an API call.
//!
//! A process running as PID 1 in a container gets no default signal
//! handlers, so without this `kubectl delete pod` would wait out the whole
//! grace period. signal-hook writes a byte to a socket from the handler
//! (async-signal-safe; no `unsafe` here). A small watchdog thread blocks on
//! that socket: on a signal it marks shutdown as requested, wakes the agent
//! (which sleeps by reading a second socket with a timeout, so it never
//! polls), and, if the agent has not finished within [`GRACE`], runs the
//! last-resort cleanup and exits.

use signal_hook::consts::{SIGINT, SIGTERM};
use std::io::{self, Read, Write};
use std::os::unix::net::UnixStream;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// How long the agent has to publish its last status and clean up after a
/// signal before the watchdog exits for it: the whole shutdown stays under
/// 2 s whatever the API server does.
pub const GRACE: Duration = Duration::from_millis(1500);

pub struct Shutdown {
    wake: UnixStream,
    requested: Arc<AtomicBool>,
    /// A later deadline the agent asked for while it hands over (its API
    /// calls work, so it is not hanging).
    extended: Arc<Mutex<Option<Instant>>>,
}

impl Shutdown {
    /// Installs the handlers. `on_overrun` runs (on the watchdog thread)
    /// when the agent has not exited within [`GRACE`] of a signal, just
    /// before the process exits with code 0.
    pub fn install(on_overrun: impl FnOnce() + Send + 'static) -> io::Result<Shutdown> {
        let (mut signals, from_handler) = UnixStream::pair()?;
        signal_hook::low_level::pipe::register(SIGTERM, from_handler.try_clone()?)?;
        signal_hook::low_level::pipe::register(SIGINT, from_handler)?;
        let (wake, mut waker) = UnixStream::pair()?;
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
            let _ = waker.write_all(&[1]);
            std::thread::sleep(GRACE);
            let until = *extension.lock().unwrap_or_else(|p| p.into_inner());
            if let Some(until) = until {
                std::thread::sleep(until.saturating_duration_since(Instant::now()));
            }
            log::warn!("Shutdown did not finish in time (an API call is hanging); exiting");
            on_overrun();
            std::process::exit(0);
        })?;
        Ok(Shutdown { wake, requested, extended })
    }

    /// Lets the shutdown run until `deadline` (plus [`GRACE`] for the last
    /// call) instead of [`GRACE`] after the signal: for a holder that hands
    /// the status over, which waits on purpose.
    pub fn extend_until(&self, deadline: Instant) {
        *self.extended.lock().unwrap_or_else(|p| p.into_inner()) = Some(deadline + GRACE);
    }

    /// Whether a signal has arrived.
    pub fn requested(&self) -> bool {
        self.requested.load(Ordering::SeqCst)
    }

    /// Sleeps until `deadline` or a signal; true when a signal arrived.
    pub fn wait_until(&mut self, deadline: Instant) -> bool {
        let mut buf = [0u8; 8];
        while !self.requested() {
            let remaining = deadline.saturating_duration_since(Instant::now());
            if remaining.is_zero() {
                break;
            }
            if self.wake.set_read_timeout(Some(remaining)).is_err() {
                // Cannot wait on the socket: keep the schedule with a sleep.
                std::thread::sleep(remaining);
                continue;
            }
            match self.wake.read(&mut buf) {
                Ok(n) if n > 0 => {}
                // The watchdog is gone (cannot happen while the process
                // lives); keep the schedule with a plain sleep.
                Ok(_) => std::thread::sleep(remaining),
                Err(e)
                    if matches!(
                        e.kind(),
                        io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut | io::ErrorKind::Interrupted
                    ) => {}
                Err(_) => std::thread::sleep(remaining),
            }
        }
        self.requested()
    }
}
