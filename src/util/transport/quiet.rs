//! Whether anything arrived on an idle connection, asked without waiting.

use std::io;
use std::net::TcpStream;
use std::time::Duration;

/// Tells without waiting whether the server sent anything on a kept
/// connection since its last answer was read: bytes, its close or a reset.
/// An epoll set that holds the socket alone, asked with a zero timeout:
/// one `epoll_wait`. (A non-blocking read or peek on the blocking socket
/// costs three system calls: two to switch the socket's mode around it.)
/// epoll reports the socket only when it is readable at the time asked,
/// so the answer's own arrival, already read, is not reported.
pub(super) struct Quiet {
    poll: mio::Poll,
    events: mio::Events,
}

impl Quiet {
    /// `socket`, registered with a new epoll set of its own.
    pub(super) fn watching(socket: TcpStream) -> io::Result<(TcpStream, Quiet)> {
        let poll = mio::Poll::new()?;
        // mio registers its own socket type: the same descriptor, lent.
        let mut lent = mio::net::TcpStream::from_std(socket);
        poll.registry().register(&mut lent, mio::Token(0), mio::Interest::READABLE)?;
        Ok((lent.into(), Quiet { poll, events: mio::Events::with_capacity(1) }))
    }

    /// Whether nothing arrived: no byte, no close, no error.
    pub(super) fn is_quiet(&mut self) -> bool {
        self.poll.poll(&mut self.events, Some(Duration::ZERO)).is_ok() && self.events.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::{Read, Write};
    use std::net::TcpListener;
    use std::time::Instant;

    /// Asks until `quiet` says `wanted` (loopback delivers at once; the
    /// bound is for a loaded machine).
    fn becomes(quiet: &mut Quiet, wanted: bool) -> bool {
        let started = Instant::now();
        while started.elapsed() < Duration::from_secs(5) {
            if quiet.is_quiet() == wanted {
                return true;
            }
            std::thread::sleep(Duration::from_millis(5));
        }
        false
    }

    #[test]
    fn bytes_or_a_close_since_the_last_read_are_seen_and_what_was_read_is_not() {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let (socket, mut quiet) = Quiet::watching(TcpStream::connect(listener.local_addr().unwrap()).unwrap()).unwrap();
        let (mut server, _) = listener.accept().unwrap();
        assert!(quiet.is_quiet(), "nothing sent yet");
        // An answer, read in full: nothing left to see.
        server.write_all(b"answer").unwrap();
        let mut read = [0u8; 6];
        (&socket).read_exact(&mut read).unwrap();
        assert!(quiet.is_quiet(), "the answer's arrival, read, is not news");
        // A stray byte after it.
        server.write_all(b"x").unwrap();
        assert!(becomes(&mut quiet, false), "a stray byte is seen");
        (&socket).read_exact(&mut [0u8; 1]).unwrap();
        assert!(quiet.is_quiet());
        // The server's close.
        drop(server);
        assert!(becomes(&mut quiet, false), "a close is seen");
    }
}
