//! Who else writes the status: the managers in the status ConfigMap's
//! `managedFields` that own its `status` key, and the rule by which
//! opstatus yields the ConfigMap to another writer instead of fighting it
//! (pure; the clock comes in as arguments).
//!
//! Server-side apply records, per field, which manager set it last. A
//! writer that replaces the whole object (kube9-operator's own status
//! writer: a GET, then a PUT of the whole ConfigMap every 60 s) takes the
//! `status` key over and drops opstatus's lock annotation with it;
//! opstatus's next write, carrying the `resourceVersion` it last saw, is a
//! 409. Writing back would start a tug of war that never ends and that
//! readers see as a status flipping between two authors. So: once a
//! holder finds its status replaced by another manager, it leaves the
//! ConfigMap alone (its other sinks go on) until the ConfigMap has not
//! changed for [`quiet_period`], then takes it back. (A status another
//! manager left once, before opstatus ran, is simply taken over.)

use serde::Deserialize;
use serde::de::IgnoredAny;
use std::borrow::Cow;
use std::time::{Duration, Instant};

/// The longest manager name kept from outside (a field manager is at most
/// 128 characters).
const MAX_MANAGER: usize = 128;

/// One `metadata.managedFields` entry, as far as the `status` key goes.
/// Read on every heartbeat's answer: the names are borrowed from it, and
/// copied only for another writer.
#[derive(Deserialize)]
pub(crate) struct ManagedEntry<'a> {
    #[serde(default, borrow)]
    manager: Cow<'a, str>,
    #[serde(default, borrow)]
    operation: Cow<'a, str>,
    #[serde(default, rename = "fieldsV1")]
    fields: Option<Fields>,
}

#[derive(Deserialize)]
struct Fields {
    #[serde(rename = "f:data")]
    data: Option<DataFields>,
}

#[derive(Deserialize)]
struct DataFields {
    #[serde(rename = "f:status")]
    status: Option<IgnoredAny>,
}

/// Another writer of the status key: its field manager (sanitised,
/// bounded) and how it writes (`Update`: a PUT or a non-apply PATCH;
/// `Apply`: server-side apply).
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Writer {
    pub manager: String,
    pub operation: String,
}

impl std::fmt::Display for Writer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{} ({})", self.manager, self.operation)
    }
}

/// The first manager other than `ours` that owns the `status` key.
pub(crate) fn foreign_writer(entries: &[ManagedEntry<'_>], ours: &[&str]) -> Option<Writer> {
    let owns_status =
        |e: &&ManagedEntry<'_>| e.fields.as_ref().and_then(|f| f.data.as_ref()).is_some_and(|d| d.status.is_some());
    let entry = entries.iter().filter(owns_status).find(|e| !ours.contains(&e.manager.as_ref()))?;
    let text = |s: &str| crate::util::text::sanitize(s, MAX_MANAGER);
    Some(Writer { manager: text(&entry.manager), operation: text(&entry.operation) })
}

/// How long the ConfigMap must stay unchanged before opstatus takes it
/// back from another writer: five of its own heartbeats (another writer
/// on a loop writes far more often than that), and never longer than
/// readers' patience, so that a writer that stopped is replaced before its
/// status goes stale.
pub(crate) fn quiet_period(interval: Duration) -> Duration {
    (interval * 5).min(crate::reader::STALE_AFTER - Duration::from_secs(10))
}

/// Whether to leave the ConfigMap to another writer, as seen on each read.
#[derive(Clone, Debug, Default)]
pub(crate) struct Yielding {
    /// The other writer and the version it left, with when that version
    /// was first seen here.
    to: Option<(Writer, String, Instant)>,
}

/// What a read of the ConfigMap means for the yield.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum Turn {
    /// Nobody else writes the status: the lock decides as usual.
    Ours,
    /// Another writer began writing the status: stop writing it.
    Yield(Writer),
    /// Still the other writer's (it wrote again, or not for long enough).
    StillTheirs,
    /// The other writer has been quiet for the quiet period: take it back.
    Resume(Writer, Duration),
}

impl Yielding {
    /// The other writer, while the ConfigMap is left to it.
    pub(crate) fn to(&self) -> Option<&Writer> {
        self.to.as_ref().map(|(w, _, _)| w)
    }

    /// A read of the ConfigMap at `now`: `foreign` is who else owns the
    /// status key (if anyone), `version` the ConfigMap's resourceVersion.
    pub(crate) fn observe(&mut self, foreign: Option<&Writer>, version: &str, now: Instant, quiet: Duration) -> Turn {
        match (&mut self.to, foreign) {
            (None, None) => Turn::Ours,
            (None, Some(writer)) => {
                self.to = Some((writer.clone(), version.to_string(), now));
                Turn::Yield(writer.clone())
            }
            // Someone took the status key back (another opstatus instance,
            // or the other writer gave it up): the lock decides again.
            (Some(_), None) => {
                self.to = None;
                Turn::Ours
            }
            (Some((writer, seen, since)), Some(foreign)) => {
                if seen != version || writer != foreign {
                    *writer = foreign.clone();
                    *seen = version.to_string();
                    *since = now;
                }
                let quiet_for = now.saturating_duration_since(*since);
                if quiet_for < quiet {
                    return Turn::StillTheirs;
                }
                let writer = writer.clone();
                self.to = None;
                Turn::Resume(writer, quiet_for)
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const OURS: [&str; 2] = ["opstatus", "opstatus-init"];
    const S: fn(u64) -> Duration = Duration::from_secs;

    fn entries(json: &str) -> Vec<ManagedEntry<'_>> {
        serde_json::from_str(json).unwrap()
    }

    fn writer(manager: &str) -> Writer {
        Writer { manager: manager.into(), operation: "Update".into() }
    }

    #[test]
    fn the_status_keys_other_manager_is_found_sanitised_and_ours_are_not() {
        let ours_only = entries(
            r#"[{"manager":"opstatus-init","operation":"Apply","fieldsV1":{"f:metadata":{"f:labels":{}}}},
                {"manager":"opstatus","operation":"Apply","fieldsV1":{"f:data":{"f:status":{}},"f:metadata":{}}}]"#,
        );
        assert_eq!(foreign_writer(&ours_only, &OURS), None);
        let replaced = entries(
            r#"[{"manager":"helm","operation":"Update","fieldsV1":{"f:data":{"f:other":{}}}},
                {"manager":"kube9-operator\u001b[2J","operation":"Update","time":"2026-11-25T10:00:00Z",
                 "fieldsV1":{"f:data":{".":{},"f:status":{}}}}]"#,
        );
        let found = foreign_writer(&replaced, &OURS).expect("the writer of the status key");
        assert_eq!(found.manager, "kube9-operator [2J", "sanitised");
        assert_eq!(found.to_string(), "kube9-operator [2J (Update)");
        let long = format!(r#"[{{"manager":"{}","fieldsV1":{{"f:data":{{"f:status":{{}}}}}}}}]"#, "m".repeat(5000));
        assert!(foreign_writer(&entries(&long), &OURS).unwrap().manager.len() <= MAX_MANAGER);
        assert_eq!(foreign_writer(&entries(r#"[{"manager":"x"}]"#), &OURS), None, "no fields: owns nothing");
    }

    #[test]
    fn the_quiet_period_is_five_heartbeats_within_readers_patience() {
        assert_eq!(quiet_period(S(2)), S(10));
        assert_eq!(quiet_period(S(60)), S(290));
        assert!(quiet_period(S(240)) < crate::reader::STALE_AFTER);
    }

    #[test]
    fn opstatus_yields_to_another_writer_until_it_has_been_quiet() {
        let t0 = Instant::now();
        let quiet = S(10);
        let mut y = Yielding::default();
        assert_eq!(y.observe(None, "1", t0, quiet), Turn::Ours);
        let k9 = writer("kube9-operator");
        assert_eq!(y.observe(Some(&k9), "2", t0, quiet), Turn::Yield(k9.clone()));
        assert_eq!(y.to(), Some(&k9));
        assert_eq!(y.observe(Some(&k9), "2", t0 + S(9), quiet), Turn::StillTheirs);
        // It writes again: the quiet period starts over.
        assert_eq!(y.observe(Some(&k9), "3", t0 + S(9), quiet), Turn::StillTheirs);
        assert_eq!(y.observe(Some(&k9), "3", t0 + S(18), quiet), Turn::StillTheirs);
        assert_eq!(y.observe(Some(&k9), "3", t0 + S(19), quiet), Turn::Resume(k9.clone(), S(10)));
        assert_eq!(y.to(), None);
        // Taken back by someone else (another opstatus instance): ours again.
        assert_eq!(y.observe(Some(&k9), "4", t0 + S(20), quiet), Turn::Yield(k9));
        assert_eq!(y.observe(None, "5", t0 + S(21), quiet), Turn::Ours);
    }
}
