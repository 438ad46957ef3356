//! The monitoring kit (`manifests/components/monitoring`): the alert rules
//! pass `promtool test rules` (each fires when it should and stays quiet
//! when it should not, a rolling update and a handover included), every
//! alert has its summary, description and runbook section, the metrics of
//! a running opstatus pass `promtool check metrics`, and the dashboard
//! queries only metrics opstatus exports.

use crate::support;

use std::collections::BTreeSet;
use std::process::Command;
use support::fake_apiserver::FakeApiServer;
use support::http::{agent_with_endpoint, get};
use support::{ServiceAccountDir, TempDir};

const ROOT: &str = env!("CARGO_MANIFEST_DIR");
const TOKEN: &str = "sa-token-for-monitoring-tests";

fn read(path: &str) -> String {
    std::fs::read_to_string(format!("{ROOT}/{path}")).unwrap_or_else(|e| panic!("{path}: {e}"))
}

fn promtool(args: &[&str], dir: &std::path::Path, stdin: Option<&str>) -> (bool, String) {
    let mut child = Command::new("promtool")
        .args(args)
        .current_dir(dir)
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("promtool (Debian's prometheus package; scripts/test.sh installs it)");
    if let Some(text) = stdin {
        std::io::Write::write_all(child.stdin.as_mut().unwrap(), text.as_bytes()).unwrap();
    }
    drop(child.stdin.take());
    let out = child.wait_with_output().unwrap();
    let text = String::from_utf8_lossy(&out.stdout).to_string() + &String::from_utf8_lossy(&out.stderr);
    (out.status.success(), text)
}

#[test]
fn every_alert_fires_when_it_should_and_stays_quiet_when_it_should_not() {
    let dir = TempDir::new("promtool-rules");
    std::fs::write(dir.path().join("rules.yml"), support::monitoring::rule_file()).unwrap();
    std::fs::write(dir.path().join("rules.test.yml"), read("tests/fixtures/monitoring/rules.test.yml")).unwrap();
    let (ok, said) = promtool(&["check", "rules", "rules.yml"], dir.path(), None);
    assert!(ok && said.contains("SUCCESS: 10 rules found"), "{said}");
    let (ok, said) = promtool(&["test", "rules", "rules.test.yml"], dir.path(), None);
    assert!(ok && said.contains("SUCCESS"), "{said}");
    // Every alert is tested: named in the test file at least once firing.
    let tests = read("tests/fixtures/monitoring/rules.test.yml");
    for alert in alerts() {
        let firing = tests.split("alertname: ").skip(1).any(|t| t.starts_with(&alert) && t.contains("exp_alerts"));
        assert!(firing, "no test where {alert} fires");
    }
}

/// The alert names, in order.
fn alerts() -> Vec<String> {
    let rule = read("manifests/components/monitoring/prometheusrule.yaml");
    rule.lines().filter_map(|l| l.trim().strip_prefix("- alert: ")).map(String::from).collect()
}

#[test]
fn every_alert_has_a_summary_a_description_and_its_runbook() {
    let rule = read("manifests/components/monitoring/prometheusrule.yaml");
    let runbooks = read("docs/monitoring.md");
    let names = alerts();
    assert_eq!(names.len(), 10, "{names:?}");
    for (alert, block) in names.iter().zip(rule.split("- alert: ").skip(1)) {
        for key in ["summary: ", "description: ", "for: ", "severity: "] {
            assert!(block.contains(key), "{alert} has no {key}");
        }
        let anchor = alert.to_lowercase();
        assert!(block.contains(&format!("runbook_url: docs/monitoring.md#{anchor}")), "{alert}: runbook link");
        let section =
            runbooks.split(&format!("\n### {alert}\n")).nth(1).unwrap_or_else(|| panic!("no runbook for {alert}"));
        let section = section.split("\n### ").next().unwrap();
        for part in ["**Means**", "**Check**", "**Fix**"] {
            assert!(section.contains(part), "the runbook for {alert} has no {part}");
        }
    }
}

/// The metric names opstatus's Prometheus text can carry, from its renderer.
fn exported() -> BTreeSet<String> {
    let source = read("src/endpoint/prometheus.rs");
    let before_tests = source.split("#[cfg(test)]").next().unwrap();
    let mut names = BTreeSet::new();
    for piece in before_tests.split('"').skip(1).step_by(2) {
        let name: String = piece.chars().take_while(|c| c.is_ascii_alphanumeric() || *c == '_').collect();
        if (name.starts_with("opstatus_") || name.starts_with("kube9_operator_")) && name.len() > 10 {
            names.insert(name);
        }
    }
    assert!(names.contains("opstatus_publisher") && names.len() >= 10, "{names:?}");
    names
}

#[test]
fn a_running_opstatus_passes_promtool_check_metrics() {
    let server = FakeApiServer::start(TOKEN);
    let sa = ServiceAccountDir::new(TOKEN, &server.pki.ca_pem, "ops");
    let (_agent, addr) = agent_with_endpoint(&server, &sa, "/readyz");
    let (code, scrape, _) = get(addr, "/metrics");
    assert_eq!(code, 200);
    let dir = TempDir::new("promtool-metrics");
    let (ok, said) = promtool(&["check", "metrics"], dir.path(), Some(&scrape));
    assert!(ok && said.trim().is_empty(), "promtool check metrics:\n{said}\n{scrape}");
    // What the scrape carries is what the renderer (and the dashboard test) knows.
    let known = exported();
    for line in scrape.lines().filter_map(|l| l.strip_prefix("# TYPE ")) {
        let name = line.split(' ').next().unwrap();
        assert!(known.contains(name), "{name} is exported but not found in the renderer");
    }
}

#[test]
fn the_dashboard_is_valid_and_queries_only_metrics_opstatus_exports() {
    let dashboard: serde_json::Value =
        serde_json::from_str(&read("manifests/components/monitoring/dashboard.json")).expect("valid JSON");
    let known = exported();
    let mut queried = BTreeSet::new();
    for panel in dashboard["panels"].as_array().unwrap() {
        let targets = panel["targets"].as_array().unwrap();
        assert!(!targets.is_empty() && panel["description"].is_string(), "{}", panel["title"]);
        for target in targets {
            let expr = target["expr"].as_str().unwrap();
            for word in expr.split(|c: char| !(c.is_ascii_alphanumeric() || c == '_')) {
                if word.starts_with("opstatus_") || word.starts_with("kube9_operator_") {
                    let base = ["_bucket", "_sum", "_count"].iter().find_map(|s| word.strip_suffix(s)).unwrap_or(word);
                    assert!(known.contains(word) || known.contains(base), "{}: {word} is not exported", panel["title"]);
                    queried.insert(base.to_string());
                }
            }
        }
    }
    for wanted in [
        "kube9_operator_health_status",
        "opstatus_probe_blocking_resources",
        "opstatus_status_write_duration_seconds",
        "opstatus_last_successful_write_timestamp_seconds",
        "opstatus_publisher",
    ] {
        assert!(queried.contains(wanted), "no panel shows {wanted}");
    }
}
