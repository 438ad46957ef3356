//! The operator's Pod as the API server sends it (a list's item, a watch
//! event's object), reduced to what the judgement reads: the named
//! container's status and the Pod's `resourceVersion`.
//!
//! Read from the answer as it arrives (`WatchStream::next_value` in
//! `kube/watch_stream.rs`): the rest of the Pod (its spec, annotations,
//! managed fields) is skipped without being copied; the containers'
//! statuses are parsed (their words cut as they are read, in
//! [`super::judge`]) and all but the named one dropped. An `ERROR`
//! event's object (a `Status`) is read by the same pass: its `code` and
//! `message`.

use super::judge::{ContainerStatus, Pod};
use serde::Deserialize;
use serde::de::{self, DeserializeSeed, Deserializer, MapAccess, Visitor};
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
        let RawEvent { kind, object } = RawEvent::deserialize(de)?;
        let version = object.metadata.resource_version;
        Ok(match kind {
            Kind::Added | Kind::Modified => Event::Changed(Box::new(named(object.status, self.0)), version),
            Kind::Deleted => Event::Deleted(version),
            Kind::Bookmark => Event::Bookmark(version),
            Kind::Error => Event::Error { code: object.code, message: object.message.unwrap_or_default() },
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
        let list = RawList::deserialize(de)?;
        let first = list.items.into_iter().flatten().next();
        Ok((first.map(|pod| named(pod.status, self.0)), list.metadata.resource_version))
    }
}

/// A Pod's JSON (a GET's answer): the named container and the version.
pub(crate) fn pod(json: &[u8], container: &str) -> serde_json::Result<(Pod, String)> {
    let object: Object = serde_json::from_slice(json)?;
    Ok((named(object.status, container), object.metadata.resource_version))
}

/// The Pod as the judgement reads it: the first status of the container
/// named `container`.
fn named(statuses: Vec<ContainerStatus>, container: &str) -> Pod {
    Pod { container: statuses.into_iter().find(|status| status.name == container) }
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
#[serde(default)]
struct RawEvent {
    #[serde(rename = "type")]
    kind: Kind,
    object: Object,
}

#[derive(Deserialize, Default)]
#[serde(default)]
struct RawList {
    metadata: Meta,
    items: Option<Vec<Object>>,
}

#[derive(Deserialize, Default)]
#[serde(default, rename_all = "camelCase")]
struct Meta {
    resource_version: String,
}

/// A Pod, or a `Status`: its version, its containers' statuses, and a
/// `Status`'s code and message.
#[derive(Deserialize, Default)]
#[serde(default)]
struct Object {
    metadata: Meta,
    #[serde(deserialize_with = "container_statuses")]
    status: Vec<ContainerStatus>,
    code: Option<u64>,
    message: Option<String>,
}

/// A Pod's `status.containerStatuses`; none for a `Status`'s `status`
/// (a string) or a Pod with no status yet.
fn container_statuses<'de, D: Deserializer<'de>>(de: D) -> Result<Vec<ContainerStatus>, D::Error> {
    struct PodStatus;

    impl<'de> Visitor<'de> for PodStatus {
        type Value = Vec<ContainerStatus>;

        fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
            f.write_str("a Pod status")
        }

        fn visit_unit<E: de::Error>(self) -> Result<Self::Value, E> {
            Ok(Vec::new())
        }

        fn visit_str<E: de::Error>(self, _: &str) -> Result<Self::Value, E> {
            Ok(Vec::new())
        }

        fn visit_map<A: MapAccess<'de>>(self, map: A) -> Result<Self::Value, A::Error> {
            #[derive(Deserialize)]
            #[serde(rename_all = "camelCase")]
            struct Status {
                container_statuses: Option<Vec<ContainerStatus>>,
            }
            let status = Status::deserialize(de::value::MapAccessDeserializer::new(map))?;
            Ok(status.container_statuses.unwrap_or_default())
        }
    }

    de.deserialize_any(PodStatus)
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
        let bad_status = br#"{"status":{"containerStatuses":[{"name":"m","restartCount":"x"}]}}"#;
        for bad in [&b"\"a Pod\""[..], b"[1]", b"{", b"{\"status\":7}", bad_status] {
            assert!(pod(bad, "m").is_err(), "{}", String::from_utf8_lossy(bad));
        }
        assert!(event(br#"{"type":"ADDED","object":{}} trailing"#, "m").is_err());
    }
}
