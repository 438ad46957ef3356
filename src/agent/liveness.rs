//! The liveness window: how long `/healthz` waits for a tick before it
//! says the loop is stuck. It must outlast the longest tick a working
//! agent can have, or a slow but working API server makes kubelet restart
//! the pod.

use crate::signals::Signal;
use crate::sinks::Sinks;
use std::time::Duration;

/// The longest one tick can take for an agent with these signals and
/// sinks, whose status write (with the publisher lock's reads) takes at
/// most `status_write`.
pub(super) fn worst_tick(signals: &[Box<dyn Signal>], sinks: &Sinks, status_write: Duration) -> Duration {
    sum_of_worst(signals.iter().map(|s| s.worst_case()), sinks.worst_case(), status_write)
}

/// Every call timing out: each signal's and each sink's own worst case
/// (they know how many calls they make and how each is bounded) plus the
/// status write.
fn sum_of_worst(signals: impl IntoIterator<Item = Duration>, sinks: Duration, status_write: Duration) -> Duration {
    signals.into_iter().fold(sinks.saturating_add(status_write), Duration::saturating_add)
}

/// `/healthz` fails when no tick completed for this long: three heartbeat
/// intervals (the loop sleeps at most one between ticks) plus the worst
/// tick, so only a loop stuck beyond every bound fails it.
pub(super) fn window(interval: Duration, worst_tick: Duration) -> Duration {
    interval.saturating_mul(3).saturating_add(worst_tick)
}

#[cfg(test)]
mod tests {
    use super::*;

    const S: fn(u64) -> Duration = Duration::from_secs;

    #[test]
    fn one_kubernetes_call_is_bounded_by_four_sends() {
        // connect 3 + send 3 × 2 + response 5 + body 5, sent again after a
        // 401, each possibly again on a new connection when a kept one broke.
        assert_eq!(crate::kube::call_bound(), S(76));
        assert_eq!(crate::sinks::read_modify_write_bound(), S(456));
    }

    #[test]
    fn the_window_outlasts_the_sum_of_worst() {
        // The status write alone, as the publisher bounds it.
        let write =
            super::super::publisher::Publisher::new("me".into(), "me".into(), None, S(1), S(1), S(60)).worst_case();
        assert_eq!(sum_of_worst([], Duration::ZERO, write), write);
        assert_eq!(window(S(1), sum_of_worst([], Duration::ZERO, write)), S(3) + write, "1 s heartbeat: not 3 s");
        // Watches, probes and registration, an OperatorCondition sink.
        let tick = sum_of_worst([S(10), S(76), S(83)], S(228), write);
        assert_eq!(tick, S(10 + 76 + 83 + 228) + write);
        assert_eq!(window(S(60), tick), S(180) + tick);
        // Absurd inputs saturate instead of overflowing.
        assert_eq!(window(Duration::MAX, S(1)), Duration::MAX);
        assert_eq!(sum_of_worst([Duration::MAX, S(1)], S(1), S(1)), Duration::MAX);
    }

    /// The figures docs/probes-and-metrics.md gives for `/healthz` are the
    /// ones the code computes.
    #[test]
    fn the_documented_liveness_figures_are_the_codes() {
        let docs = include_str!("../../docs/probes-and-metrics.md");
        let row = docs.lines().find(|l| l.starts_with("| `GET /healthz` |")).expect("the /healthz row");
        let publisher = |lease: Option<&str>| {
            super::super::publisher::Publisher::new(
                "me".into(),
                "me".into(),
                lease.map(String::from),
                S(1),
                S(1),
                S(60),
            )
            .worst_case()
        };
        let write = publisher(None);
        let watch = crate::signals::watch::Watches::new(vec!["http://127.0.0.1:8081/healthz".into()], None, false);
        let registration = crate::kube::call_bound() * 2 + crate::pro::client::call_bound();
        let figures = [
            ("One Kubernetes call: ", crate::kube::call_bound()),
            ("The status write with the publisher lock: ", write),
            ("with `--follow-leader-lease`: ", publisher(Some("operator-lease"))),
            ("Each `--watch-url`: ", crate::signals::Signal::worst_case(&watch)),
            ("Registration: ", registration),
            ("Each sink: ", crate::sinks::read_modify_write_bound()),
            ("With `--interval 1s` and nothing else: ", window(S(1), sum_of_worst([], Duration::ZERO, write))),
        ];
        for (what, bound) in figures {
            let said = format!("{what}{} s", bound.as_secs());
            assert!(row.contains(&said), "docs/probes-and-metrics.md should say {said:?}: {row}");
        }
    }
}
