//! SIGTERM and SIGINT, turned into a wake-up of the agent's sleep.
//!
//! A process running as PID 1 in a container gets no default signal
//! handlers, so without this `kubectl delete pod` would wait out the whole
//! grace period. signal-hook writes a byte to a socket pair from the signal
//! handler (async-signal-safe); the agent sleeps by reading that socket with
//! a timeout, so it wakes exactly at its next deadline or at a signal, never
//! to poll.

use signal_hook::consts::{SIGINT, SIGTERM};
use std::io::{self, Read};
use std::os::unix::net::UnixStream;
use std::time::Instant;

pub struct Shutdown {
    wake: UnixStream,
    requested: bool,
}

impl Shutdown {
    /// Installs the handlers for SIGTERM and SIGINT.
    pub fn install() -> io::Result<Shutdown> {
        let (wake, notify) = UnixStream::pair()?;
        signal_hook::low_level::pipe::register(SIGTERM, notify.try_clone()?)?;
        signal_hook::low_level::pipe::register(SIGINT, notify)?;
        Ok(Shutdown {
            wake,
            requested: false,
        })
    }

    /// Whether a signal has arrived (without waiting).
    pub fn requested(&mut self) -> bool {
        if !self.requested && self.wake.set_nonblocking(true).is_ok() {
            let mut buf = [0u8; 8];
            self.requested = matches!(self.wake.read(&mut buf), Ok(n) if n > 0);
            let _ = self.wake.set_nonblocking(false);
        }
        self.requested
    }

    /// Sleeps until `deadline` or a signal; true when a signal arrived.
    pub fn wait_until(&mut self, deadline: Instant) -> bool {
        let mut buf = [0u8; 8];
        while !self.requested {
            let remaining = deadline.saturating_duration_since(Instant::now());
            if remaining.is_zero() {
                return self.requested();
            }
            if self.wake.set_read_timeout(Some(remaining)).is_err() {
                // Cannot wait on the socket: fall back to a plain sleep.
                std::thread::sleep(remaining);
                continue;
            }
            match self.wake.read(&mut buf) {
                Ok(n) if n > 0 => self.requested = true,
                // End of stream: the handler side is gone (cannot happen while
                // signal-hook holds it); keep the schedule with a plain sleep.
                Ok(_) => std::thread::sleep(remaining),
                Err(e)
                    if matches!(
                        e.kind(),
                        io::ErrorKind::WouldBlock
                            | io::ErrorKind::TimedOut
                            | io::ErrorKind::Interrupted
                    ) => {}
                Err(_) => std::thread::sleep(remaining),
            }
        }
        true
    }
}
