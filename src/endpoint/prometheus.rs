//! Prometheus metrics, rendered in the text exposition format 0.0.4.
//!
//! Names from the kube9 spec (`kube9_operator_*`) plus opstatus's own
//! (`opstatus_*`). Every label value comes from a small fixed set (modes,
//! health values, error kinds), so the series count is bounded whatever
//! happens at run time; the per-condition series' `group`, `kind` and
//! `type` come from the probes and the cluster, bounded by the number of
//! probed types and `--condition-metrics-max-types`, and escaped. Fixed-size
//! arrays, no allocation when counting.

use crate::signals::probes::census::{ResourceConditions, STATUSES};
use crate::sinks::SyncCounts;
use crate::sinks::events::EventCounts;
use crate::status::{Health, Mode};
use std::fmt::Write;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

/// Upper bounds (seconds) of the write-latency histogram buckets.
pub(crate) const LATENCY_BUCKETS: [f64; 10] = [0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0];

/// The error kinds `KubeError::kind` can return, in output order.
pub(crate) const ERROR_TYPES: [&str; 10] = [
    "transport",
    "response",
    "unauthorized",
    "forbidden",
    "not_found",
    "conflict",
    "invalid",
    "throttled",
    "server_error",
    "client_error",
];

const MODES: [Mode; 2] = [Mode::Operated, Mode::Enabled];

#[derive(Clone, Debug, Default)]
pub(crate) struct Metrics {
    /// Syncs of each sink other than the status ConfigMap, in order; set by
    /// the agent on every tick. Empty: none configured, nothing rendered.
    pub sinks: Vec<(&'static str, SyncCounts)>,
    /// Whether this instance publishes (holds the publisher lock).
    pub publishing: bool,
    /// Whether it leaves the status ConfigMap to another writer now.
    pub yielded: bool,
    /// How often it began to.
    pub foreign_writer_yields: u64,
    /// Episodes of another writer writing a stale status that this
    /// instance wrote over.
    pub foreign_writer_overwrites: u64,
    /// The last complete probe evaluation: resources evaluated, blocking;
    /// `None` (not rendered) without probes or before one completed.
    pub probes: Option<(u64, u64)>,
    /// Condition names the probes' expressions use that no resource of
    /// their type carries (a likely typo); `None` without probes.
    pub unseen_conditions: Option<usize>,
    /// Per probed resource type, its resources per condition type and
    /// status; empty (not rendered) without probes or with
    /// `--condition-metrics-max-types=0`.
    pub resource_conditions: Vec<ResourceConditions>,
    /// Kubernetes Events by outcome; `None` (not rendered) with
    /// `--events=false`.
    pub events: Option<EventCounts>,
    /// Successful status writes by mode and health.
    updates: [[u64; 3]; 2],
    /// Failed status writes by error kind (index into [`ERROR_TYPES`]).
    errors: [u64; ERROR_TYPES.len()],
    latency_buckets: [u64; LATENCY_BUCKETS.len()],
    latency_count: u64,
    latency_sum: f64,
    last_success: Option<SystemTime>,
}

impl Metrics {
    /// Counts a successful write of a status with `mode` and `health`.
    pub(crate) fn record_update(&mut self, mode: Mode, health: Health, took: Duration, at: SystemTime) {
        self.updates[mode as usize][health as usize] += 1;
        self.observe_latency(took);
        self.last_success = Some(at);
    }

    /// Counts a failed write; `kind` is one of [`ERROR_TYPES`].
    pub(crate) fn record_error(&mut self, kind: &str, took: Duration) {
        let i = ERROR_TYPES.iter().position(|k| *k == kind).unwrap_or(ERROR_TYPES.len() - 1);
        self.errors[i] += 1;
        self.observe_latency(took);
    }

    fn observe_latency(&mut self, took: Duration) {
        let secs = took.as_secs_f64();
        for (bucket, bound) in self.latency_buckets.iter_mut().zip(LATENCY_BUCKETS) {
            if secs <= bound {
                *bucket += 1;
            }
        }
        self.latency_count += 1;
        self.latency_sum += secs;
    }

    /// The exposition text, with `current` as the one-hot health gauge.
    pub(crate) fn render(&self, current: Health) -> String {
        let mut out = String::with_capacity(3072);
        let w = &mut out;
        header(w, "kube9_operator_status_updates_total", "counter", "Successful writes of the status ConfigMap.");
        for (mode, health) in MODES.into_iter().flat_map(|m| Health::ALL.map(|h| (m, h))) {
            let (n, mode) = (self.updates[mode as usize][health as usize], mode.as_str());
            let _ = writeln!(w, "kube9_operator_status_updates_total{{mode=\"{mode}\",health=\"{health}\"}} {n}");
        }
        let help = "Failed writes of the status ConfigMap, by error type.";
        header(w, "kube9_operator_status_update_errors_total", "counter", help);
        for (kind, n) in ERROR_TYPES.iter().zip(self.errors) {
            let _ = writeln!(w, "kube9_operator_status_update_errors_total{{error_type=\"{kind}\"}} {n}");
        }
        header(w, "kube9_operator_health_status", "gauge", "1 for the current health, 0 for the others.");
        for health in Health::ALL {
            let _ = writeln!(w, "kube9_operator_health_status{{health=\"{health}\"}} {}", u8::from(health == current));
        }
        let publisher = "1 while this instance publishes (holds the publisher lock), 0 standing by.";
        single(w, "opstatus_publisher", "gauge", publisher, u8::from(self.publishing));
        let yielded = "1 while this instance leaves the status ConfigMap to another writer of its status key.";
        single(w, "opstatus_status_yielded", "gauge", yielded, u8::from(self.yielded));
        let yields = "Times another writer took the status key over and this instance yielded the ConfigMap to it.";
        single(w, "opstatus_foreign_writer_yields_total", "counter", yields, self.foreign_writer_yields);
        let overwrites =
            "Times another writer was found writing a status stale to readers and this instance wrote over it.";
        single(w, "opstatus_foreign_writer_overwrites_total", "counter", overwrites, self.foreign_writer_overwrites);
        header(w, "opstatus_build_info", "gauge", "opstatus's version.");
        let _ = writeln!(w, "opstatus_build_info{{version=\"{}\"}} 1", env!("CARGO_PKG_VERSION"));
        let help = "Duration of status ConfigMap writes, failed ones included.";
        header(w, "opstatus_status_write_duration_seconds", "histogram", help);
        for (bound, n) in LATENCY_BUCKETS.iter().zip(self.latency_buckets) {
            let _ = writeln!(w, "opstatus_status_write_duration_seconds_bucket{{le=\"{bound}\"}} {n}");
        }
        let _ = writeln!(w, "opstatus_status_write_duration_seconds_bucket{{le=\"+Inf\"}} {}", self.latency_count);
        let _ = writeln!(w, "opstatus_status_write_duration_seconds_sum {}", self.latency_sum);
        let _ = writeln!(w, "opstatus_status_write_duration_seconds_count {}", self.latency_count);
        let last = self.last_success.and_then(|t| t.duration_since(UNIX_EPOCH).ok()).map_or(0, |d| d.as_secs());
        let help = "Unix time of the last successful status write (0: none yet).";
        single(w, "opstatus_last_successful_write_timestamp_seconds", "gauge", help, last);
        self.render_conditions(w);
        out
    }

    fn render_conditions(&self, w: &mut String) {
        if !self.sinks.is_empty() {
            let help = "Syncs of the OperatorCondition / ClusterOperator, by result (unchanged: nothing was sent).";
            header(w, "opstatus_condition_syncs_total", "counter", help);
            for (sink, c) in &self.sinks {
                let by_result = [("updated", c.updated), ("unchanged", c.unchanged), ("failed", c.failed)];
                results(w, "opstatus_condition_syncs_total", &format!("sink=\"{sink}\","), &by_result);
            }
        }
        if let Some(e) = self.events {
            let help = "Kubernetes Events by result (dropped: over the rate limit).";
            header(w, "opstatus_events_total", "counter", help);
            let by_result = [("created", e.created), ("dropped", e.dropped), ("failed", e.failed)];
            results(w, "opstatus_events_total", "", &by_result);
        }
        if let Some((evaluated, blocking)) = self.probes {
            single(w, "opstatus_probe_resources", "gauge", "Resources the last complete probe evaluated.", evaluated);
            let help = "Resources whose Upgradeable expression is false.";
            single(w, "opstatus_probe_blocking_resources", "gauge", help, blocking);
        }
        if let Some(unseen) = self.unseen_conditions {
            let help =
                "Condition names the probe expressions use that no resource of their type carries (a likely typo).";
            single(w, "opstatus_probe_unseen_conditions", "gauge", help, unseen);
        }
        self.render_resource_conditions(w);
    }

    /// The per-condition series: counts for every status (Absent included),
    /// the oldest transition only where one is known.
    fn render_resource_conditions(&self, w: &mut String) {
        if self.resource_conditions.is_empty() {
            return;
        }
        let labels = |r: &ResourceConditions| format!("group=\"{}\",kind=\"{}\"", escaped(&r.group), escaped(&r.kind));
        let series = |w: &mut String, name: &str, r: &ResourceConditions, kind: &str, status: &str, value: u64| {
            let _ = writeln!(w, "{name}{{{},type=\"{}\",status=\"{status}\"}} {value}", labels(r), escaped(kind));
        };
        let help = "Probed resources per condition type and status (Absent: no condition of that type).";
        header(w, "opstatus_resource_conditions", "gauge", help);
        for r in &self.resource_conditions {
            for t in &r.types {
                for (status, n) in STATUSES.iter().zip(t.resources) {
                    series(w, "opstatus_resource_conditions", r, &t.name, status, n);
                }
            }
        }
        let help = "Unix time of the oldest lastTransitionTime among the probed resources with that condition type and status.";
        header(w, "opstatus_resource_condition_oldest_transition_timestamp_seconds", "gauge", help);
        for r in &self.resource_conditions {
            for t in &r.types {
                for (status, oldest) in STATUSES.iter().zip(t.oldest).filter(|(_, at)| *at != 0) {
                    let name = "opstatus_resource_condition_oldest_transition_timestamp_seconds";
                    series(w, name, r, &t.name, status, u64::from(oldest));
                }
            }
        }
        let help =
            "Probed resources carrying a condition type past --condition-metrics-max-types (not counted per type).";
        header(w, "opstatus_resource_condition_untracked_resources", "gauge", help);
        for r in &self.resource_conditions {
            let _ = writeln!(w, "opstatus_resource_condition_untracked_resources{{{}}} {}", labels(r), r.untracked);
        }
    }
}

/// A label value as the exposition format wants it: `\`, `"` and line
/// feeds escaped.
fn escaped(value: &str) -> String {
    value.replace('\\', "\\\\").replace('"', "\\\"").replace('\n', "\\n")
}

fn header(w: &mut String, name: &str, kind: &str, help: &str) {
    let _ = writeln!(w, "# HELP {name} {help}\n# TYPE {name} {kind}");
}

/// A metric of one series, without labels.
fn single(w: &mut String, name: &str, kind: &str, help: &str, value: impl std::fmt::Display) {
    header(w, name, kind, help);
    let _ = writeln!(w, "{name} {value}");
}

/// A series per result: `name{<labels>result="…"} n`.
fn results(w: &mut String, name: &str, labels: &str, by_result: &[(&str, u64)]) {
    for (result, n) in by_result {
        let _ = writeln!(w, "{name}{{{labels}result=\"{result}\"}} {n}");
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashMap;

    /// A strict reader of the text format: every sample line must be
    /// `name{labels} value` under a `# TYPE` for its family.
    fn parse(text: &str) -> HashMap<String, f64> {
        let mut samples = HashMap::new();
        let mut families = Vec::new();
        for line in text.lines() {
            if let Some(rest) = line.strip_prefix("# TYPE ") {
                let (name, kind) = rest.split_once(' ').unwrap();
                assert!(matches!(kind, "counter" | "gauge" | "histogram"), "{line}");
                families.push(name.to_string());
                continue;
            }
            if line.starts_with("# HELP ") {
                continue;
            }
            let (series, value) = line.rsplit_once(' ').unwrap_or_else(|| panic!("bad line {line:?}"));
            let name = series.split('{').next().unwrap();
            assert!(families.iter().any(|f| name.starts_with(f.as_str())), "{name} has no # TYPE");
            if let Some(labels) = series.strip_prefix(name)
                && !labels.is_empty()
            {
                assert!(labels.starts_with('{') && labels.ends_with('}'), "{line}");
                for pair in labels[1..labels.len() - 1].split(',') {
                    let (k, v) = pair.split_once('=').unwrap();
                    assert!(k.chars().all(|c| c.is_ascii_alphanumeric() || c == '_'), "{line}");
                    assert!(v.starts_with('"') && v.ends_with('"'), "{line}");
                }
            }
            assert!(samples.insert(series.to_string(), value.parse::<f64>().unwrap()).is_none(), "duplicate {series}");
        }
        samples
    }

    #[test]
    fn fresh_metrics_parse_back_with_every_series_at_zero() {
        let m = parse(&Metrics::default().render(Health::Healthy));
        assert_eq!(m["kube9_operator_status_updates_total{mode=\"operated\",health=\"healthy\"}"], 0.0);
        assert_eq!(m["kube9_operator_status_update_errors_total{error_type=\"forbidden\"}"], 0.0);
        assert_eq!(m["kube9_operator_health_status{health=\"healthy\"}"], 1.0);
        assert_eq!(m["kube9_operator_health_status{health=\"unhealthy\"}"], 0.0);
        assert_eq!(m[&format!("opstatus_build_info{{version=\"{}\"}}", env!("CARGO_PKG_VERSION"))], 1.0);
        assert_eq!(m["opstatus_last_successful_write_timestamp_seconds"], 0.0);
        assert_eq!(m["opstatus_publisher"], 0.0);
        assert_eq!((m["opstatus_status_yielded"], m["opstatus_foreign_writer_yields_total"]), (0.0, 0.0));
        assert_eq!(m["opstatus_foreign_writer_overwrites_total"], 0.0);
        assert_eq!(m.len(), 6 + 10 + 3 + 1 + 3 + 1 + 13 + 1);
    }

    #[test]
    fn records_updates_errors_latency_and_the_last_success() {
        let mut metrics = Metrics::default();
        let at = UNIX_EPOCH + Duration::from_secs(1_762_788_600);
        metrics.record_update(Mode::Operated, Health::Healthy, Duration::from_millis(3), at);
        metrics.record_update(Mode::Operated, Health::Healthy, Duration::from_millis(40), at);
        metrics.record_update(Mode::Enabled, Health::Degraded, Duration::from_millis(7), at);
        metrics.record_error("forbidden", Duration::from_secs(7));
        metrics.record_error("something-new", Duration::from_millis(1));
        let m = parse(&metrics.render(Health::Unhealthy));
        assert_eq!(m["kube9_operator_status_updates_total{mode=\"operated\",health=\"healthy\"}"], 2.0);
        assert_eq!(m["kube9_operator_status_updates_total{mode=\"enabled\",health=\"degraded\"}"], 1.0);
        assert_eq!(m["kube9_operator_status_update_errors_total{error_type=\"forbidden\"}"], 1.0);
        assert_eq!(
            m["kube9_operator_status_update_errors_total{error_type=\"client_error\"}"], 1.0,
            "unknown kinds are bounded"
        );
        assert_eq!(m["kube9_operator_health_status{health=\"unhealthy\"}"], 1.0);
        assert_eq!(m["opstatus_status_write_duration_seconds_bucket{le=\"0.005\"}"], 2.0);
        assert_eq!(m["opstatus_status_write_duration_seconds_bucket{le=\"0.05\"}"], 4.0);
        assert_eq!(m["opstatus_status_write_duration_seconds_bucket{le=\"5\"}"], 4.0);
        assert_eq!(m["opstatus_status_write_duration_seconds_bucket{le=\"+Inf\"}"], 5.0);
        assert_eq!(m["opstatus_status_write_duration_seconds_count"], 5.0);
        assert!((m["opstatus_status_write_duration_seconds_sum"] - 7.051).abs() < 1e-9);
        assert_eq!(m["opstatus_last_successful_write_timestamp_seconds"], 1_762_788_600.0);
    }

    #[test]
    fn condition_sink_and_probe_series_appear_only_when_configured() {
        let mut metrics = Metrics::default();
        let plain = parse(&metrics.render(Health::Healthy));
        assert!(plain.keys().all(|k| !k.starts_with("opstatus_condition") && !k.starts_with("opstatus_probe")));
        metrics.sinks = vec![("operator_condition", SyncCounts { updated: 2, unchanged: 40, failed: 1 })];
        metrics.probes = Some((2000, 1));
        metrics.unseen_conditions = Some(1);
        let m = parse(&metrics.render(Health::Healthy));
        assert_eq!(m["opstatus_condition_syncs_total{sink=\"operator_condition\",result=\"updated\"}"], 2.0);
        assert_eq!(m["opstatus_condition_syncs_total{sink=\"operator_condition\",result=\"unchanged\"}"], 40.0);
        assert_eq!(m["opstatus_condition_syncs_total{sink=\"operator_condition\",result=\"failed\"}"], 1.0);
        assert!(!m.keys().any(|k| k.contains("cluster_operator")));
        assert_eq!((m["opstatus_probe_resources"], m["opstatus_probe_blocking_resources"]), (2000.0, 1.0));
        assert_eq!(m["opstatus_probe_unseen_conditions"], 1.0);
    }

    #[test]
    fn per_condition_series_are_counted_escaped_and_bounded_to_what_the_probes_count() {
        use crate::signals::probes::census::TypeCounts;
        let mut metrics = Metrics::default();
        assert!(!metrics.render(Health::Healthy).contains("opstatus_resource_condition"), "none without probes");
        let migrating =
            TypeCounts { name: "Migrating".into(), resources: [1, 2, 7, 0], oldest: [0, 1_767_229_200, 5, 0] };
        let odd = TypeCounts { name: "a\\b\"c".into(), resources: [0, 0, 0, 10], oldest: [0; 4] };
        metrics.resource_conditions = vec![ResourceConditions {
            group: "example.com".into(),
            kind: "Foo".into(),
            types: vec![migrating, odd],
            untracked: 4,
            untracked_names: vec![],
        }];
        let text = metrics.render(Health::Healthy);
        let m = parse(&text);
        let of = |t: &str, s: &str| format!(r#"{{group="example.com",kind="Foo",type="{t}",status="{s}"}}"#);
        assert_eq!(m[&format!("opstatus_resource_conditions{}", of("Migrating", "True"))], 2.0);
        assert_eq!(m[&format!("opstatus_resource_conditions{}", of("Migrating", "False"))], 7.0);
        assert_eq!(m[&format!("opstatus_resource_conditions{}", of("Migrating", "Absent"))], 1.0);
        assert_eq!(m[&format!("opstatus_resource_conditions{}", of(r#"a\\b\"c"#, "Unknown"))], 10.0);
        let oldest = "opstatus_resource_condition_oldest_transition_timestamp_seconds";
        assert_eq!(m[&format!("{oldest}{}", of("Migrating", "True"))], 1_767_229_200.0);
        assert_eq!(m.keys().filter(|k| k.starts_with(oldest)).count(), 2, "only where a time is known");
        assert_eq!(m[r#"opstatus_resource_condition_untracked_resources{group="example.com",kind="Foo"}"#], 4.0);
        assert_eq!(m.keys().filter(|k| k.starts_with("opstatus_resource_conditions{")).count(), 8);
    }
}
