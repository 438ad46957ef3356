//! An answer's head without the headers nobody reads, before ureq parses it.
//!
//! ureq turns every header of an answer into an entry of an `http`
//! header map: the name checked and, when it is not a standard one,
//! lower-cased into an allocation of its own; the value copied into
//! another; both hashed in. kube-apiserver answers every request with five
//! headers that neither ureq nor opstatus reads (its audit ID, its
//! priority-and-fairness flow schema and priority level, `Cache-Control`
//! and `Date`), and with `Content-Type: application/json`, of which ureq
//! keeps a copy of the media type but acts only on a `text/` one; they are
//! taken out of the bytes read, in place, before ureq sees them.

/// Header names (lower case) that neither ureq nor opstatus reads: ureq
/// reads the framing (`Content-Length`, `Transfer-Encoding`,
/// `Connection`), opstatus `Retry-After` and nothing else.
const UNREAD: [&[u8]; 5] =
    [b"audit-id", b"cache-control", b"date", b"x-kubernetes-pf-flowschema-uid", b"x-kubernetes-pf-prioritylevel-uid"];

/// Takes the [`UNREAD`] header lines out of the answer's head at the start
/// of `bytes`, moving what follows (the rest of the head, the first bytes
/// of the body) down; returns how many bytes are left. `bytes` is left as
/// it is unless it holds the whole head, each line ending in CRLF and none
/// folded onto the one before: ureq then parses it as it would have.
pub(super) fn drop_unread_headers(bytes: &mut [u8]) -> usize {
    let len = bytes.len();
    // The status line, kept.
    let Some(mut read) = line_end(bytes, 0) else { return len };
    let mut write = read;
    loop {
        let Some(end) = line_end(bytes, read) else { return len };
        let line = &bytes[read..end];
        if line == b"\r\n" {
            break;
        }
        if line[0] == b' ' || line[0] == b'\t' {
            // A folded line (obsolete): left for ureq to refuse or read.
            return len;
        }
        if !unread(line) {
            bytes.copy_within(read..end, write);
            write += end - read;
        }
        read = end;
    }
    if write == read {
        return len;
    }
    bytes.copy_within(read..len, write);
    len - (read - write)
}

/// Whether nobody reads the header `line` (CRLF included).
fn unread(line: &[u8]) -> bool {
    let (name, value) = match line.iter().position(|&b| b == b':') {
        Some(colon) => (&line[..colon], line[colon + 1..].trim_ascii()),
        None => (line, &b""[..]),
    };
    UNREAD.iter().any(|unread| unread.eq_ignore_ascii_case(name))
        || (name.eq_ignore_ascii_case(b"content-type") && value.eq_ignore_ascii_case(b"application/json"))
}

/// The end of the CRLF-terminated line that starts at `start`, just past
/// its LF; `None` when it is not complete or ends in a bare LF.
fn line_end(bytes: &[u8], start: usize) -> Option<usize> {
    let lf = start + bytes[start..].iter().position(|&b| b == b'\n')?;
    (lf > start && bytes[lf - 1] == b'\r').then_some(lf + 1)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn dropped(input: &str) -> String {
        let mut bytes = input.as_bytes().to_vec();
        let len = drop_unread_headers(&mut bytes);
        String::from_utf8(bytes[..len].to_vec()).unwrap()
    }

    #[test]
    fn the_headers_nobody_reads_leave_and_the_rest_stays_in_order() {
        let answer = "HTTP/1.1 200 OK\r\nAudit-Id: 6f1c\r\nCache-Control: no-cache, private\r\n\
                      Content-Type: application/json\r\nX-Kubernetes-Pf-Flowschema-Uid: a1\r\n\
                      X-Kubernetes-Pf-Prioritylevel-Uid: b2\r\nDATE: Thu, 26 Nov 2026 09:00:00 GMT\r\n\
                      Retry-After: 3\r\nContent-Length: 2\r\n\r\n{}";
        assert_eq!(dropped(answer), "HTTP/1.1 200 OK\r\nRetry-After: 3\r\nContent-Length: 2\r\n\r\n{}");
        // Another media type, which ureq may act on, stays.
        for kept in ["Content-Type: text/plain; charset=latin1", "content-type: application/json; charset=utf-16"] {
            let answer = format!("HTTP/1.1 200 OK\r\n{kept}\r\ncontent-type:APPLICATION/JSON \r\n\r\n");
            assert_eq!(dropped(&answer), format!("HTTP/1.1 200 OK\r\n{kept}\r\n\r\n"));
        }
    }

    #[test]
    fn a_head_not_all_there_or_not_plain_is_left_as_it_is() {
        let partial = "HTTP/1.1 200 OK\r\nAudit-Id: 6f1c\r\nContent-Le";
        assert_eq!(dropped(partial), partial);
        let bare_lf = "HTTP/1.1 200 OK\nAudit-Id: 6f1c\nContent-Length: 0\n\n";
        assert_eq!(dropped(bare_lf), bare_lf);
        let folded = "HTTP/1.1 200 OK\r\nDate: Thu,\r\n 26 Nov 2026\r\nContent-Length: 0\r\n\r\n";
        assert_eq!(dropped(folded), folded);
        // The body is not a head: a blank line in it does not count.
        let kept = "HTTP/1.1 204 No Content\r\n\r\nAudit-Id: x\r\n\r\n";
        assert_eq!(dropped(kept), kept);
        assert_eq!(dropped(""), "");
    }
}
