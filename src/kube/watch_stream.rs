//! A watch's open answer, read one event (one line) at a time, each line
//! bounded: the lines a probe's watcher turns into changes; and the
//! [`Closer`] that ends a watch from another thread at once.

use super::client::MAX_BODY;
use super::{Client, KubeError};
use std::io::Read;

/// The read buffer of a watch stream: most events are well under it.
const WATCH_BUFFER: usize = 16 * 1024;

/// A watch's open response: one JSON event per line (the API server's
/// framing), each line at most [`MAX_BODY`] (an object is far smaller:
/// etcd stores at most 1.5 MiB), so one event is what it costs.
pub struct WatchStream {
    reader: std::io::BufReader<ureq::BodyReader<'static>>,
    server: String,
}

impl WatchStream {
    pub(crate) fn new(reader: ureq::BodyReader<'static>, server: &str) -> WatchStream {
        WatchStream { reader: std::io::BufReader::with_capacity(WATCH_BUFFER, reader), server: server.to_string() }
    }

    /// Reads the next event into `line` (cleared first); `Ok(false)` when
    /// the server ended the stream. A stream cut mid-event, a line over the
    /// bound and a read that timed out are errors.
    pub fn next_line(&mut self, line: &mut Vec<u8>) -> Result<bool, KubeError> {
        use std::io::BufRead;
        line.clear();
        if line.capacity() > WATCH_BUFFER * 4 {
            // One large event must not keep its buffer for the watch's life.
            line.shrink_to(WATCH_BUFFER);
        }
        let read = self.reader.by_ref().take(MAX_BODY + 1).read_until(b'\n', line).map_err(|e| {
            let message = match e.kind() {
                std::io::ErrorKind::TimedOut | std::io::ErrorKind::WouldBlock => {
                    format!("the watch on {} went silent past its timeout", self.server)
                }
                _ => format!("the watch on {} broke: {e}", self.server),
            };
            KubeError::Transport { message }
        })?;
        match line.last() {
            _ if read == 0 => Ok(false),
            Some(b'\n') => Ok(true),
            _ if line.len() as u64 > MAX_BODY => Err(KubeError::Response {
                message: format!("a watch event from {} is larger than {MAX_BODY} bytes", self.server),
            }),
            _ => Err(KubeError::Transport { message: format!("the watch on {} ended mid-event", self.server) }),
        }
    }
}

/// Closes a [`Client`]'s connections from another thread, the one a read
/// blocks on included (that read then fails at once), and refuses its
/// later requests: a watch that must stop lets go of its connection now,
/// not at its next event, which on a quiet collection is minutes away.
pub(crate) struct Closer(ureq::Agent);

impl Closer {
    pub(crate) fn close(self) {
        self.0.shutdown();
    }
}

impl Client {
    /// The [`Closer`] of this client's connections.
    pub(crate) fn closer(&self) -> Closer {
        Closer(self.agent.clone())
    }
}
