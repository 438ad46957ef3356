//! How the operator's container is doing, from its `containerStatuses`
//! entry in the sidecar's own Pod (pure: the Pod's status and the clock
//! come in as arguments).
//!
//! Kubelet's words are what is reported: a container waiting in
//! `CrashLoopBackOff` (or another waiting reason that means it cannot
//! start), and a container that restarted and has not yet run cleanly for
//! the clean-run window (`--watch-container-clean-run`, ten minutes by
//! default), with its last termination's reason (`OOMKilled`, `Error`),
//! exit code and message, and its restart count. A container that has
//! run that long since its last restart is well again, whatever its
//! restart count: the count never goes down, the judgement must.

use crate::util::time::parse_rfc3339;
use serde::Deserialize;
use std::time::{Duration, SystemTime};

/// How long a restarted container must run before it counts as well again,
/// unless `--watch-container-clean-run` says otherwise.
pub(crate) const DEFAULT_CLEAN_RUN: Duration = Duration::from_secs(600);

/// The longest text from kubelet (a reason or a message) kept.
const MAX_TEXT: usize = 256;

/// Waiting reasons that mean the container cannot start (not `ContainerCreating`
/// or `PodInitializing`, which are the normal way up).
const STUCK: [&str; 6] = [
    "CrashLoopBackOff",
    "ImagePullBackOff",
    "ErrImagePull",
    "CreateContainerConfigError",
    "CreateContainerError",
    "RunContainerError",
];

/// The part of a Pod the judgement reads: the named container's entry of
/// `status.containerStatuses`, `None` when the Pod lists no such container
/// ([`super::pod`] keeps only that one while it parses).
#[derive(Default)]
pub(crate) struct Pod {
    pub(super) container: Option<ContainerStatus>,
}

/// One entry of `status.containerStatuses`.
#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
pub(super) struct ContainerStatus {
    #[serde(default)]
    pub(super) name: String,
    #[serde(default)]
    pub(super) restart_count: u64,
    #[serde(default)]
    state: State,
    #[serde(default)]
    last_state: State,
}

#[derive(Deserialize, Default)]
struct State {
    waiting: Option<Detail>,
    running: Option<Running>,
    terminated: Option<Detail>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct Running {
    #[serde(default)]
    started_at: String,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct Detail {
    #[serde(default, deserialize_with = "text")]
    reason: String,
    #[serde(default, deserialize_with = "text")]
    message: String,
    exit_code: Option<i64>,
}

/// Kubelet's words, made safe to show and cut as they are read: the
/// statuses of a Pod's other containers, long termination messages and
/// all, are held only until the named one is found.
fn text<'de, D: serde::Deserializer<'de>>(de: D) -> Result<String, D::Error> {
    Ok(crate::util::text::sanitize(&String::deserialize(de)?, MAX_TEXT))
}

/// Why the container named `name` is not well, if it is not; `Ok(None)`
/// when it is, `Err` when the Pod does not list it (a wrong name, or not
/// started yet).
pub(crate) fn judge(pod: &Pod, name: &str, clean_run: Duration, now: SystemTime) -> Result<Option<String>, String> {
    let Some(c) = pod.container.as_ref().filter(|c| c.name == name) else {
        return Err(format!("the Pod lists no container {name:?} (yet)"));
    };
    let restarts = match c.restart_count {
        1 => "1 restart".to_string(),
        n => format!("{n} restarts"),
    };
    let last = c.last_state.terminated.as_ref().map(|t| {
        let code = t.exit_code.map(|c| format!(", exit code {c}")).unwrap_or_default();
        let message = if t.message.is_empty() { String::new() } else { format!(": {}", t.message) };
        format!("last terminated {}{code}{message}", t.reason)
    });
    if let Some(waiting) = c.state.waiting.as_ref().filter(|w| STUCK.contains(&w.reason.as_str())) {
        let message = if waiting.message.is_empty() { String::new() } else { format!(": {}", waiting.message) };
        let last = last.map(|l| format!("; {l}")).unwrap_or_default();
        return Ok(Some(format!("Container {name} is {}{message} ({restarts}{last})", waiting.reason)));
    }
    let Some(last) = last.filter(|_| c.restart_count > 0) else { return Ok(None) };
    // Running since its last restart: well once that is long enough ago.
    let since = c.state.running.as_ref().and_then(|r| parse_rfc3339(&r.started_at));
    if since.is_some_and(|started| now.duration_since(started).is_ok_and(|ran| ran >= clean_run)) {
        return Ok(None);
    }
    Ok(Some(format!(
        "Container {name} restarted ({restarts}; {last}) and has not run cleanly for {} since",
        crate::util::time::spoken(clean_run)
    )))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pod(json: &str, name: &str) -> Pod {
        super::super::pod::pod(json.as_bytes(), name).unwrap().0
    }

    fn at(rfc3339: &str) -> SystemTime {
        parse_rfc3339(rfc3339).unwrap()
    }

    const NOW: &str = "2026-11-25T12:00:00Z";

    #[test]
    fn a_crash_loop_is_said_in_kubelets_words() {
        let p = |name| {
            pod(
                r#"{"status":{"containerStatuses":[{"name":"sidecar","restartCount":0},
            {"name":"manager","restartCount":5,
             "state":{"waiting":{"reason":"CrashLoopBackOff","message":"back-off 5m0s restarting failed container"}},
             "lastState":{"terminated":{"reason":"Error","exitCode":1,"message":"panic: boom\u001b[2J"}}}]}}"#,
                name,
            )
        };
        let why = judge(&p("manager"), "manager", DEFAULT_CLEAN_RUN, at(NOW)).unwrap().unwrap();
        assert_eq!(
            why,
            "Container manager is CrashLoopBackOff: back-off 5m0s restarting failed container \
             (5 restarts; last terminated Error, exit code 1: panic: boom [2J)"
        );
        assert_eq!(judge(&p("sidecar"), "sidecar", DEFAULT_CLEAN_RUN, at(NOW)), Ok(None));
    }

    #[test]
    fn an_oom_kill_counts_until_the_container_has_run_cleanly_for_a_while() {
        let p = |started: &str| {
            pod(
                &format!(
                    r#"{{"status":{{"containerStatuses":[{{"name":"manager","restartCount":1,
                "state":{{"running":{{"startedAt":"{started}"}}}},
                "lastState":{{"terminated":{{"reason":"OOMKilled","exitCode":137}}}}}}]}}}}"#
                ),
                "manager",
            )
        };
        let why = judge(&p("2026-11-25T11:55:00Z"), "manager", DEFAULT_CLEAN_RUN, at(NOW)).unwrap().unwrap();
        assert_eq!(
            why,
            "Container manager restarted (1 restart; last terminated OOMKilled, exit code 137) and has not run \
             cleanly for 10 min since"
        );
        // A shorter window (`--watch-container-clean-run 30s`) says so and ends sooner.
        let thirty = Duration::from_secs(30);
        let why = judge(&p("2026-11-25T11:59:45Z"), "manager", thirty, at(NOW)).unwrap().unwrap();
        assert!(why.ends_with("has not run cleanly for 30 s since"), "{why}");
        assert_eq!(judge(&p("2026-11-25T11:59:30Z"), "manager", thirty, at(NOW)), Ok(None), "30 s up: well");
        assert_eq!(
            judge(&p("2026-11-25T11:50:00Z"), "manager", DEFAULT_CLEAN_RUN, at(NOW)),
            Ok(None),
            "ten minutes up: well"
        );
    }

    #[test]
    fn a_container_starting_up_or_never_restarted_is_well_and_a_missing_one_is_said() {
        let creating = |name| {
            pod(
                r#"{"status":{"containerStatuses":[{"name":"manager","restartCount":0,
            "state":{"waiting":{"reason":"ContainerCreating"}}}]}}"#,
                name,
            )
        };
        assert_eq!(judge(&creating("manager"), "manager", DEFAULT_CLEAN_RUN, at(NOW)), Ok(None));
        let err = judge(&creating("manger"), "manger", DEFAULT_CLEAN_RUN, at(NOW)).unwrap_err();
        assert_eq!(err, "the Pod lists no container \"manger\" (yet)");
        assert!(judge(&Pod::default(), "manager", DEFAULT_CLEAN_RUN, at(NOW)).is_err());
        let long = format!(
            r#"{{"status":{{"containerStatuses":[{{"name":"m","restartCount":2,
            "state":{{"waiting":{{"reason":"CrashLoopBackOff","message":"{}"}}}}}}]}}}}"#,
            "x".repeat(10_000)
        );
        assert!(judge(&pod(&long, "m"), "m", DEFAULT_CLEAN_RUN, at(NOW)).unwrap().unwrap().len() < 2 * MAX_TEXT);
    }
}
