//! The operator's Pod as the API server sends it (a list's item, a watch
//! event's object), reduced while it is parsed to what the judgement reads:
//! the named container's status and the Pod's `resourceVersion`.
//!
//! Every other container's status is parsed one at a time and dropped, and
//! the rest of the Pod (its spec, annotations, managed fields) is skipped
//! without being copied. Read from the answer as it arrives
//! (`WatchStream::next_value` in `kube/watch_stream.rs`), a Pod of
//! megabytes so costs no buffer of its size and no owned copy of each
//! container's strings. An `ERROR` event's object (a `Status`) is read by
//! the same pass: its `code` and `message`.

use super::judge::{ContainerStatus, Pod};
use crate::kube::ListKey;
use serde::Deserialize;
use serde::de::{self, DeserializeSeed, Deserializer, IgnoredAny, MapAccess, SeqAccess, Visitor};
use std::fmt;

/// One watch event, as far as the Pod watch cares.
pub(crate) enum Event {
    /// `ADDED` or `MODIFIED`: the Pod as it is now, and its version.
    Changed(Box<Pod>, String),
    /// `DELETED`, and the version it was deleted at.
    Deleted(String),
    /// `BOOKMARK`: nothing changed up to this version.
    Bookmark(String),
    /// `ERROR`: the `Status` it carries (`code` 410: the version watched
    /// from is gone). The message is the server's, unsanitised.
    Error { code: Option<u64>, message: String },
    /// A type this watch does not know: ignored.
    Other,
}

/// Reads one watch event keeping the named container: the seed for
/// [`crate::kube::WatchStream::next_value`].
pub(crate) struct WatchEvent<'n>(pub &'n str);

impl<'de> DeserializeSeed<'de> for WatchEvent<'_> {
    type Value = Event;

    fn deserialize<D: Deserializer<'de>>(self, de: D) -> Result<Event, D::Error> {
        let (kind, object) = EventSeed(self.0).deserialize(de)?;
        let object = object.unwrap_or_default();
        Ok(match kind {
            Kind::Added | Kind::Modified => {
                Event::Changed(Box::new(Pod { container: object.container }), object.version)
            }
            Kind::Deleted => Event::Deleted(object.version),
            Kind::Bookmark => Event::Bookmark(object.version),
            Kind::Error => Event::Error { code: object.code, message: object.message },
            Kind::Other => Event::Other,
        })
    }
}

/// Reads a Pod list (by name, so one item at most) keeping the named
/// container of its first item, and the list's `resourceVersion` to watch
/// from.
pub(crate) struct PodList<'n>(pub &'n str);

impl<'de> DeserializeSeed<'de> for PodList<'_> {
    type Value = (Option<Pod>, String);

    fn deserialize<D: Deserializer<'de>>(self, de: D) -> Result<Self::Value, D::Error> {
        de.deserialize_map(ListSeed(self.0))
    }
}

/// A Pod's JSON (a GET's answer): the named container and the version.
pub(crate) fn pod(json: &[u8], container: &str) -> serde_json::Result<(Pod, String)> {
    let mut de = serde_json::Deserializer::from_slice(json);
    let object = ObjectSeed(container).deserialize(&mut de)?;
    de.end()?;
    Ok((Pod { container: object.container }, object.version))
}

/// A Pod list's JSON: see [`PodList`].
#[cfg(test)]
fn list(json: &[u8], container: &str) -> serde_json::Result<(Option<Pod>, String)> {
    let mut de = serde_json::Deserializer::from_slice(json);
    let list = PodList(container).deserialize(&mut de)?;
    de.end()?;
    Ok(list)
}

/// One line of a Pod watch: see [`WatchEvent`].
#[cfg(test)]
fn event(line: &[u8], container: &str) -> serde_json::Result<Event> {
    let mut de = serde_json::Deserializer::from_slice(line);
    let event = WatchEvent(container).deserialize(&mut de)?;
    de.end()?;
    Ok(event)
}

#[derive(Deserialize, Default, Clone, Copy)]
#[serde(rename_all = "UPPERCASE")]
enum Kind {
    Added,
    Modified,
    Deleted,
    Bookmark,
    Error,
    #[default]
    #[serde(other)]
    Other,
}

#[derive(Deserialize, Default)]
#[serde(rename_all = "camelCase")]
struct Meta {
    #[serde(default)]
    resource_version: String,
}

/// What one object (a Pod, or a `Status`) says.
#[derive(Default)]
struct Object {
    container: Option<ContainerStatus>,
    version: String,
    code: Option<u64>,
    message: String,
}

#[derive(Deserialize)]
#[serde(field_identifier, rename_all = "camelCase")]
enum ObjectKey {
    Metadata,
    Status,
    Code,
    Message,
    #[serde(other)]
    Other,
}

#[derive(Deserialize)]
#[serde(field_identifier, rename_all = "camelCase")]
enum EventKey {
    Type,
    Object,
    #[serde(other)]
    Other,
}

#[derive(Deserialize)]
#[serde(field_identifier, rename_all = "camelCase")]
enum StatusKey {
    ContainerStatuses,
    #[serde(other)]
    Other,
}

/// `{"type": …, "object": …}` in either order.
struct EventSeed<'n>(&'n str);

impl<'de> DeserializeSeed<'de> for EventSeed<'_> {
    type Value = (Kind, Option<Object>);

    fn deserialize<D: Deserializer<'de>>(self, de: D) -> Result<Self::Value, D::Error> {
        de.deserialize_map(self)
    }
}

impl<'de> Visitor<'de> for EventSeed<'_> {
    type Value = (Kind, Option<Object>);

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a watch event")
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Self::Value, A::Error> {
        let (mut kind, mut object) = (Kind::Other, None);
        while let Some(key) = map.next_key()? {
            match key {
                EventKey::Type => kind = map.next_value()?,
                EventKey::Object => object = Some(map.next_value_seed(ObjectSeed(self.0))?),
                EventKey::Other => drop(map.next_value::<IgnoredAny>()?),
            }
        }
        Ok((kind, object))
    }
}

/// `{"metadata": {"resourceVersion": …}, "items": [pod]}`.
struct ListSeed<'n>(&'n str);

impl<'de> Visitor<'de> for ListSeed<'_> {
    type Value = (Option<Pod>, String);

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a Pod list")
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Self::Value, A::Error> {
        let (mut pod, mut version) = (None, String::new());
        while let Some(key) = map.next_key()? {
            match key {
                ListKey::Metadata => version = map.next_value::<Meta>()?.resource_version,
                ListKey::Items => pod = map.next_value_seed(FirstItem(self.0))?,
                ListKey::Other => drop(map.next_value::<IgnoredAny>()?),
            }
        }
        Ok((pod, version))
    }
}

/// A list's `items`: the first read, any others skipped.
struct FirstItem<'n>(&'n str);

impl<'de> DeserializeSeed<'de> for FirstItem<'_> {
    type Value = Option<Pod>;

    fn deserialize<D: Deserializer<'de>>(self, de: D) -> Result<Self::Value, D::Error> {
        de.deserialize_any(self)
    }
}

impl<'de> Visitor<'de> for FirstItem<'_> {
    type Value = Option<Pod>;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a list of Pods")
    }

    fn visit_unit<E: de::Error>(self) -> Result<Self::Value, E> {
        Ok(None)
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Self::Value, A::Error> {
        let first = seq.next_element_seed(ObjectSeed(self.0))?.map(|o| Pod { container: o.container });
        while seq.next_element::<IgnoredAny>()?.is_some() {}
        Ok(first)
    }
}

/// A Pod or a `Status`: its version, the named container's status, and a
/// `Status`'s code and message.
struct ObjectSeed<'n>(&'n str);

impl<'de> DeserializeSeed<'de> for ObjectSeed<'_> {
    type Value = Object;

    fn deserialize<D: Deserializer<'de>>(self, de: D) -> Result<Object, D::Error> {
        de.deserialize_map(self)
    }
}

impl<'de> Visitor<'de> for ObjectSeed<'_> {
    type Value = Object;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a Kubernetes object")
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Object, A::Error> {
        let mut object = Object::default();
        while let Some(key) = map.next_key()? {
            match key {
                ObjectKey::Metadata => object.version = map.next_value::<Meta>()?.resource_version,
                ObjectKey::Status => object.container = map.next_value_seed(StatusSeed(self.0))?,
                ObjectKey::Code => object.code = map.next_value()?,
                ObjectKey::Message => object.message = map.next_value::<Option<String>>()?.unwrap_or_default(),
                ObjectKey::Other => drop(map.next_value::<IgnoredAny>()?),
            }
        }
        Ok(object)
    }
}

/// A Pod's `status` (the named container's entry of its
/// `containerStatuses`), or a `Status`'s `status` string (nothing).
struct StatusSeed<'n>(&'n str);

impl<'de> DeserializeSeed<'de> for StatusSeed<'_> {
    type Value = Option<ContainerStatus>;

    fn deserialize<D: Deserializer<'de>>(self, de: D) -> Result<Self::Value, D::Error> {
        de.deserialize_any(self)
    }
}

impl<'de> Visitor<'de> for StatusSeed<'_> {
    type Value = Option<ContainerStatus>;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a Pod status")
    }

    fn visit_unit<E: de::Error>(self) -> Result<Self::Value, E> {
        Ok(None)
    }

    fn visit_str<E: de::Error>(self, _: &str) -> Result<Self::Value, E> {
        Ok(None)
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Self::Value, A::Error> {
        let mut found = None;
        while let Some(key) = map.next_key()? {
            match key {
                StatusKey::ContainerStatuses => found = map.next_value_seed(NamedContainer(self.0))?,
                StatusKey::Other => drop(map.next_value::<IgnoredAny>()?),
            }
        }
        Ok(found)
    }
}

/// `containerStatuses`: each entry parsed in turn, the one named kept.
struct NamedContainer<'n>(&'n str);

impl<'de> DeserializeSeed<'de> for NamedContainer<'_> {
    type Value = Option<ContainerStatus>;

    fn deserialize<D: Deserializer<'de>>(self, de: D) -> Result<Self::Value, D::Error> {
        de.deserialize_any(self)
    }
}

impl<'de> Visitor<'de> for NamedContainer<'_> {
    type Value = Option<ContainerStatus>;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a list of container statuses")
    }

    fn visit_unit<E: de::Error>(self) -> Result<Self::Value, E> {
        Ok(None)
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Self::Value, A::Error> {
        let mut found = None;
        while let Some(status) = seq.next_element::<ContainerStatus>()? {
            if found.is_none() && status.name == self.0 {
                found = Some(status);
            }
        }
        Ok(found)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const POD: &str = r#"{"kind":"Pod","metadata":{"name":"op-1","resourceVersion":"42",
        "annotations":{"big":"xxxxxxxx"}},"spec":{"containers":[{"name":"manager"}]},
        "status":{"phase":"Running","containerStatuses":[
            {"name":"sidecar","restartCount":0,"state":{"running":{"startedAt":"2026-11-25T11:00:00Z"}}},
            {"name":"manager","restartCount":3,"lastState":{"terminated":{"reason":"OOMKilled","exitCode":137}}}]}}"#;

    #[test]
    fn only_the_named_container_is_kept() {
        let (pod, version) = pod(POD.as_bytes(), "manager").unwrap();
        assert_eq!(version, "42");
        let kept = pod.container.expect("the manager's status");
        assert_eq!((kept.name.as_str(), kept.restart_count), ("manager", 3));
        assert!(super::pod(POD.as_bytes(), "absent").unwrap().0.container.is_none());
        // A Pod with no status yet, or a null list.
        let bare = super::pod(br#"{"metadata":{"resourceVersion":"7"},"status":{"containerStatuses":null}}"#, "m");
        assert!(bare.unwrap().0.container.is_none());
    }

    #[test]
    fn a_list_gives_its_version_and_its_first_pod() {
        let json = format!(r#"{{"kind":"PodList","items":[{POD},{POD}],"metadata":{{"resourceVersion":"99"}}}}"#);
        let (pod, version) = list(json.as_bytes(), "manager").unwrap();
        assert_eq!(version, "99");
        assert_eq!(pod.and_then(|p| p.container).map(|c| c.restart_count), Some(3));
        let (none, version) = list(br#"{"metadata":{"resourceVersion":"5"},"items":[]}"#, "manager").unwrap();
        assert!(none.is_none() && version == "5");
    }

    #[test]
    fn watch_events_in_either_field_order() {
        let line = format!(r#"{{"type":"MODIFIED","object":{POD}}}"#);
        let Event::Changed(pod, version) = event(line.as_bytes(), "manager").unwrap() else { panic!("changed") };
        assert_eq!((pod.container.map(|c| c.restart_count), version.as_str()), (Some(3), "42"));
        let line = format!(r#"{{"object":{POD},"type":"DELETED"}}"#);
        assert!(matches!(event(line.as_bytes(), "manager").unwrap(), Event::Deleted(v) if v == "42"));
        let bookmark = br#"{"type":"BOOKMARK","object":{"kind":"Pod","metadata":{"resourceVersion":"77"}}}"#;
        assert!(matches!(event(bookmark, "manager").unwrap(), Event::Bookmark(v) if v == "77"));
        let gone = br#"{"type":"ERROR","object":{"kind":"Status","apiVersion":"v1","metadata":{},
            "status":"Failure","message":"too old resource version: 1 (5)","reason":"Expired","code":410}}"#;
        let Event::Error { code, message } = event(gone, "manager").unwrap() else { panic!("error") };
        assert_eq!((code, message.as_str()), (Some(410), "too old resource version: 1 (5)"));
        assert!(matches!(event(br#"{"type":"SOMETHING","object":{}}"#, "m").unwrap(), Event::Other));
    }

    #[test]
    fn what_is_not_a_pod_is_an_error() {
        for bad in [&b"[]"[..], b"{", br#"{"status":{"containerStatuses":[{"name":"m","restartCount":"x"}]}}"#] {
            assert!(pod(bad, "m").is_err(), "{}", String::from_utf8_lossy(bad));
        }
        assert!(event(br#"{"type":"ADDED","object":{}} trailing"#, "m").is_err());
    }
}
