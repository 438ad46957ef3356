//! JSON written by hand where every heartbeat writes it, exactly as
//! serde_json writes it (its escapes; the writers' tests hold the two
//! together), either as a JSON text of its own or escaped once more to
//! stand inside a JSON string: the status document and the lock record
//! travel as string values of the status write's body. serde_json, built
//! for size here, took longer over a few short fields than over the rest
//! of a heartbeat's body.
//!
//! What reaches a body is escaped by construction: every string and key
//! goes through [`Place::string`], and JSON meant to stand inside a JSON
//! string is an [`EscapedJson`], which only an [`Object`] written at
//! [`AsString`] makes: there is no way to build one from raw bytes.

use std::marker::PhantomData;

/// Where the JSON written stands.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Place {
    /// A JSON text of its own.
    Text,
    /// Inside a JSON string: each `"` and `\` of the text escaped.
    InString,
}

impl Place {
    /// A `"` of the JSON text, as it stands here.
    pub(crate) fn quote(self) -> &'static [u8] {
        match self {
            Place::Text => b"\"",
            Place::InString => b"\\\"",
        }
    }

    /// `s` as a JSON string of the text, quotes and escapes included.
    pub(crate) fn string(self, out: &mut Vec<u8>, s: &str) {
        if plain(s) {
            out.extend_from_slice(self.quote());
            out.extend_from_slice(s.as_bytes());
            out.extend_from_slice(self.quote());
            return;
        }
        let written = match self {
            Place::Text => serde_json::to_writer(out, s),
            Place::InString => serde_json::to_writer(Escaping(out), s),
        };
        written.expect("a string serialises into a Vec");
    }

    /// An object's `"key":`, the key escaped as any string.
    fn key(self, out: &mut Vec<u8>, key: &str) {
        self.string(out, key);
        out.push(b':');
    }
}

/// JSON text escaped to stand inside a JSON string (each `"` and `\` of the
/// text escaped): what an [`Object`] written [`AsString`] ends as. Its
/// bytes are private, so nothing else can pass for it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct EscapedJson(Vec<u8>);

impl EscapedJson {
    pub(crate) fn as_bytes(&self) -> &[u8] {
        &self.0
    }
}

/// Where an [`Object`] stands, and what it ends as there.
pub(crate) trait Placed {
    const PLACE: Place;
    type Written;
    fn written(out: Vec<u8>) -> Self::Written;
}

/// A JSON text of its own, ending as a `String`: what the tests hold the
/// writers to serde_json's output with.
#[cfg(test)]
pub(crate) enum AsText {}

#[cfg(test)]
impl Placed for AsText {
    const PLACE: Place = Place::Text;
    type Written = String;
    fn written(out: Vec<u8>) -> String {
        String::from_utf8(out).expect("JSON written from strings is UTF-8")
    }
}

/// Inside a JSON string, ending as an [`EscapedJson`].
pub(crate) enum AsString {}

impl Placed for AsString {
    const PLACE: Place = Place::InString;
    type Written = EscapedJson;
    fn written(out: Vec<u8>) -> EscapedJson {
        EscapedJson(out)
    }
}

/// A JSON object written field by field at `P`: keys and string values
/// escaped for it, numbers in decimal, the commas and braces its own.
pub(crate) struct Object<P: Placed> {
    out: Vec<u8>,
    place: PhantomData<P>,
}

impl<P: Placed> Object<P> {
    /// An empty object, room made for `capacity` bytes.
    pub(crate) fn with_capacity(capacity: usize) -> Object<P> {
        let mut out = Vec::with_capacity(capacity);
        out.push(b'{');
        Object { out, place: PhantomData }
    }

    fn field(&mut self, key: &str) {
        if self.out.len() > 1 {
            self.out.push(b',');
        }
        P::PLACE.key(&mut self.out, key);
    }

    /// `"key":"value"`.
    pub(crate) fn string(&mut self, key: &str, value: &str) {
        self.field(key);
        P::PLACE.string(&mut self.out, value);
    }

    /// `"key":n`.
    pub(crate) fn number(&mut self, key: &str, n: u64) {
        self.field(key);
        decimal(&mut self.out, n);
    }

    /// The object, closed.
    pub(crate) fn end(mut self) -> P::Written {
        self.out.push(b'}');
        P::written(self.out)
    }
}

/// `n` in decimal, as serde_json writes an unsigned integer.
pub(crate) fn decimal(out: &mut Vec<u8>, n: u64) {
    let mut digits = [0u8; 20];
    let mut at = digits.len();
    let mut rest = n;
    loop {
        at -= 1;
        digits[at] = b'0' + (rest % 10) as u8;
        rest /= 10;
        if rest == 0 {
            break;
        }
    }
    out.extend_from_slice(&digits[at..]);
}

/// JSON text escaped to stand inside a JSON string: what the writers at
/// [`Place::InString`] are held to.
#[cfg(test)]
pub(crate) fn escaped(json: &str) -> Vec<u8> {
    let mut out = Vec::with_capacity(json.len() + json.len() / 4);
    std::io::Write::write_all(&mut Escaping(&mut out), json.as_bytes()).expect("a Vec takes every write");
    out
}

/// Whether `s` stands in a JSON string as it is: no control character,
/// quote or backslash to escape (serde_json escapes nothing else).
fn plain(s: &str) -> bool {
    s.bytes().all(|b| b >= 0x20 && b != b'"' && b != b'\\')
}

/// Writes JSON text as the inside of a JSON string. serde_json's output
/// holds no raw control characters (its strings escape them), so `"` and
/// `\` are all there is to escape.
struct Escaping<'a>(&'a mut Vec<u8>);

impl std::io::Write for Escaping<'_> {
    fn write(&mut self, text: &[u8]) -> std::io::Result<usize> {
        // Each run up to a character to escape is copied whole; the
        // character starts the next run, after its backslash.
        let mut run = 0;
        for (at, byte) in text.iter().enumerate() {
            if matches!(byte, b'"' | b'\\') {
                self.0.extend_from_slice(&text[run..at]);
                self.0.push(b'\\');
                run = at;
            }
        }
        self.0.extend_from_slice(&text[run..]);
        Ok(text.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const ODD: &str = "a \"quoted\" \\ reason\non two lines, ünïcode, \u{1}, \u{7f} and \u{2028}";

    fn text(write: impl FnOnce(&mut Vec<u8>)) -> String {
        let mut out = Vec::new();
        write(&mut out);
        String::from_utf8(out).unwrap()
    }

    #[test]
    fn strings_are_written_as_serde_json_writes_them_at_either_place() {
        for s in ["", "plain", "a\"b", "back\\slash", ODD] {
            let json = serde_json::to_string(s).unwrap();
            assert_eq!(text(|out| Place::Text.string(out, s)), json, "{s:?}");
            let inside = text(|out| Place::InString.string(out, s));
            assert_eq!(inside, String::from_utf8(escaped(&json)).unwrap(), "{s:?}");
            // Inside a string, it reads back as the JSON text it stands for.
            assert_eq!(serde_json::from_str::<String>(&format!("\"{inside}\"")).unwrap(), json);
        }
        assert_eq!(text(|out| Place::InString.key(out, "renewTime")), r#"\"renewTime\":"#);
        assert_eq!(text(|out| Place::Text.key(out, "renewTime")), r#""renewTime":"#);
    }

    #[test]
    fn an_object_s_keys_and_values_are_escaped_as_serde_json_escapes_them() {
        let mut expected = serde_json::Map::new();
        expected.insert(ODD.into(), ODD.into());
        expected.insert("n".into(), 7.into());
        fn write<P: Placed>(mut object: Object<P>) -> P::Written {
            object.string(ODD, ODD);
            object.number("n", 7);
            object.end()
        }
        let json: String = write(Object::<AsText>::with_capacity(0));
        assert_eq!(serde_json::from_str::<serde_json::Value>(&json).unwrap(), serde_json::Value::Object(expected));
        assert_eq!(
            json,
            format!("{{{}:{},\"n\":7}}", serde_json::to_string(ODD).unwrap(), serde_json::to_string(ODD).unwrap())
        );
        let inside: EscapedJson = write(Object::<AsString>::with_capacity(0));
        assert_eq!(inside.as_bytes(), escaped(&json));
        // Inside a string, it reads back as the JSON text it stands for.
        let quoted = [&b"\""[..], inside.as_bytes(), b"\""].concat();
        assert_eq!(serde_json::from_slice::<String>(&quoted).unwrap(), json);
        assert_eq!(Object::<AsString>::with_capacity(0).end().as_bytes(), b"{}");
    }

    #[test]
    fn numbers_are_written_as_serde_json_writes_them() {
        for n in [0, 1, 9, 10, 130, 1_000_000, u64::MAX] {
            assert_eq!(text(|out| decimal(out, n)), serde_json::to_string(&n).unwrap());
        }
    }
}
