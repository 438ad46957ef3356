//! An object as a read-modify-write reads it and writes it back
//! ([`Rewrite`]): its members, and those of the one member a sink changes
//! (`spec`, `status`), kept as the raw text they were read as. Only the
//! lists a sink owns are parsed and written anew; everything else
//! (metadata with its labels and finalizers, `status.extension`, which an
//! operator may fill with megabytes) goes back as it came, so memory is the
//! body twice, never a parsed tree of it.

use crate::kube::Fields;
use serde::{Deserialize, Serialize};
use serde_json::value::RawValue;

/// An object read, its member `key`'s members apart.
pub(crate) struct Rewrite<'a> {
    root: Fields<'a>,
    key: &'static str,
    inner: Fields<'a>,
}

impl<'a> Rewrite<'a> {
    /// Reads `body`, an object whose member `key` (absent or null: none
    /// yet) is an object too; `what` names it in an error.
    pub(crate) fn parse(body: &'a [u8], key: &'static str, what: &str) -> Result<Rewrite<'a>, String> {
        let root = Fields::parse(body).map_err(|_| format!("the {what} is not a JSON object"))?;
        let inner = root.object(key).map_err(|_| format!("the {what}'s {key} is not an object"))?;
        Ok(Rewrite { root, key, inner })
    }

    /// The member `name` of `key`, parsed; `None` when absent or null.
    pub(crate) fn field<T: Deserialize<'a>>(&self, name: &str) -> Result<Option<T>, String> {
        self.inner.get(name).map_err(|e| format!("{}.{name} are not as expected: {e}", self.key))
    }

    /// Whether `key` has the member `name`.
    pub(crate) fn has(&self, name: &str) -> bool {
        self.inner.raw(name).is_some()
    }

    /// The object with `key`'s members in `set` written anew (after the
    /// others when new), everything else as read.
    pub(crate) fn with(&self, set: &[(&str, Box<RawValue>)]) -> Vec<u8> {
        let mut inner: Vec<(&str, &RawValue)> = self.inner.0.iter().map(|(k, v)| (k.as_str(), *v)).collect();
        for (key, value) in set {
            match inner.iter_mut().find(|(k, _)| k == key) {
                Some((_, old)) => *old = value,
                None => inner.push((key, value)),
            }
        }
        let inner = raw(&Pairs(inner));
        let mut root: Vec<(&str, &RawValue)> = self.root.0.iter().map(|(k, v)| (k.as_str(), *v)).collect();
        match root.iter_mut().find(|(k, _)| *k == self.key) {
            Some((_, old)) => *old = &inner,
            None => root.push((self.key, &inner)),
        }
        serde_json::to_vec(&Pairs(root)).expect("an object serialises")
    }
}

/// `value` as raw JSON, to write with [`Rewrite::with`].
pub(crate) fn raw<T: Serialize + ?Sized>(value: &T) -> Box<RawValue> {
    serde_json::value::to_raw_value(value).expect("a value serialises")
}

/// An object to write, its members in order.
struct Pairs<'a>(Vec<(&'a str, &'a RawValue)>);

impl Serialize for Pairs<'_> {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_map(self.0.iter().map(|(k, v)| (k, v)))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_the_members_set_are_written_anew_and_the_rest_goes_back_as_read() {
        let body = br#"{"kind":"X","metadata":{"finalizers":["a","b"],"resourceVersion":"7"},"spec":{"keep":{"deep":[1, 2]},"conditions":[]}}"#;
        let object = Rewrite::parse(body, "spec", "X").unwrap();
        assert_eq!(object.field::<Vec<u8>>("conditions").unwrap(), Some(vec![]));
        assert_eq!(object.field::<Vec<u8>>("missing").unwrap(), None);
        assert!(object.has("keep") && !object.has("missing"));
        let written = object.with(&[("conditions", raw(&[1])), ("added", raw(&"new"))]);
        assert_eq!(
            String::from_utf8(written).unwrap(),
            r#"{"kind":"X","metadata":{"finalizers":["a","b"],"resourceVersion":"7"},"spec":{"keep":{"deep":[1, 2]},"conditions":[1],"added":"new"}}"#
        );
        let none = Rewrite::parse(br#"{"spec":null}"#, "spec", "X").unwrap();
        assert_eq!(String::from_utf8(none.with(&[("a", raw(&1))])).unwrap(), r#"{"spec":{"a":1}}"#);
        assert_eq!(Rewrite::parse(b"[]", "spec", "X").err().unwrap(), "the X is not a JSON object");
        assert_eq!(Rewrite::parse(br#"{"spec":3}"#, "spec", "X").err().unwrap(), "the X's spec is not an object");
        let bad = Rewrite::parse(br#"{"spec":{"conditions":"x"}}"#, "spec", "X").unwrap();
        assert!(bad.field::<Vec<u8>>("conditions").unwrap_err().starts_with("spec.conditions are not as expected"));
    }
}
