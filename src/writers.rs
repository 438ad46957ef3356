//! Who else writes the status: the managers in the status ConfigMap's
//! `managedFields` that own its `status` key, and the rule by which
//! opstatus yields the ConfigMap to another writer instead of fighting it
//! (pure; the clock comes in as arguments).
//!
//! Server-side apply records, per field, which manager set it last, and
//! each manager's entry carries the API server's `time` of its last write.
//! A writer that replaces the whole object (kube9-operator's own status
//! writer: a GET, then a PUT of the whole ConfigMap every 60 s) takes the
//! `status` key over and drops opstatus's lock annotation with it. Writing
//! back would start a tug of war that never ends and that readers see as
//! a status flipping between two authors. So the rule is read from the
//! object itself, the same for every instance that looks (the holder, a
//! standby, one restarted a second ago): while another manager owns the
//! `status` key and wrote it within the [`quiet_period`], nobody of
//! opstatus writes the ConfigMap; once it has not written the key for that
//! long, or a little before the status it left would be stale to readers
//! (its own `lastUpdate` plus [`crate::reader::STALE_AFTER`]), opstatus
//! takes it back and the publisher lock decides who writes. Only the
//! `status` key's owner and time count: a controller that stamps a label
//! or an annotation under a manager of its own changes neither. (A status
//! another manager left long ago, before opstatus ran, is simply taken
//! over.)

use serde::Deserialize;
use serde::de::IgnoredAny;
use std::borrow::Cow;
use std::time::{Duration, SystemTime};

/// The longest manager name kept from outside (a field manager is at most
/// 128 characters).
const MAX_MANAGER: usize = 128;

/// How much sooner than readers' patience a status another writer left is
/// taken back, beyond a check interval: time for the write itself and for
/// clocks a few seconds apart.
const BEFORE_STALE: Duration = Duration::from_secs(10);

/// One `metadata.managedFields` entry, as far as the `status` key goes.
/// Read on every read of the ConfigMap: the names are borrowed from it,
/// and copied only for another writer.
#[derive(Deserialize)]
pub(crate) struct ManagedEntry<'a> {
    #[serde(default, borrow)]
    manager: Cow<'a, str>,
    #[serde(default, borrow)]
    operation: Cow<'a, str>,
    /// When this manager last wrote (the API server's clock, seconds).
    #[serde(default, borrow)]
    time: Option<Cow<'a, str>>,
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

/// The one field of the status document the rule reads.
#[derive(Deserialize)]
struct Stamped<'a> {
    #[serde(default, rename = "lastUpdate", borrow)]
    last_update: Option<Cow<'a, str>>,
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

/// Another writer of the status key as a read of the ConfigMap saw it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Foreign {
    pub writer: Writer,
    /// The `time` of its `managedFields` entry. On some API servers
    /// (v1.20) it moves only when the manager takes fields over from
    /// another, not on each of its writes (on v1.36 it does).
    pub written: Option<SystemTime>,
    /// The `lastUpdate` of the status it left: readers count its age from
    /// it, and a writer on a loop stamps it on every write.
    pub last_update: Option<SystemTime>,
    /// A digest of the status's text, to see it change between reads.
    pub text: u64,
}

/// The manager other than `ours` that owns the `status` key (the latest
/// to write it, if several do), with when it wrote; its status's
/// `lastUpdate` and digest are for the caller to fill in ([`last_update`],
/// [`digest`]).
pub(crate) fn foreign_writer(entries: &[ManagedEntry<'_>], ours: &[&str]) -> Option<Foreign> {
    let owns_status =
        |e: &&ManagedEntry<'_>| e.fields.as_ref().and_then(|f| f.data.as_ref()).is_some_and(|d| d.status.is_some());
    let written = |e: &ManagedEntry<'_>| e.time.as_deref().and_then(crate::util::time::parse_rfc3339);
    let entry = entries
        .iter()
        .filter(owns_status)
        .filter(|e| !ours.contains(&e.manager.as_ref()))
        .max_by_key(|e| written(e))?;
    let text = |s: &str| crate::util::text::sanitize(s, MAX_MANAGER);
    Some(Foreign {
        writer: Writer { manager: text(&entry.manager), operation: text(&entry.operation) },
        written: written(entry),
        last_update: None,
        text: 0,
    })
}

/// The digest [`Foreign::text`] holds of a status's text.
pub(crate) fn digest(text: &str) -> u64 {
    use std::hash::{Hash, Hasher};
    let mut hasher = std::hash::DefaultHasher::new();
    text.hash(&mut hasher);
    hasher.finish()
}

/// The `lastUpdate` of a status document's text, when it has a valid one.
pub(crate) fn last_update(status: &str) -> Option<SystemTime> {
    let stamped: Stamped<'_> = serde_json::from_str(status).ok()?;
    crate::util::time::parse_rfc3339(stamped.last_update.as_deref()?)
}

/// How long another writer must leave the status key alone before
/// opstatus takes it back: five of opstatus's own heartbeats (a writer on
/// a loop writes far more often than that), never longer than readers'
/// patience.
pub(crate) fn quiet_period(interval: Duration) -> Duration {
    (interval * 5).min(crate::reader::STALE_AFTER - BEFORE_STALE)
}

/// The clock-free part of the rule, fixed by the intervals: how long the
/// other writer must be quiet, how long before staleness the status is
/// taken back, and how often a yielding instance looks.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Patience {
    pub quiet: Duration,
    /// How long before the other writer's status turns stale it is taken
    /// back: a check interval (the look that notices may come that late)
    /// and [`BEFORE_STALE`].
    pub margin: Duration,
    /// A yielding instance reads the ConfigMap once per heartbeat, and at
    /// the moment the status is due back.
    pub look_every: Duration,
}

impl Patience {
    pub(crate) fn new(interval: Duration, check_interval: Duration) -> Patience {
        Patience { quiet: quiet_period(interval), margin: check_interval + BEFORE_STALE, look_every: interval }
    }

    /// When the status `foreign` left is opstatus's again, read at `now`:
    /// `quiet` after its writer's last write, and in any case `margin`
    /// before readers would call it stale. The last write is the latest of
    /// the `time` of the writer's `managedFields` entry and the status's
    /// own `lastUpdate` (each not believed past `now`, and not at all when
    /// it is more than `quiet` ahead of it: [`Self::believed`]) and
    /// `changed`, when this instance saw the status's text change: all but
    /// the last are read from the object, the same for every instance.
    /// `None` when nothing says when it wrote: nothing shows it is still
    /// writing.
    pub(crate) fn take_back_at(
        &self,
        foreign: &Foreign,
        changed: Option<SystemTime>,
        now: SystemTime,
    ) -> Option<SystemTime> {
        let quiet_over = self.last_write(foreign, changed, now)? + self.quiet;
        let patience = crate::reader::STALE_AFTER.saturating_sub(self.margin);
        Some(self.believed(foreign.last_update, now).map_or(quiet_over, |at| quiet_over.min(at + patience)))
    }

    /// The other writer's last write as far as anything tells it
    /// ([`Self::take_back_at`]): never later than `now`, so no clock ahead
    /// of this one (the API server's, the writer's) stretches a yield past
    /// `quiet` from the read.
    pub(crate) fn last_write(
        &self,
        foreign: &Foreign,
        changed: Option<SystemTime>,
        now: SystemTime,
    ) -> Option<SystemTime> {
        let written = self.believed(foreign.written, now);
        let stamped = self.believed(foreign.last_update, now);
        [written, stamped].into_iter().flatten().map(|at| at.min(now)).chain(changed).max()
    }

    /// A time read from the object (a `managedFields` `time`, a
    /// `lastUpdate`), unless it is more than `quiet` ahead of `now`: a
    /// clock that far ahead, or a time someone made up
    /// (`2099-01-01T00:00:00Z`), says nothing about when the writer wrote.
    fn believed(&self, at: Option<SystemTime>, now: SystemTime) -> Option<SystemTime> {
        at.filter(|&at| at <= now + self.quiet)
    }
}

/// Whether the ConfigMap is left to another writer, as this instance last
/// saw it: for its log lines, `/status` and `/metrics`, and when to look
/// again. What it decides comes from the object ([`Patience::take_back_at`]).
#[derive(Clone, Debug, Default)]
pub(crate) struct Yielding {
    /// The other writer and when the status is due back.
    to: Option<(Writer, SystemTime)>,
    /// When the ConfigMap was last read.
    looked: Option<SystemTime>,
    /// The other writer's status text as last read (its digest), and when
    /// this instance saw it change (not when it first saw it).
    text: Option<(u64, Option<SystemTime>)>,
    /// Another writer whose status is taken back at once (its status is
    /// stale to readers): how often it was seen and when last. Seen again
    /// after being written over, it is there, writing: said once per
    /// episode ([`Turn::Overwrite`]).
    over: Option<Overwritten>,
    /// When a read last showed nobody else owning the status key, or a
    /// write of opstatus's went through.
    gone: Option<SystemTime>,
}

/// Another writer written over, as this instance saw it.
#[derive(Clone, Debug, PartialEq, Eq)]
struct Overwritten {
    writer: Writer,
    seen: u32,
    last: SystemTime,
}

/// What a read of the ConfigMap means for the yield.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum Turn {
    /// Nobody else writes the status, or another manager left it long ago:
    /// the lock decides as usual.
    Ours,
    /// Another writer writes the status: leave it alone until the time
    /// given (news to this instance).
    Yield(Writer, SystemTime),
    /// Still the other writer's (perhaps another manager now), until the
    /// time given.
    StillTheirs(Writer, SystemTime),
    /// The other writer has been quiet long enough (since its last write,
    /// when known), or its status would soon be stale: take it back.
    Resume(Writer, Option<SystemTime>),
    /// Another writer keeps writing the status key, but what it writes is
    /// stale to readers (why given): opstatus writes over it, and says so
    /// (news to this instance, once per episode).
    Overwrite(Writer, String),
}

impl Yielding {
    /// The other writer, while the ConfigMap is left to it (the
    /// publisher's state says it at run time: `Turn` tells each change).
    #[cfg(test)]
    pub(crate) fn to(&self) -> Option<&Writer> {
        self.to.as_ref().map(|(w, _)| w)
    }

    /// The other writer opstatus writes over, while the episode lasts.
    pub(crate) fn overwriting(&self, patience: &Patience) -> Option<&Writer> {
        self.episode(patience).filter(|o| o.seen >= 2).map(|o| &o.writer)
    }

    /// The other writer last written over, until a read or a write of
    /// opstatus's shows it gone a quiet period after it was last seen:
    /// reads that failed meanwhile (an API server too slow to answer) do
    /// not end the episode.
    fn episode(&self, patience: &Patience) -> Option<&Overwritten> {
        self.over.as_ref().filter(|o| self.gone.is_none_or(|gone| gone < o.last + patience.quiet))
    }

    /// `foreign` owns the status key but its status is opstatus's to take
    /// back at once: the first sighting may be a status left long ago (taken
    /// over without a word); seen again after opstatus wrote over it, it is
    /// a writer at work: news, once per [`Self::episode`].
    fn over(&mut self, foreign: &Foreign, now: SystemTime, patience: &Patience) -> Turn {
        let same = self.episode(patience).filter(|o| o.writer == foreign.writer);
        let seen = same.map_or(1, |o| o.seen.saturating_add(1));
        self.over = Some(Overwritten { writer: foreign.writer.clone(), seen, last: now });
        if seen != 2 {
            return Turn::Ours;
        }
        let why = match foreign.last_update {
            Some(at) => format!(
                "the status it writes says lastUpdate {}, stale to readers",
                crate::util::time::format_rfc3339(at)
            ),
            None => "the status it writes has no lastUpdate, stale to readers".to_string(),
        };
        Turn::Overwrite(foreign.writer.clone(), why)
    }

    /// Whether a yielding instance should read the ConfigMap at `now`: once
    /// per `look_every`, and as soon as the status is due back. Always,
    /// when it does not yield.
    pub(crate) fn due(&self, now: SystemTime, patience: &Patience) -> bool {
        let (Some((_, until)), Some(looked)) = (&self.to, self.looked) else { return true };
        now >= (looked + patience.look_every).min(*until)
    }

    /// A write of opstatus's went through at `now`: against the version it
    /// read, so nobody else wrote the status since (as a read showing
    /// nobody else would say).
    pub(crate) fn wrote(&mut self, now: SystemTime) {
        self.gone = Some(now);
    }

    /// A read of the ConfigMap at `now`: `foreign` is who else owns the
    /// status key, if anyone.
    pub(crate) fn observe(&mut self, foreign: Option<&Foreign>, now: SystemTime, patience: &Patience) -> Turn {
        self.looked = Some(now);
        let changed = match (foreign, &mut self.text) {
            (None, text) => {
                *text = None;
                self.gone = Some(now);
                None
            }
            (Some(f), Some((digest, changed))) if *digest != f.text => {
                (*digest, *changed) = (f.text, Some(now));
                *changed
            }
            (Some(_), Some((_, changed))) => *changed,
            (Some(f), text @ None) => {
                *text = Some((f.text, None));
                None
            }
        };
        let theirs =
            foreign.and_then(|f| Some((f, patience.take_back_at(f, changed, now)?))).filter(|(_, until)| now < *until);
        match (self.to.take(), theirs) {
            (None, None) => foreign.map_or(Turn::Ours, |f| self.over(f, now, patience)),
            (was, Some((f, until))) => {
                self.to = Some((f.writer.clone(), until));
                let turn = if was.is_none() { Turn::Yield } else { Turn::StillTheirs };
                turn(f.writer.clone(), until)
            }
            // Someone else took the status key back (another opstatus
            // instance): nothing to say.
            (Some(_), None) if foreign.is_none() => Turn::Ours,
            (Some((writer, _)), None) => {
                let last_write = foreign.and_then(|f| patience.last_write(f, changed, now));
                Turn::Resume(writer, last_write)
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::reader::STALE_AFTER;

    const OURS: [&str; 2] = ["opstatus", "opstatus-init"];
    const S: fn(u64) -> Duration = Duration::from_secs;
    /// The defaults: a heartbeat every 60 s, a check every 5 s.
    const DEFAULTS: (Duration, Duration) = (Duration::from_secs(60), Duration::from_secs(5));

    fn entries(json: &str) -> Vec<ManagedEntry<'_>> {
        serde_json::from_str(json).unwrap()
    }

    /// Seconds from an arbitrary origin, negative before it.
    fn at(secs: i64) -> SystemTime {
        let origin = SystemTime::UNIX_EPOCH + S(1_800_000_000);
        if secs >= 0 { origin + S(secs as u64) } else { origin - S(secs.unsigned_abs()) }
    }

    fn kube9(written: i64, last_update: i64) -> Foreign {
        let writer = Writer { manager: "kube9-operator".into(), operation: "Update".into() };
        // The text changes with every write: it holds the lastUpdate.
        Foreign { writer, written: Some(at(written)), last_update: Some(at(last_update)), text: last_update as u64 }
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
        assert_eq!(found.writer.manager, "kube9-operator [2J", "sanitised");
        assert_eq!(found.writer.to_string(), "kube9-operator [2J (Update)");
        let time = crate::util::time::parse_rfc3339;
        assert_eq!(found.written, time("2026-11-25T10:00:00Z"));
        let status = r#"{"mode":"operated","lastUpdate":"2026-11-25T09:59:58Z"}"#;
        assert_eq!(last_update(status), time("2026-11-25T09:59:58Z"));
        assert_eq!((last_update("not json"), last_update(r#"{"lastUpdate":"yesterday"}"#)), (None, None));
        let long = format!(r#"[{{"manager":"{}","fieldsV1":{{"f:data":{{"f:status":{{}}}}}}}}]"#, "m".repeat(5000));
        assert!(foreign_writer(&entries(&long), &OURS).unwrap().writer.manager.len() <= MAX_MANAGER);
        assert_eq!(foreign_writer(&entries(r#"[{"manager":"x"}]"#), &OURS), None, "no fields: owns nothing");
    }

    #[test]
    fn a_label_or_annotation_stamped_since_leaves_the_status_writers_time_as_it_was() {
        // A controller stamps an annotation after kube9-operator's last
        // write: its entry is newer, but it owns no status.
        let stamped = entries(
            r#"[{"manager":"kube9-operator","operation":"Update","time":"2026-11-25T10:00:00Z",
                 "fieldsV1":{"f:data":{"f:status":{}}}},
                {"manager":"stamper","operation":"Update","time":"2026-11-25T10:04:00Z",
                 "fieldsV1":{"f:metadata":{"f:annotations":{"f:example.com/seen":{}}}}}]"#,
        );
        let found = foreign_writer(&stamped, &OURS).unwrap();
        assert_eq!(found.writer.manager, "kube9-operator");
        assert_eq!(found.written, crate::util::time::parse_rfc3339("2026-11-25T10:00:00Z"));
    }

    /// One instance through time: it looks every `check` seconds from
    /// `from` up to `to`, reads the ConfigMap when [`Yielding::due`], and
    /// `world` says who else owns the status key then. Every look's turn,
    /// up to the one that takes the status back (it writes then).
    fn drive(
        y: &mut Yielding,
        p: &Patience,
        (from, to, check): (i64, i64, i64),
        world: impl Fn(i64) -> Option<Foreign>,
    ) -> Vec<(i64, Turn)> {
        let mut turns = Vec::new();
        let mut t = from;
        while t <= to {
            if y.due(at(t), p) {
                let turn = y.observe(world(t).as_ref(), at(t), p);
                let back = matches!(turn, Turn::Resume(..));
                turns.push((t, turn));
                if back {
                    break;
                }
            }
            t += check;
        }
        turns
    }

    fn taken_back(turns: &[(i64, Turn)]) -> Option<i64> {
        turns.iter().find(|(_, turn)| matches!(turn, Turn::Resume(..))).map(|(t, _)| *t)
    }

    #[test]
    fn an_edit_that_keeps_an_old_last_update_is_taken_back_before_readers_call_it_stale() {
        // The 60 s default: opstatus wrote at -6 s; at 0 an admin's `kubectl
        // edit` changes the status and keeps its lastUpdate; the holder's
        // next heartbeat (at 54 s) is refused and reads it.
        let p = Patience::new(DEFAULTS.0, DEFAULTS.1);
        let mut y = Yielding::default();
        let turns = drive(&mut y, &p, (54, 600, 5), |_| Some(kube9(0, -6)));
        assert!(matches!(turns[0], (54, Turn::Yield(_, _))), "{turns:?}");
        let back = taken_back(&turns).expect("taken back");
        // Readers count from the lastUpdate the edit kept: the status is
        // back (written at `back`) before it is 300 s old, with room for
        // the write itself.
        let age_when_back = S((back + 6) as u64);
        assert!(age_when_back + BEFORE_STALE <= STALE_AFTER, "taken back at {back} s: {age_when_back:?} old");
        assert!(age_when_back + S(20) >= STALE_AFTER, "taken back at {back} s: no sooner than needed");
        // Reads while yielding: once a heartbeat, and once when due back.
        assert!(turns.len() <= 2 + (back - 54) as usize / 60, "{turns:?}");
        assert_eq!(y.to(), None);
    }

    #[test]
    fn a_writer_on_a_loop_keeps_the_status_until_it_stops_then_it_is_back_after_the_quiet_period() {
        // Another writer writes every 5 s with a fresh lastUpdate, from 0
        // to 600 s; opstatus (2 s heartbeats, 1 s checks, a 10 s quiet
        // period) meets it at 1 s.
        let p = Patience::new(S(2), S(1));
        let last_write = |t: i64| t.min(600) / 5 * 5;
        let mut y = Yielding::default();
        let turns = drive(&mut y, &p, (1, 700, 1), |t| Some(kube9(last_write(t), last_write(t))));
        assert!(matches!(turns[0], (1, Turn::Yield(_, _))), "{turns:?}");
        let back = taken_back(&turns).expect("taken back once it stopped");
        assert!(turns.iter().filter(|(t, _)| *t < back).all(|(_, turn)| !matches!(turn, Turn::Resume(..))));
        // Every write of the other writer restarts the quiet period, so
        // the status is back only after its last write (600 s) plus the
        // quiet period, within a look.
        assert!((610..=612).contains(&back), "taken back at {back} s: {turns:?}");

        // At the 60 s default a writer every 60 s is never taken over.
        let p = Patience::new(DEFAULTS.0, DEFAULTS.1);
        let mut y = Yielding::default();
        let turns = drive(&mut y, &p, (30, 3600, 5), |t| Some(kube9(t / 60 * 60, t / 60 * 60)));
        assert_eq!(taken_back(&turns), None, "{turns:?}");
        assert!(turns.len() <= 61, "one read per heartbeat while yielding: {}", turns.len());
    }

    #[test]
    fn a_writer_of_a_stale_status_is_written_over_and_said_once_per_episode() {
        // A writer replaces the whole ConfigMap every 3 s with a status an
        // hour old; the holder (2 s heartbeats, a 10 s quiet period) reads
        // it after each refused write.
        let p = Patience::new(S(2), S(1));
        let stale = Foreign { written: None, ..kube9(-3600, -3600) };
        let mut y = Yielding::default();
        let turns: Vec<Turn> = (0..10).map(|n| y.observe(Some(&stale), at(n * 3), &p)).collect();
        assert_eq!(turns[0], Turn::Ours, "a status left long ago is simply taken over");
        let Turn::Overwrite(writer, why) = &turns[1] else { panic!("seen again, not said: {turns:?}") };
        assert_eq!(writer.manager, "kube9-operator");
        assert!(why.contains("lastUpdate 2027-01-15T07:00:00Z, stale to readers"), "{why}");
        assert!(turns[2..].iter().all(|t| *t == Turn::Ours), "said once: {turns:?}");
        assert_eq!(y.overwriting(&p).map(|w| w.manager.as_str()), Some("kube9-operator"));
        // Unseen since 27 s, but no read at 37 s shows it gone: still
        // overwriting. A read showing it gone a quiet period after its last
        // sighting ends the episode; back, it is news again.
        assert!(y.overwriting(&p).is_some());
        assert_eq!(y.observe(None, at(38), &p), Turn::Ours);
        assert_eq!(y.overwriting(&p), None);
        assert_eq!(y.observe(Some(&stale), at(40), &p), Turn::Ours);
        assert!(matches!(y.observe(Some(&stale), at(43), &p), Turn::Overwrite(..)));
        // Reads that fail for longer than a quiet period (an API server too
        // slow to answer) do not end the episode: only a read showing the
        // writer gone does.
        let mut y = Yielding::default();
        for n in [0, 3] {
            y.observe(Some(&stale), at(n), &p);
        }
        y.observe(None, at(5), &p);
        assert!(y.overwriting(&p).is_some(), "no read for 17 s (its last sighting at 3 s): still overwriting");
        assert_eq!(y.observe(Some(&stale), at(22), &p), Turn::Ours, "no read in 17 s, still the same episode");
        y.observe(None, at(23), &p);
        assert_eq!(y.observe(Some(&stale), at(40), &p), Turn::Ours, "gone 1 s after its last sighting: not over");
        y.observe(None, at(51), &p);
        assert_eq!(y.observe(Some(&stale), at(52), &p), Turn::Ours, "gone a quiet period after: a new episode");
        assert!(matches!(y.observe(Some(&stale), at(55), &p), Turn::Overwrite(..)));
        // A status without a lastUpdate is stale to readers too.
        let undated = Foreign { written: None, last_update: None, ..stale };
        let mut y = Yielding::default();
        y.observe(Some(&undated), at(0), &p);
        let Turn::Overwrite(_, why) = y.observe(Some(&undated), at(3), &p) else { panic!("not said") };
        assert_eq!(why, "the status it writes has no lastUpdate, stale to readers");
    }

    #[test]
    fn every_instance_reads_the_same_rule_from_the_object_so_a_restarted_one_yields_too() {
        let p = Patience::new(DEFAULTS.0, DEFAULTS.1);
        let k9 = kube9(0, 0);
        // A fresh instance (a restart, a new pod of a rolling update).
        assert!(
            matches!(Yielding::default().observe(Some(&k9), at(100), &p), Turn::Yield(_, until) if until == at(285))
        );
        // The quiet period over (or the status about to be stale): a fresh
        // instance simply takes the status over; so does one for a status
        // written before opstatus ever ran.
        assert_eq!(Yielding::default().observe(Some(&k9), at(285), &p), Turn::Ours);
        assert_eq!(Yielding::default().observe(Some(&kube9(-3600, -3600)), at(0), &p), Turn::Ours);
        // Without a date nothing shows the writer is active.
        let undated = Foreign { written: None, last_update: None, ..k9.clone() };
        assert_eq!(Yielding::default().observe(Some(&undated), at(1), &p), Turn::Ours);
        // A lastUpdate far in the future does not keep opstatus off past
        // the quiet period.
        assert_eq!(p.take_back_at(&kube9(0, 86_400), None, at(1)), Some(at(290)));
        // Nor does a managedFields time far in the future with no
        // lastUpdate (readers call such a status stale at once): it says
        // nothing of when the writer wrote.
        let made_up = Foreign { written: Some(at(86_400 * 365 * 70)), last_update: None, ..k9.clone() };
        assert_eq!(p.take_back_at(&made_up, None, at(1)), None);
        assert_eq!(Yielding::default().observe(Some(&made_up), at(1), &p), Turn::Ours);
        // Another opstatus instance took the status back: ours, nothing to say.
        let mut y = Yielding::default();
        assert!(matches!(y.observe(Some(&k9), at(1), &p), Turn::Yield(..)));
        assert_eq!(y.observe(None, at(2), &p), Turn::Ours);
        assert_eq!(y.to(), None);
    }

    #[test]
    fn where_the_api_server_dates_only_a_takeover_the_stamp_or_the_text_shows_the_writer_still_writes() {
        // v1.20 moves a manager's managedFields time only when it takes a
        // field over (its first write, at 0), not on its later writes.
        let p = Patience::new(S(2), S(1));
        // Its status stamps lastUpdate on every write (every 3 s, up to
        // 60 s): a fresh instance reads that from the object.
        let stamped = |t: i64| kube9(0, t.min(60) / 3 * 3);
        let turns = drive(&mut Yielding::default(), &p, (1, 120, 1), |t| Some(stamped(t)));
        // Back 10 s after its last write, within the look that sees it.
        let back = taken_back(&turns).expect("taken back");
        assert!((70..=72).contains(&back), "taken back at {back} s, last stamped at 60 s: {turns:?}");
        // A writer that stamps nothing (an admin editing the text again
        // and again): the text changing, as this instance reads it.
        let edited = |t: i64| Foreign { last_update: None, text: (t.min(60) / 3) as u64, ..kube9(0, 0) };
        let turns = drive(&mut Yielding::default(), &p, (1, 120, 1), |t| Some(edited(t)));
        let back = taken_back(&turns).expect("taken back");
        assert!((70..=72).contains(&back), "taken back at {back} s, the text last changed at 60 s: {turns:?}");
        // A text that changes under another manager every time it is read
        // never waits past the quiet period for want of being seen again.
        let mut y = Yielding::default();
        assert!(matches!(y.observe(Some(&edited(1)), at(1), &p), Turn::Yield(_, until) if until == at(10)));
    }

    /// An API server whose clock runs 5 s ahead dates one write at 5 s
    /// that happened at 0: the yield ends `quiet` (10 s) after that time,
    /// stretched by no more than the skew.
    #[test]
    fn a_managed_fields_time_ahead_of_this_clock_stretches_the_yield_by_the_skew_at_most() {
        let p = Patience::new(S(2), S(1));
        let ahead = Foreign { last_update: None, ..kube9(5, 0) };
        let turns = drive(&mut Yielding::default(), &p, (1, 120, 1), |_| Some(ahead.clone()));
        assert!(matches!(turns[0], (1, Turn::Yield(_, until)) if until == at(11)), "{turns:?}");
        assert_eq!(taken_back(&turns), Some(15), "{turns:?}");
        // Never past this instance's clock, as the lastUpdate is not.
        assert_eq!(p.last_write(&ahead, None, at(1)), Some(at(1)));
    }
}
