//! The operator's own health as a signal: HTTP endpoints it serves (its
//! `/healthz` in the same pod) and a heartbeat file it touches.
//!
//! Checked on every check tick ([`Signal`]). The first failing watch is the
//! reason; a failing watch makes the status `degraded` (`unhealthy` when
//! the watches are critical) and the ClusterOperator `Available=False`.
//! A URL that answers nothing within its second fails only when it did the
//! same on the check before ([`Lateness`]); a refusal, a reset or an error
//! status fails at once. [`file_problem`] is the pure part of the file rule.

use super::{Observation, OperatorAnswer, Signal};
use crate::kube::Client;
use crate::status::{Problem, Rule};
use crate::util::http::{self, Timeouts};
use crate::util::reported::Reported;
use crate::util::transport;
use std::path::PathBuf;
use std::time::{Duration, Instant, SystemTime};

/// A watched URL must answer within this; it is on the same pod, so a slow
/// answer is itself a symptom.
const URL_TIMEOUT: Duration = Duration::from_secs(1);

/// The largest body read (and discarded) from a watched URL.
const URL_BODY_LIMIT: u64 = 64 * 1024;

pub(crate) struct Watches {
    urls: Vec<String>,
    file: Option<(PathBuf, Duration)>,
    /// A failing watch makes the status `unhealthy` instead of `degraded`.
    critical: bool,
    agent: ureq::Agent,
    /// Per URL: whether its last check got no answer in time.
    late: Vec<Lateness>,
    /// The last check got no answer in time from a URL, the first time:
    /// not a failure yet, not an answer either.
    pending: bool,
    /// The checks have passed once since opstatus started.
    answered: bool,
    problem: Reported,
}

/// What one check of a URL found.
#[derive(Debug)]
pub(crate) enum Answer {
    Passed,
    /// No answer within [`URL_TIMEOUT`].
    Late,
    Failed(String),
}

/// One URL's timeouts, check after check. A single late answer is what a
/// busy node gives a healthy process now and then (a CPU-starved moment
/// while kubelet starts containers): kubelet's own probes, with the same
/// 1 s timeout, wait for three failures in a row. A second late answer in
/// a row is a failure: the operator is hung or starved for longer than a
/// check interval.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub(crate) struct Lateness {
    last_was_late: bool,
}

impl Lateness {
    /// Why this check fails, if it does: a failure at once, no answer in
    /// time only when the check before got none either.
    pub(crate) fn judge(&mut self, answer: Answer) -> Option<String> {
        let late = matches!(answer, Answer::Late);
        let late_twice = late && self.last_was_late;
        self.last_was_late = late;
        match answer {
            Answer::Passed => None,
            Answer::Late => late_twice.then(|| format!("no answer within {}s", URL_TIMEOUT.as_secs())),
            Answer::Failed(why) => Some(why),
        }
    }
}

impl Watches {
    pub(crate) fn new(urls: Vec<String>, file: Option<(PathBuf, Duration)>, critical: bool) -> Watches {
        let config = http::agent_config(Timeouts {
            connect: URL_TIMEOUT,
            send: URL_TIMEOUT,
            response: URL_TIMEOUT,
            body: URL_TIMEOUT,
        })
        // Checked every few seconds: keeping the connection saves a
        // connection per check and costs the operator nothing.
        .max_idle_connections(urls.len().max(1))
        .build();
        // Plain http:// only (`check_url`): opstatus's transport without TLS,
        // so ureq's own TCP and TLS stack is not linked at all.
        let agent = transport::agent(config, None);
        let late = vec![Lateness::default(); urls.len()];
        Watches { urls, file, critical, agent, late, pending: false, answered: false, problem: Reported::default() }
    }

    pub(crate) fn is_empty(&self) -> bool {
        self.urls.is_empty() && self.file.is_none()
    }

    /// Checks every watch; the first failure's reason, or `None` when all
    /// are well.
    pub(crate) fn check(&mut self, now: SystemTime) -> Option<String> {
        self.pending = false;
        for (url, late) in self.urls.iter().zip(&mut self.late) {
            let answer = url_answer(&self.agent, url);
            self.pending |= matches!(answer, Answer::Late);
            if let Some(why) = late.judge(answer) {
                // Userinfo is refused at start; shown redacted all the same.
                return Some(format!("Operator health check {} failed: {why}", crate::util::url::redacted(url)));
            }
        }
        let (path, max_age) = self.file.as_ref()?;
        let modified = std::fs::metadata(path).and_then(|m| m.modified()).ok();
        file_problem(&path.display().to_string(), modified, now, *max_age)
    }
}

fn url_answer(agent: &ureq::Agent, url: &str) -> Answer {
    let answer = match agent.get(url).call() {
        // The endpoint closed the kept connection as the check went out
        // (servers that keep idle connections for a few seconds, as
        // gunicorn's 2 s): not the operator's failure; once more, on a
        // new connection.
        Err(e) if transport::unsent(&e) => agent.get(url).call(),
        answer => answer,
    };
    match answer {
        Ok(mut response) => {
            // Drain so the kept-alive connection can be reused.
            let _ = response.body_mut().with_config().limit(URL_BODY_LIMIT).read_to_vec();
            let status = response.status();
            if status.is_success() { Answer::Passed } else { Answer::Failed(format!("HTTP {}", status.as_u16())) }
        }
        Err(ureq::Error::Io(e)) if e.kind() == std::io::ErrorKind::ConnectionRefused => {
            Answer::Failed("connection refused".into())
        }
        Err(ureq::Error::Timeout(_)) => Answer::Late,
        // May quote what the endpoint sent (a bad header, a bad status line).
        Err(e) => Answer::Failed(crate::util::text::sanitize(&e.to_string(), crate::util::text::MAX_FOREIGN)),
    }
}

impl Signal for Watches {
    fn when_standing_by(&self) -> bool {
        true
    }

    fn observe(&mut self, _: &mut Client, _: Instant, into: &mut Observation) {
        if self.is_empty() {
            return;
        }
        let problem = self.check(SystemTime::now());
        // Before its first answer the operator is starting: not a warning,
        // and its first pass is no recovery.
        let (level, passing) = match self.answered {
            true => (log::Level::Warn, "The operator's health checks pass again"),
            false => (log::Level::Info, "The operator's health checks pass"),
        };
        self.problem.update(problem, level, passing);
        self.answered |= self.problem.get().is_none() && !self.pending;
        into.operator = Some(match self.problem.get() {
            Some(why) => {
                let health = if self.critical { Problem::unhealthy } else { Problem::degraded };
                into.problems.push(health(Rule::Operator, why));
                OperatorAnswer::Down(why.to_string())
            }
            None if self.pending => OperatorAnswer::Pending,
            None => OperatorAnswer::Answered,
        });
    }

    /// Each URL is one GET, each phase bounded by `URL_TIMEOUT`, after at
    /// most one attempt on a kept connection that turned out closed (its
    /// send and the wait for an answer); the heartbeat file is a `stat`.
    fn worst_case(&self) -> Duration {
        let one = Timeouts { connect: URL_TIMEOUT, send: URL_TIMEOUT, response: URL_TIMEOUT, body: URL_TIMEOUT };
        let closed_under_it = one.send * 2 + one.response;
        (one.bound() + closed_under_it).saturating_mul(self.urls.len() as u32)
    }
}

/// The heartbeat-file rule: missing, or not modified within `max_age`.
///
/// The reason names the file's modification time, not its age: a reason is
/// published, and one that changed on every check (the age grows) would be
/// a new status each time, a write and a log line per check while nothing
/// but the clock moves. Stale since a given time is one status.
pub(crate) fn file_problem(
    shown: &str,
    modified: Option<SystemTime>,
    now: SystemTime,
    max_age: Duration,
) -> Option<String> {
    let Some(modified) = modified else {
        return Some(format!("Operator heartbeat file {shown} is missing"));
    };
    let age = now.duration_since(modified).unwrap_or(Duration::ZERO);
    (age > max_age).then(|| {
        let at = crate::util::time::format_rfc3339(modified);
        format!("Operator heartbeat file {shown} was last touched at {at}, over {}s ago", max_age.as_secs())
    })
}

/// Checks that a watch URL is one opstatus will fetch: plain `http://`, for
/// an endpoint in the same pod.
pub(crate) fn check_url(url: &str) -> Result<(), String> {
    let rest =
        url.strip_prefix("http://").ok_or("must start with http:// (the operator's probe endpoint in the same pod)")?;
    let host = rest.split(['/', '?']).next().unwrap_or_default();
    if host.is_empty() {
        return Err("has no host".into());
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(secs: u64) -> SystemTime {
        SystemTime::UNIX_EPOCH + Duration::from_secs(secs)
    }

    #[test]
    fn heartbeat_file_rules() {
        let max = Duration::from_secs(60);
        assert_eq!(file_problem("/hb", None, at(100), max), Some("Operator heartbeat file /hb is missing".into()));
        assert_eq!(file_problem("/hb", Some(at(100)), at(160), max), None);
        assert_eq!(file_problem("/hb", Some(at(200)), at(100), max), None, "future mtime is fresh");
        let stale = Some("Operator heartbeat file /hb was last touched at 1970-01-01T00:01:40Z, over 60s ago".into());
        assert_eq!(file_problem("/hb", Some(at(100)), at(161), max), stale);
        // Only the clock moved: the same reason, so no new status to write.
        assert_eq!(file_problem("/hb", Some(at(100)), at(3600), max), stale);
    }

    #[test]
    fn one_late_answer_is_asked_again_two_in_a_row_fail_other_failures_fail_at_once() {
        let mut url = Lateness::default();
        let late = "no answer within 1s".to_string();
        assert_eq!(url.judge(Answer::Late), None, "a first late answer");
        assert_eq!(url.judge(Answer::Late), Some(late.clone()), "late on two checks in a row");
        assert_eq!(url.judge(Answer::Late), Some(late.clone()), "and on every check after");
        assert_eq!(url.judge(Answer::Passed), None);
        assert_eq!(url.judge(Answer::Late), None, "an answer in between starts again");
        assert_eq!(url.judge(Answer::Failed("connection refused".into())), Some("connection refused".into()));
        assert_eq!(url.judge(Answer::Late), None, "a refusal is not a late answer");
        assert_eq!(url.judge(Answer::Failed("HTTP 500".into())), Some("HTTP 500".into()), "at once, late or not");
        assert_eq!(url.judge(Answer::Passed), None);
    }

    #[test]
    fn watch_urls_must_be_plain_http_with_a_host() {
        assert!(check_url("http://127.0.0.1:8081/healthz").is_ok());
        assert!(check_url("http://localhost:8081").is_ok());
        assert!(check_url("https://127.0.0.1:8443/healthz").unwrap_err().contains("http://"));
        assert_eq!(check_url("http:///healthz"), Err("has no host".into()));
        assert!(check_url("127.0.0.1:8081").is_err());
    }
}
