//! Standard base64 (RFC 4648), as kubeconfig `*-data` fields and an exec
//! plugin's cluster information hold certificates.

/// Standard base64 with padding, as kubeconfig `*-data` fields hold it.
pub(crate) fn encode_base64(data: &[u8]) -> String {
    const T: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    let mut s = String::with_capacity(data.len().div_ceil(3) * 4);
    for chunk in data.chunks(3) {
        let n = chunk.iter().fold(0u32, |a, &b| (a << 8) | u32::from(b)) << (8 * (3 - chunk.len()));
        for i in 0..=chunk.len() {
            s.push(T[(n >> (18 - 6 * i)) as usize & 63] as char);
        }
        s.push_str(&"=="[..3 - chunk.len()]);
    }
    s
}

/// Standard base64 (RFC 4648, padding optional, white space ignored), as
/// kubeconfig `*-data` fields hold it.
pub(crate) fn decode_base64(input: &str) -> Option<Vec<u8>> {
    let mut out = Vec::with_capacity(input.len() * 3 / 4);
    let (mut acc, mut bits) = (0u32, 0u32);
    let mut padding = false;
    for c in input.bytes().filter(|c| !c.is_ascii_whitespace()) {
        let v = match c {
            b'A'..=b'Z' => c - b'A',
            b'a'..=b'z' => c - b'a' + 26,
            b'0'..=b'9' => c - b'0' + 52,
            b'+' => 62,
            b'/' => 63,
            b'=' => {
                padding = true;
                continue;
            }
            _ => return None,
        };
        if padding {
            return None;
        }
        acc = (acc << 6) | u32::from(v);
        bits += 6;
        if bits >= 8 {
            bits -= 8;
            out.push((acc >> bits) as u8);
        }
    }
    // Leftover bits must be fewer than a byte and all zero.
    (bits < 6 && acc & ((1 << bits) - 1) == 0).then_some(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn base64_round_trips_and_rejects_garbage() {
        for data in [&b""[..], b"f", b"fo", b"foo", b"foob", b"fooba", b"foobar", &[0, 255, 128, 7]] {
            assert_eq!(decode_base64(&encode_base64(data)).as_deref(), Some(data));
        }
        assert_eq!(decode_base64("Zm9v\nYmFy").as_deref(), Some(&b"foobar"[..]));
        assert_eq!(decode_base64("Zm9vYg").as_deref(), Some(&b"foob"[..]));
        for bad in ["Zm9v!", "Zg=x", "Zh==", "Z"] {
            assert_eq!(decode_base64(bad), None, "{bad}");
        }
    }
}
