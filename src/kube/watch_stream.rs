//! A watch's open answer, read one event (one line) at a time, each line
//! bounded: the lines a probe's watcher turns into changes; or one JSON
//! value at a time, parsed as it arrives ([`WatchStream::next_value`]: a
//! large object of which little is kept is never buffered whole), or a
//! whole list item by item, each item bounded ([`WatchStream::read_parts`]);
//! and the [`Closer`] that ends a watch from another thread at once.

use super::{Client, KubeError, MAX_BODY};
use serde::Deserialize;
use std::io::Read;

/// The keys of a list answer a seed of [`WatchStream::read_parts`] looks
/// at: `metadata` (the version, the next page's token) and `items`; any
/// other (`kind`, `apiVersion`) is skipped.
#[derive(Deserialize)]
#[serde(field_identifier, rename_all = "camelCase")]
pub(crate) enum ListKey {
    Metadata,
    Items,
    #[serde(other)]
    Other,
}

/// The read buffer of a watch stream: most events are well under it.
const WATCH_BUFFER: usize = 16 * 1024;

/// A watch's open response: one JSON event per line (the API server's
/// framing), each line at most [`MAX_BODY`] (an object is far smaller:
/// etcd stores at most 1.5 MiB), so one event is what it costs.
pub struct WatchStream {
    reader: std::io::BufReader<ureq::BodyReader<'static>>,
    server: String,
    /// The event [`WatchStream::next_line`] read last.
    line: Vec<u8>,
}

impl WatchStream {
    pub(crate) fn new(reader: ureq::BodyReader<'static>, server: &str) -> WatchStream {
        let reader = std::io::BufReader::with_capacity(WATCH_BUFFER, reader);
        WatchStream { reader, server: server.to_string(), line: Vec::new() }
    }

    /// Reads the next event, one line; `Ok(None)` when the server ended
    /// the stream. A stream cut mid-event, a line over the bound and a read
    /// that timed out are errors.
    pub fn next_line(&mut self) -> Result<Option<&[u8]>, KubeError> {
        use std::io::BufRead;
        let line = &mut self.line;
        line.clear();
        if line.capacity() > WATCH_BUFFER * 4 {
            // One large event must not keep its buffer for the watch's life.
            line.shrink_to(WATCH_BUFFER);
        }
        let read = self.reader.by_ref().take(MAX_BODY + 1).read_until(b'\n', line);
        let read = read.map_err(|e| broke(&self.server, &e))?;
        match line.last() {
            _ if read == 0 => Ok(None),
            Some(b'\n') => Ok(Some(line)),
            _ if line.len() as u64 > MAX_BODY => Err(KubeError::Response {
                message: format!("a watch event from {} is larger than {MAX_BODY} bytes", self.server),
            }),
            _ => Err(KubeError::Transport { message: format!("the watch on {} ended mid-event", self.server) }),
        }
    }

    /// Parses the next JSON value (an event, or a list: the answer of
    /// [`Client::get_stream`]) with `seed` straight from the stream, at
    /// most [`MAX_BODY`] bytes of it, without buffering it: the seed keeps
    /// what it needs and skips the rest. `Ok(None)` when the stream ended
    /// between values; `Ok(Some(Err(_)))` when the value is not what the
    /// seed reads (the stream cannot be followed after that). A stream cut
    /// mid-value, a value over the bound and a read that timed out are
    /// errors, as for [`WatchStream::next_line`].
    pub(crate) fn next_value<T>(
        &mut self,
        seed: impl for<'de> serde::de::DeserializeSeed<'de, Value = T>,
    ) -> Result<Option<serde_json::Result<T>>, KubeError> {
        use std::io::BufRead;
        // The newlines between events; the stream may end there.
        loop {
            let server = &self.server;
            let buffered = self.reader.fill_buf().map_err(|e| broke(server, &e))?;
            if buffered.is_empty() {
                return Ok(None);
            }
            let blanks = buffered.iter().take_while(|b| b.is_ascii_whitespace()).count();
            let more = blanks < buffered.len();
            self.reader.consume(blanks);
            if more {
                break;
            }
        }
        let mut bounded = self.reader.by_ref().take(MAX_BODY);
        let parsed = seed.deserialize(&mut serde_json::Deserializer::from_reader(&mut bounded));
        let over = bounded.limit() == 0;
        self.outcome(parsed, over, "a watch event", |server| format!("the watch on {server} ended mid-event")).map(Some)
    }

    /// Parses the whole answer (one JSON value: a list) with `seed` straight
    /// from the stream, without buffering it. Its size is not bounded as a
    /// whole: each part is, [`MAX_BODY`] at most. The seed says where a
    /// part starts ([`PartBound::start`]: a list, before each item), and
    /// the read fails once one is longer. `Ok(Err(_))` when the answer is
    /// not what the seed reads, or the seed stopped it; a stream cut short,
    /// a part over the bound and a read that timed out are errors.
    pub(crate) fn read_parts<T>(
        &mut self,
        bound: &PartBound,
        seed: impl for<'de> serde::de::DeserializeSeed<'de, Value = T>,
    ) -> Result<serde_json::Result<T>, KubeError> {
        bound.start();
        let mut counted = Counted { inner: &mut self.reader, bound };
        let parsed = seed.deserialize(&mut serde_json::Deserializer::from_reader(&mut counted));
        self.outcome(parsed, bound.over(), "a part of an answer", |server| {
            format!("the answer from {server} ended mid-value")
        })
    }

    /// What a value parsed from the stream comes to: `Ok` its result, or
    /// the stream's failure: a value over the bound (`over`), a read that
    /// failed or timed out, a stream cut mid-value.
    fn outcome<T>(
        &self,
        parsed: serde_json::Result<T>,
        over: bool,
        value: &str,
        cut: impl Fn(&str) -> String,
    ) -> Result<serde_json::Result<T>, KubeError> {
        match parsed {
            Err(_) if over => Err(KubeError::Response {
                message: format!("{value} from {} is larger than {MAX_BODY} bytes", self.server),
            }),
            Err(e) if e.is_io() => {
                let kind = e.io_error_kind().unwrap_or(std::io::ErrorKind::Other);
                Err(broke(&self.server, &std::io::Error::new(kind, e.to_string())))
            }
            Err(e) if e.is_eof() => Err(KubeError::Transport { message: cut(&self.server) }),
            parsed => Ok(parsed),
        }
    }

    /// Reads what is left of the answer (at most a few bytes after the
    /// last value), so its connection can serve the next request.
    pub(crate) fn finish(mut self) {
        let _ = std::io::copy(&mut self.reader.by_ref().take(WATCH_BUFFER as u64), &mut std::io::sink());
    }
}

/// The bytes read of the current part of an answer read by
/// [`WatchStream::read_parts`], which fails once they pass [`MAX_BODY`].
#[derive(Default)]
pub(crate) struct PartBound(std::cell::Cell<u64>);

impl PartBound {
    /// A new part starts here.
    pub(crate) fn start(&self) {
        self.0.set(0);
    }

    /// Whether the current part went past the bound.
    pub(crate) fn over(&self) -> bool {
        self.0.get() > MAX_BODY
    }
}

/// A reader that counts into a [`PartBound`] and fails past it.
struct Counted<'a, R> {
    inner: R,
    bound: &'a PartBound,
}

impl<R: Read> Read for Counted<'_, R> {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        let read = self.bound.0.get();
        let left = (MAX_BODY + 1).saturating_sub(read);
        if left == 0 {
            return Err(std::io::Error::other("a part of the answer is over the bound"));
        }
        let wanted = buf.len().min(usize::try_from(left).unwrap_or(usize::MAX));
        let n = self.inner.read(&mut buf[..wanted])?;
        self.bound.0.set(read + n as u64);
        Ok(n)
    }
}

/// A read of the watch on `server` failed.
fn broke(server: &str, e: &std::io::Error) -> KubeError {
    let message = match e.kind() {
        std::io::ErrorKind::TimedOut | std::io::ErrorKind::WouldBlock => {
            format!("the watch on {server} went silent past its timeout")
        }
        _ => format!("the watch on {server} broke: {e}"),
    };
    KubeError::Transport { message }
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
