//! The `Authorization` header of a client's requests, written into each
//! request's head by the transport as the head goes out.
//!
//! ureq checks every byte of every header value it is given, twice per
//! request, and copies it into the head: for a bound service-account token
//! (about 1 KB) that was as much work as the rest of the request's head.
//! The line is checked once instead, when the token is read, and copied
//! into the head as it is written. The client that owns the token sets the
//! line ([`Authorization::set`], again when a rotated token is read); the
//! connections of its agent read it for each request, so a request sent
//! again after a 401 carries the new one.

use std::sync::{Arc, Mutex, PoisonError};

/// A checked `Authorization: VALUE` header line, CRLF included. Never
/// printed: it holds a credential.
#[derive(Clone, PartialEq, Eq)]
pub(crate) struct AuthorizationLine(Arc<[u8]>);

impl AuthorizationLine {
    /// The line for `Bearer TOKEN`; `None` when the token holds a byte an
    /// HTTP header value cannot (a control character, a line break,
    /// anything not ASCII), which would end the line or make it invalid.
    pub(crate) fn bearer(token: &str) -> Option<AuthorizationLine> {
        let sendable = |b: &u8| *b == b'\t' || (b' '..=b'~').contains(b);
        if !token.as_bytes().iter().all(sendable) {
            return None;
        }
        let line = [b"Authorization: Bearer ", token.as_bytes(), b"\r\n"].concat();
        Some(AuthorizationLine(line.into()))
    }
}

impl std::fmt::Debug for AuthorizationLine {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("AuthorizationLine(<redacted>)")
    }
}

/// The line every request of one agent carries, if any: shared by the
/// client that sets it and the connections that write it.
#[derive(Clone, Debug, Default)]
pub(crate) struct Authorization(Arc<Mutex<Option<AuthorizationLine>>>);

impl Authorization {
    /// Sends `line` with every request from now on (none: no header).
    pub(crate) fn set(&self, line: Option<AuthorizationLine>) {
        *self.0.lock().unwrap_or_else(PoisonError::into_inner) = line;
    }

    /// Appends `head` to `out` with the line (when one is set) just before
    /// the blank line that ends it; `false`, and nothing appended, when
    /// `head` does not end a request's head. ureq hands a request's head
    /// over in one piece (its buffer is far larger than a head), the blank
    /// line always with the last header line before it.
    pub(super) fn append_head(&self, head: &[u8], out: &mut Vec<u8>) -> bool {
        let Some(headers) = head.strip_suffix(b"\r\n\r\n") else { return false };
        let line = self.0.lock().unwrap_or_else(PoisonError::into_inner);
        out.extend_from_slice(headers);
        out.extend_from_slice(b"\r\n");
        if let Some(AuthorizationLine(line)) = &*line {
            out.extend_from_slice(line);
        }
        out.extend_from_slice(b"\r\n");
        true
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn written(authorization: &Authorization, head: &str) -> Option<String> {
        let mut out = b"held".to_vec();
        let appended = authorization.append_head(head.as_bytes(), &mut out);
        appended.then(|| String::from_utf8(out).unwrap())
    }

    #[test]
    fn the_line_goes_last_among_the_headers_and_follows_a_rotation() {
        let authorization = Authorization::default();
        let head = "PATCH /api/v1/x HTTP/1.1\r\nHost: 10.96.0.1\r\nContent-Length: 2\r\n\r\n";
        assert_eq!(written(&authorization, head).unwrap(), format!("held{head}"), "no token: the head as it is");
        authorization.set(AuthorizationLine::bearer("old.token-1"));
        assert_eq!(
            written(&authorization, head).unwrap(),
            "heldPATCH /api/v1/x HTTP/1.1\r\nHost: 10.96.0.1\r\nContent-Length: 2\r\n\
             Authorization: Bearer old.token-1\r\n\r\n"
        );
        // A clone is the same slot: the client's rotation reaches the connections.
        authorization.clone().set(AuthorizationLine::bearer("new.token-2"));
        assert!(written(&authorization, head).unwrap().ends_with("\r\nAuthorization: Bearer new.token-2\r\n\r\n"));
    }

    #[test]
    fn what_does_not_end_a_head_is_not_edited() {
        let authorization = Authorization::default();
        authorization.set(AuthorizationLine::bearer("t"));
        assert_eq!(written(&authorization, "GET / HTTP/1.1\r\nHost: h\r\n"), None, "the head's end not in it");
        assert_eq!(written(&authorization, "{\"a\":1}"), None, "a body");
        assert_eq!(written(&authorization, ""), None);
    }

    #[test]
    fn a_token_that_would_break_the_head_makes_no_line_and_none_prints() {
        for bad in ["a\r\nX-Injected: 1", "a\nb", "nul\0", "caf\u{e9}", "del\u{7f}"] {
            assert_eq!(AuthorizationLine::bearer(bad), None, "{bad:?}");
        }
        let line = AuthorizationLine::bearer("secret-token\twith tab").unwrap();
        let authorization = Authorization::default();
        authorization.set(Some(line.clone()));
        for printed in [format!("{line:?}"), format!("{authorization:?}")] {
            assert!(!printed.contains("secret-token"), "{printed}");
        }
    }
}
