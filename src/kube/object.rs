//! An object read for the few fields its caller uses ([`Fields`]): its
//! members kept as the raw text they were read as (where each begins and
//! ends in the body; nothing copied), and only the members asked for
//! parsed, into the types asked for. A Lease with 90,000 labels or an
//! object with 50,000 finalizers costs its body for a moment, not a tree of
//! values many times its size; and every object read shares this one
//! parser, so each adds little code to a binary with a size budget.

use super::KubeError;
use serde::Deserialize;
use serde_json::value::RawValue;

/// A JSON object's members, each value its raw text borrowed from the body.
pub(crate) struct Fields<'a>(pub Vec<(String, &'a RawValue)>);

impl<'a> Fields<'a> {
    /// `json`, which must be an object.
    pub(crate) fn parse(json: &'a [u8]) -> serde_json::Result<Fields<'a>> {
        serde_json::from_slice(json)
    }

    /// The member `key` as read.
    pub(crate) fn raw(&self, key: &str) -> Option<&'a RawValue> {
        self.0.iter().find(|(k, _)| k == key).map(|(_, v)| *v)
    }

    /// The member `key`, an object too (absent or null: an empty one).
    pub(crate) fn object(&self, key: &str) -> serde_json::Result<Fields<'a>> {
        match self.raw(key).map(RawValue::get) {
            None | Some("null") => Ok(Fields(Vec::new())),
            Some(raw) => Fields::parse(raw.as_bytes()),
        }
    }

    /// The member `key` as a `T`; `None` when absent or null.
    pub(crate) fn get<T: Deserialize<'a>>(&self, key: &str) -> serde_json::Result<Option<T>> {
        self.raw(key).map_or(Ok(None), |raw| serde_json::from_slice(raw.get().as_bytes()))
    }
}

impl<'de> Deserialize<'de> for Fields<'de> {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct Visit;
        impl<'de> serde::de::Visitor<'de> for Visit {
            type Value = Fields<'de>;
            fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str("a JSON object")
            }
            fn visit_map<M: serde::de::MapAccess<'de>>(self, mut map: M) -> Result<Fields<'de>, M::Error> {
                let mut members = Vec::new();
                while let Some(member) = map.next_entry()? {
                    members.push(member);
                }
                Ok(Fields(members))
            }
        }
        d.deserialize_map(Visit)
    }
}

/// `what` (`Lease ns/name`) is not what it should be, as `e` found: an
/// error that says where, never quoting the body.
pub(crate) fn unreadable(what: &str, e: &serde_json::Error) -> KubeError {
    use serde_json::error::Category;
    let kind = match e.classify() {
        Category::Syntax => "not JSON",
        Category::Eof => "cut short",
        _ => "not what the API promises",
    };
    KubeError::Response { message: format!("{what} is {kind} (column {})", e.column()) }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_the_members_asked_for_are_parsed() {
        let body = br#"{"metadata":{"labels":{"a":"1"},"finalizers":["x"]},"spec":{"holderIdentity":"op-0_1","n":7,"z":null}}"#;
        let object = Fields::parse(body).unwrap();
        let spec = object.object("spec").unwrap();
        assert_eq!(spec.get::<String>("holderIdentity").unwrap().as_deref(), Some("op-0_1"));
        assert_eq!((spec.get::<u64>("n").unwrap(), spec.get::<u64>("z").unwrap()), (Some(7), None));
        assert_eq!(object.object("status").unwrap().0.len(), 0, "absent: empty");
        assert_eq!(
            object.object("metadata").unwrap().object("labels").unwrap().get::<String>("a").unwrap(),
            Some("1".into())
        );
        let wrong = spec.get::<u64>("holderIdentity").unwrap_err();
        assert_eq!(unreadable("Lease ns/l", &wrong).to_string(), "Lease ns/l is not what the API promises (column 8)");
        let cut = Fields::parse(b"{\"a\":").err().unwrap();
        assert!(unreadable("X", &cut).to_string().starts_with("X is cut short"));
        assert!(Fields::parse(b"[]").is_err());
    }
}
