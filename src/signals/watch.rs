//! The operator's own health as a signal: HTTP endpoints it serves (its
//! `/healthz` in the same pod) and a heartbeat file it touches.
//!
//! Checked on every check tick ([`Signal`]), every watch on every check.
//! The first failing watch is the reason; a failing watch makes the status
//! `degraded` (`unhealthy` when the watches are critical) and the
//! ClusterOperator `Available=False`. An error status fails at once; a URL
//! that answers nothing within its second, or refuses the connection right
//! after passing, is judged over its recent checks ([`Lateness`]).
//! [`file_problem`] is the pure part of the file rule.

use super::own_pod::OwnPod;
use super::{Observation, OperatorAnswer, Signal};
use crate::kube::Client;
use crate::status::{Problem, Rule};
use crate::util::http::{self, Timeouts};
use crate::util::reported::Reported;
use std::path::PathBuf;
use std::time::{Duration, Instant, SystemTime};

/// A watched URL must answer within this; it is on the same pod, so a slow
/// answer is itself a symptom.
const URL_TIMEOUT: Duration = Duration::from_secs(1);

/// The largest body read (and discarded) from a watched URL.
const URL_BODY_LIMIT: u64 = 64 * 1024;

pub(crate) struct Watches {
    /// Per URL: its agent (through its proxy, if any) with the connections
    /// it opened, and its recent late answers and verdict.
    urls: Vec<(String, (ureq::Agent, http::Opened), Lateness)>,
    file: Option<(PathBuf, Duration)>,
    /// A failing watch makes the status `unhealthy` instead of `degraded`.
    critical: bool,
    /// The last check got no answer in time from a URL: not an answer,
    /// whether or not it fails the URL yet.
    pending: bool,
    /// This instance's Pod, read when a refusal may be the pod being
    /// deleted; `None` without `POD_NAME`.
    own_pod: Option<OwnPod>,
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
    /// The connection refused or reset: nothing serves the port (the
    /// operator's process exited, or is starting again).
    Gone(String),
    /// An error status, or an answer that is no HTTP.
    Failed(String),
}

/// How many of a URL's most recent checks the lateness rule looks at.
const WINDOW: u32 = 6;

/// A URL missed on this many of its last [`WINDOW`] checks fails: half of
/// them, an operator that misses every other check.
const LATE_IN_WINDOW: u32 = 3;

// The window is kept as the bits of a `u8`.
const _: () = assert!(WINDOW <= u8::BITS && LATE_IN_WINDOW <= WINDOW);

/// One URL's missed checks, check after check, and its verdict.
///
/// A single late answer is what a busy node gives a healthy process now and
/// then (a CPU-starved moment while kubelet starts containers): kubelet's
/// own probes, with the same 1 s timeout, wait for three failures in a row.
/// So a late answer is no answer: it neither makes nor clears a failure,
/// and the URL keeps its last verdict (an `HTTP 500` stays until an answer
/// in time). It fails the URL when the check before was missed too (the
/// operator is hung or starved for longer than a check interval), or when
/// [`LATE_IN_WINDOW`] of the last [`WINDOW`] checks were missed (an
/// operator half hung, answering in time only now and then). A URL failing
/// for lateness passes again once fewer of its last checks were missed:
/// after a hang, on its fourth answer in time in a row.
///
/// A refused or reset connection right after a passing answer is missed
/// the same way, and for the same reason kubelet waits for a second
/// failure: when a pod is deleted, kubelet sends the operator its SIGTERM
/// and runs opstatus's preStop hook at the same time, unordered, so the
/// operator's port may refuse a check a moment before the hook tells
/// opstatus the pod is stopping (a native sidecar is stopped only once the
/// operator has exited). It keeps the URL passing for that one check, so
/// the hook has a check interval to arrive; on the next check the URL
/// fails with the refusal's own reason unless it answered in time. A
/// refusal at any other time (after a miss, a failure, or before the
/// first answer: an operator still starting) fails at once, and so counts
/// as an answer, as an error status does: only a refusal taken as no
/// answer counts towards the window's share of missed checks.
#[derive(Clone, Debug, Default, PartialEq)]
pub(crate) struct Lateness {
    /// Bit `i` set: the check `i` checks ago got no answer (late, or a
    /// refusal right after a passing answer; bit 0 is the last check);
    /// [`WINDOW`] bits.
    missed: u8,
    /// Of those, the refusals.
    refused: u8,
    /// The last check was answered in time and passed the URL.
    passed_last: bool,
    verdict: Verdict,
}

#[derive(Clone, Debug, Default, PartialEq)]
enum Verdict {
    #[default]
    Passing,
    Failing(String),
    /// Late on this check, and the one before missed.
    LateInARow,
    /// Missed on [`LATE_IN_WINDOW`] or more of the last [`WINDOW`] checks;
    /// `refused`: some of them were refusals when the episode began.
    OftenMissed {
        refused: bool,
    },
}

impl Lateness {
    /// Whether the last check was a refusal taken as no answer (right
    /// after a passing one).
    pub(crate) fn refused_last(&self) -> bool {
        self.refused & 1 == 1
    }

    /// This check's answer judged with the URL's recent checks: why the URL
    /// fails, if it does.
    pub(crate) fn judge(&mut self, answer: Answer) -> Option<String> {
        // A refusal right after a passing answer is taken as no answer.
        let taken_as_missed = match answer {
            Answer::Late => true,
            Answer::Gone(_) => self.passed_last,
            Answer::Passed | Answer::Failed(_) => false,
        };
        let refusal = taken_as_missed && matches!(answer, Answer::Gone(_));
        let missed_before = self.missed & 1 == 1;
        let window = (1u8 << WINDOW) - 1;
        self.missed = ((self.missed << 1) | u8::from(taken_as_missed)) & window;
        self.refused = ((self.refused << 1) | u8::from(refusal)) & window;
        self.passed_last = matches!(answer, Answer::Passed);
        let often_missed = self.missed.count_ones() >= LATE_IN_WINDOW;
        let failing_for_lateness = matches!(self.verdict, Verdict::LateInARow | Verdict::OftenMissed { .. });
        let often = Verdict::OftenMissed { refused: self.refused & self.missed != 0 };
        match answer {
            Answer::Failed(why) => self.verdict = Verdict::Failing(why),
            // After a miss, a failure or before any answer: the operator
            // is down, or has not come up yet.
            Answer::Gone(why) if !taken_as_missed => self.verdict = Verdict::Failing(why),
            // One episode of lateness is one reason, one status.
            Answer::Late | Answer::Gone(_) if failing_for_lateness => {}
            Answer::Late if missed_before => self.verdict = Verdict::LateInARow,
            Answer::Late | Answer::Gone(_) if often_missed => self.verdict = often,
            // No answer: the last verdict stands.
            Answer::Late | Answer::Gone(_) => {}
            Answer::Passed if often_missed && matches!(self.verdict, Verdict::OftenMissed { .. }) => {}
            Answer::Passed if often_missed => self.verdict = often,
            Answer::Passed => self.verdict = Verdict::Passing,
        }
        match &self.verdict {
            Verdict::Passing => None,
            Verdict::Failing(why) => Some(why.clone()),
            Verdict::LateInARow => Some(format!("no answer within {}s", URL_TIMEOUT.as_secs())),
            Verdict::OftenMissed { refused: false } => Some(format!(
                "no answer within {}s on {LATE_IN_WINDOW} or more of the last {WINDOW} checks",
                URL_TIMEOUT.as_secs()
            )),
            Verdict::OftenMissed { refused: true } => Some(format!(
                "no answer within {}s, or the connection refused or reset, on {LATE_IN_WINDOW} or more of the last {WINDOW} \
                 checks",
                URL_TIMEOUT.as_secs()
            )),
        }
    }
}

impl Watches {
    pub(crate) fn new(urls: Vec<String>, file: Option<(PathBuf, Duration)>, critical: bool) -> Watches {
        let urls = urls.into_iter().map(|url| (url.clone(), url_agent(&url), Lateness::default()));
        let (pending, answered, problem) = (false, false, Reported::default());
        Watches { urls: urls.collect(), file, critical, pending, own_pod: None, answered, problem }
    }

    /// Reads this Pod (`namespace`/`name`) when a URL refuses right after
    /// passing: a pod being deleted hands its status over at once, as at
    /// kubelet's preStop hook ([`OwnPod`]).
    pub(crate) fn own_pod(mut self, namespace: String, name: String) -> Watches {
        self.own_pod = Some(OwnPod::new(namespace, name));
        self
    }

    pub(crate) fn is_empty(&self) -> bool {
        self.urls.is_empty() && self.file.is_none()
    }

    /// Checks every watch, each URL on every check (a URL skipped would be
    /// judged later against checks long past); the first failure's reason,
    /// or `None` when all are well.
    pub(crate) fn check(&mut self, now: SystemTime) -> Option<String> {
        self.pending = false;
        let mut first_failure = None;
        for (url, agent, late) in &mut self.urls {
            let answer = url_answer(agent, url);
            // Late, or refused: no answer yet, unless it fails the URL
            // (then the failure is what the check says).
            self.pending |= matches!(answer, Answer::Late | Answer::Gone(_));
            if let Some(why) = late.judge(answer) {
                // Userinfo is refused at start; shown redacted all the same.
                let shown = crate::util::url::redacted(url);
                first_failure.get_or_insert_with(|| format!("Operator health check {shown} failed: {why}"));
            }
        }
        if first_failure.is_some() {
            return first_failure;
        }
        let (path, max_age) = self.file.as_ref()?;
        let modified = std::fs::metadata(path).and_then(|m| m.modified()).ok();
        file_problem(&path.display().to_string(), modified, now, *max_age)
    }
}

/// The agent that checks `url`: plain `http://` (`check_url`), through
/// `HTTP_PROXY` unless the host is loopback or `NO_PROXY` names it (both
/// read as `check_url` did); a host name looked up within the connect time.
fn url_agent(url: &str) -> (ureq::Agent, http::Opened) {
    let t = URL_TIMEOUT;
    let config = http::agent_config(Timeouts { connect: t, send: t, response: t, body: t })
        .proxy(crate::util::proxy::from_env(url).ok().flatten());
    let uri = url.parse::<ureq::http::Uri>().ok();
    let host = uri.as_ref().and_then(|u| u.host()).unwrap_or_default().trim_matches(['[', ']']);
    let config = match host.parse::<std::net::IpAddr>() {
        Ok(_) => config,
        Err(_) => config.timeout_resolve(Some(t)),
    };
    http::agent(config.build(), None)
}

fn url_answer((agent, opened): &(ureq::Agent, http::Opened), url: &str) -> Answer {
    let before = opened.count();
    let answer = match agent.get(url).call() {
        // The endpoint closed the kept connection as the check went out
        // (servers that keep idle connections for a few seconds, as
        // gunicorn's 2 s): not the operator's failure; once more, on a
        // new connection.
        Err(e) if http::closed_before_answer(&e, before, opened.count()) => agent.get(url).call(),
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
            Answer::Gone("connection refused".into())
        }
        // The operator's process went away under the check (its own close
        // under a kept connection was sent again above).
        Err(ureq::Error::Io(e)) if gone(e.kind()) => {
            Answer::Gone(crate::util::text::sanitize(&e.to_string(), crate::util::text::MAX_FOREIGN))
        }
        Err(ureq::Error::Timeout(_)) => Answer::Late,
        // May quote what the endpoint sent (a bad header, a bad status line).
        Err(e) => Answer::Failed(crate::util::text::sanitize(&e.to_string(), crate::util::text::MAX_FOREIGN)),
    }
}

/// A connection the operator's side closed under the check.
fn gone(kind: std::io::ErrorKind) -> bool {
    use std::io::ErrorKind::{BrokenPipe, ConnectionAborted, ConnectionReset, NotConnected, UnexpectedEof};
    matches!(kind, ConnectionReset | ConnectionAborted | BrokenPipe | UnexpectedEof | NotConnected)
}

impl Signal for Watches {
    fn when_standing_by(&self) -> bool {
        true
    }

    fn observe(&mut self, client: &mut Client, now: Instant, into: &mut Observation) {
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
        // A URL refused right after passing on this check ([`Lateness`]
        // holds its verdict for it): is the pod being deleted?
        let refused_after_pass = self.urls.iter().any(|(_, _, late)| late.refused_last());
        let pod_deleted = refused_after_pass && self.own_pod.as_mut().is_some_and(|pod| pod.deleted(client, now));
        into.operator = Some(match self.problem.get() {
            Some(why) => {
                let health = if self.critical { Problem::unhealthy } else { Problem::degraded };
                into.problems.push(health(Rule::Operator, why));
                OperatorAnswer::Down(why.to_string())
            }
            None if pod_deleted => OperatorAnswer::PodDeleted,
            None if self.pending => OperatorAnswer::Pending,
            None => OperatorAnswer::Answered,
        });
    }

    /// Every URL is checked on every check: each is one GET, each phase
    /// (a host name's lookup too) bounded by `URL_TIMEOUT`, after at most
    /// one attempt on a kept connection that turned out closed (its send
    /// and the wait for an answer); the heartbeat file is a `stat`; after a
    /// refusal, one read of the Pod.
    fn worst_case(&self) -> Duration {
        let one = Timeouts { connect: URL_TIMEOUT, send: URL_TIMEOUT, response: URL_TIMEOUT, body: URL_TIMEOUT };
        let closed_under_it = one.send * 2 + one.response;
        let one = Timeouts { connect: URL_TIMEOUT + one.connect, ..one };
        let pod = if self.own_pod.is_some() { crate::kube::call_bound() } else { Duration::ZERO };
        (one.bound() + closed_under_it).saturating_mul(self.urls.len() as u32) + pod
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
    crate::util::proxy::from_env(url)?;
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

    const HUNG: &str = "no answer within 1s";
    const OFTEN_LATE: &str = "no answer within 1s on 3 or more of the last 6 checks";

    const OFTEN_MISSED: &str =
        "no answer within 1s, or the connection refused or reset, on 3 or more of the last 6 checks";

    /// The verdicts of a URL answering `answers` in turn: `.` in time, `L`
    /// late, `F` failed (HTTP 500), `R` refused; `-` for passing, `h` hung
    /// (late twice in a row), `o` often late, `m` often missed (some of the
    /// misses refusals), `F` and `R` failing with the answer's own reason.
    fn verdicts(answers: &str) -> String {
        let mut url = Lateness::default();
        let verdict = |why: Option<String>| match why.as_deref() {
            None => '-',
            Some(HUNG) => 'h',
            Some(OFTEN_LATE) => 'o',
            Some(OFTEN_MISSED) => 'm',
            Some("HTTP 500") => 'F',
            Some("connection refused") => 'R',
            Some(other) => panic!("unexpected reason {other:?}"),
        };
        answers
            .chars()
            .map(|c| match c {
                '.' => Answer::Passed,
                'L' => Answer::Late,
                'F' => Answer::Failed("HTTP 500".into()),
                'R' => Answer::Gone("connection refused".into()),
                _ => panic!("no answer {c:?}"),
            })
            .map(|answer| verdict(url.judge(answer)))
            .collect()
    }

    #[test]
    fn one_late_answer_flips_nothing_and_two_in_a_row_fail() {
        assert_eq!(verdicts("L"), "-", "a first late answer");
        assert_eq!(verdicts("..L..L..L..L"), "------------", "now and then, on a busy node");
        assert_eq!(verdicts("..LL"), "---h", "late on two checks in a row");
        assert_eq!(verdicts("..LLLLLL"), "---hhhhh", "and on every check after");
    }

    #[test]
    fn a_late_answer_keeps_the_last_verdict() {
        assert_eq!(verdicts("FL"), "FF", "a late answer after a failure is no recovery");
        assert_eq!(verdicts("..FLLL"), "--FFhh", "failing, then hung: the hang is the reason");
        assert_eq!(verdicts("FL."), "FF-", "an answer in time clears the failure");
        assert_eq!(verdicts(".L"), "--", "a late answer after a pass is no failure");
        assert_eq!(verdicts(".F.F"), "-F-F", "a failure fails at once, each time");
    }

    #[test]
    fn an_operator_late_on_half_of_its_recent_checks_fails_until_it_answers_steadily() {
        // Every other check late: the third late answer in six checks fails
        // it, and it stays failing (one reason, one status) while it goes on.
        assert_eq!(verdicts(".L.L.L.L.L.L"), "-----ooooooo");
        // Two late answers in six checks flip nothing, three do.
        assert_eq!(verdicts("L..L..L..L.."), "------------");
        assert_eq!(verdicts("L..L.L"), "-----o", "three in six checks");
        assert_eq!(verdicts("L...L.L"), "-------", "three in seven");
        // After a hang it passes again on the fourth answer in time in a
        // row, once fewer than three of the last six checks were late.
        assert_eq!(verdicts("LLLLLL....."), "-hhhhhooo--");
        // Hung after a half hang: still one episode, one reason.
        assert_eq!(verdicts(".L.L.LLL"), "-----ooo");
    }

    #[test]
    fn a_refusal_right_after_a_pass_is_judged_at_the_next_check_and_any_other_fails_at_once() {
        // The operator's port refuses a check as it exits with its pod
        // (before the preStop hook reached opstatus): nothing yet.
        assert_eq!(verdicts("..R"), "---", "one refusal after a pass keeps the URL passing");
        assert_eq!(verdicts("..R."), "----", "answered again: nothing happened");
        assert_eq!(verdicts("..RR"), "---R", "refused on the next check too: down, with the refusal's reason");
        assert_eq!(verdicts("..RRRR"), "---RRR", "and on every check after");
        assert_eq!(verdicts("..RR."), "---R-", "back at its first answer in time");
        assert_eq!(verdicts("..RF"), "---F", "an error status after it fails");
        assert_eq!(verdicts("..RL"), "---h", "late after it: two checks in a row without an answer");
        // Not after anything but a pass.
        assert_eq!(verdicts("R"), "R", "before the first answer (the start-up allowance judges that)");
        assert_eq!(verdicts("RR."), "RR-");
        assert_eq!(verdicts(".FR"), "-FR", "after an error status: still down");
        assert_eq!(verdicts(".LR"), "--R", "after a late answer: the second check in a row without an answer");
        assert_eq!(verdicts(".LLR"), "--hR", "after a hang: down");
    }

    /// Which checks were a refusal right after a pass: the ones on which
    /// the agent reads its own Pod.
    #[test]
    fn only_a_refusal_right_after_a_pass_asks_whether_the_pod_is_being_deleted() {
        let asked = |answers: &str| -> String {
            let mut url = Lateness::default();
            answers
                .chars()
                .map(|c| {
                    let answer = match c {
                        '.' => Answer::Passed,
                        'L' => Answer::Late,
                        'F' => Answer::Failed("HTTP 500".into()),
                        _ => Answer::Gone("connection refused".into()),
                    };
                    url.judge(answer);
                    if url.refused_last() { '?' } else { '-' }
                })
                .collect()
        };
        assert_eq!(asked("..RRR"), "--?--", "once, at the first refusal after a pass");
        assert_eq!(asked("R.R.R"), "--?-?", "never before the first answer");
        assert_eq!(asked(".LR.FR"), "------", "not after a miss or a failure");
    }

    #[test]
    fn refusals_count_among_the_recent_checks_missed() {
        // Refused every other check: each refusal follows a pass, and the
        // third in six checks fails the URL, one episode while it goes on.
        assert_eq!(verdicts(".R.R.R.R.R"), "-----mmmmm");
        assert_eq!(verdicts(".L.R.L"), "-----m", "late and refused, three in six checks");
        assert_eq!(verdicts(".L.L.L"), "-----o", "late only: the reason says so");
        // A refusal that failed the URL is an answer (the operator is
        // down), as an error status is: an operator back from a restart is
        // shown well at its first answer in time.
        assert_eq!(verdicts(".RRRRR."), "--RRRR-");
        // A URL failing for lateness keeps its reason through a refusal
        // after a pass, and fails with the refusal's reason on a second.
        assert_eq!(verdicts(".L.L.L.R"), "-----ooo");
        assert_eq!(verdicts(".L.L.L.RR"), "-----oooR");
    }

    #[test]
    fn a_refusal_after_a_pass_is_no_answer_yet_and_one_before_any_pass_fails() {
        // Before its first answer the operator is not answering: the
        // check is no pass (the start-up allowance waits for one), and a
        // refusal after a pass is no answer either.
        let refused = refusing();
        let mut watches = Watches::new(vec![refused], None, false);
        assert!(watches.check(SystemTime::now()).is_some(), "refused before any answer: failing");
        watches.urls[0].2 = Lateness { passed_last: true, ..Lateness::default() };
        assert_eq!(watches.check(SystemTime::now()), None, "refused after a pass: not failing yet");
        assert!(watches.pending, "and not answered either");
        assert!(watches.check(SystemTime::now()).is_some(), "refused again: failing");
    }

    /// A URL where nothing listens: every check is refused at once.
    fn refusing() -> String {
        let port = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
        format!("http://127.0.0.1:{port}/healthz")
    }

    /// A URL whose connections the kernel accepts and nobody answers; it
    /// stops with the listener.
    fn never_answering() -> (std::net::TcpListener, String) {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let url = format!("http://{}/healthz", listener.local_addr().unwrap());
        (listener, url)
    }

    #[test]
    fn every_url_is_checked_on_every_check_each_given_its_whole_second() {
        let refused = refusing();
        let (_listener, hung) = never_answering();
        let mut watches = Watches::new(vec![refused.clone(), hung], None, false);
        for check in 0..2 {
            let started = Instant::now();
            let why = watches.check(SystemTime::now());
            let took = started.elapsed();
            let first = format!("Operator health check {refused} failed: connection refused");
            assert_eq!(why, Some(first), "check {check}: the first failure is the reason");
            assert!(watches.pending, "check {check}: the URL after the failing one was checked, and got no answer");
            // Real time, bounded as a busy machine meets it: the deadline
            // is never early (its clock starts before the request leaves),
            // and the check stays within the bound liveness allows for it.
            assert!(took >= URL_TIMEOUT, "check {check}: the silent URL was given up after {took:?}");
            assert!(took <= watches.worst_case(), "check {check} took {took:?}");
        }
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
