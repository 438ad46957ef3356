//! End to end, the monitoring kit: a real Prometheus (Debian's package, on
//! loopback, stopped by its PID) scrapes a running opstatus with the kit's
//! rules loaded (the stale threshold and its `for:` shortened in a rendered
//! copy); the API server becomes unreachable (a loopback proxy in front of
//! it is cut) and `OpstatusStatusStale` fires in Prometheus's own
//! `ALERTS`; recovery clears it. Prometheus scrapes the per-condition
//! series of Foos probed on the real API server, the example
//! `OpstatusResourceConditionStuck` fires for the one stuck `Migrating` and
//! clears once it moves on, `/status` shows the counts, and the type past
//! `--condition-metrics-max-types` is counted apart and said once in the
//! log. And the kit's PodMonitor and
//! PrometheusRule, rendered with the opstatus component over the sample
//! operator, apply with strict validation against the Prometheus
//! Operator's own CRDs.

use crate::support;
use crate::support::run_args::Run;

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};
use support::control_plane::{ROOT, relative_path, release_bin, shared};
use support::http::endpoint_from_log;
use support::tcp_proxy::TcpProxy;
use support::{TempDir, wait_for};

/// Prometheus on a free loopback port, killed when dropped.
struct Prometheus {
    child: Child,
    addr: SocketAddr,
    _dir: TempDir,
}

impl Drop for Prometheus {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Prometheus {
    fn start(target: SocketAddr, namespace: &str, rules: &str) -> Prometheus {
        let dir = TempDir::new("prometheus");
        let port = TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
        std::fs::write(dir.path().join("rules.yml"), rules).unwrap();
        let config = format!(
            "global: {{scrape_interval: 1s, evaluation_interval: 1s}}\nrule_files: [rules.yml]\nscrape_configs:\n\
             - job_name: {namespace}/opstatus\n  static_configs:\n  - targets: ['{target}']\n    labels: {{namespace: \
             {namespace}, pod: opstatus-0, opstatus: sidecar}}\n"
        );
        std::fs::write(dir.path().join("prometheus.yml"), config).unwrap();
        let child = Command::new("prometheus")
            .current_dir(dir.path())
            .args([
                "--config.file=prometheus.yml",
                "--storage.tsdb.path=data",
                &format!("--web.listen-address=127.0.0.1:{port}"),
            ])
            .stdout(Stdio::null())
            .stderr(std::fs::File::create(dir.path().join("prometheus.log")).unwrap())
            .spawn()
            .expect("prometheus (Debian's package; scripts/test.sh installs it)");
        let prometheus = Prometheus { child, addr: SocketAddr::from(([127, 0, 0, 1], port)), _dir: dir };
        let ready = wait_for(Duration::from_secs(30), Duration::from_millis(200), || {
            prometheus.get("/-/ready").filter(|(code, _)| *code == 200)
        });
        assert!(ready.is_some(), "prometheus did not become ready");
        prometheus
    }

    /// `GET path`: the status code and body; `None` when it does not answer.
    fn get(&self, path: &str) -> Option<(u16, String)> {
        let mut stream = TcpStream::connect_timeout(&self.addr, Duration::from_secs(2)).ok()?;
        stream.set_read_timeout(Some(Duration::from_secs(5))).ok()?;
        // HTTP/1.0: the answer is the body as it is, never chunked.
        write!(stream, "GET {path} HTTP/1.0\r\nHost: prometheus\r\n\r\n").ok()?;
        let mut answer = String::new();
        stream.read_to_string(&mut answer).ok()?;
        let code = answer.split(' ').nth(1)?.parse().ok()?;
        Some((code, answer.split_once("\r\n\r\n")?.1.to_string()))
    }

    /// The number of series an instant query returns.
    fn count(&self, query: &str) -> usize {
        let encoded: String = query
            .bytes()
            .map(|b| match b {
                b'a'..=b'z' | b'A'..=b'Z' | b'0'..=b'9' | b'_' => (b as char).to_string(),
                _ => format!("%{b:02X}"),
            })
            .collect();
        let (code, body) = self.get(&format!("/api/v1/query?query={encoded}")).expect("prometheus answers");
        assert_eq!(code, 200, "{body}");
        let value: serde_json::Value = serde_json::from_str(&body).unwrap_or_else(|e| panic!("{e}: {body}"));
        value["data"]["result"].as_array().map_or(0, Vec::len)
    }
}

/// The kit's rule groups as a Prometheus rule file, with the stale alert's
/// 300 s and its `for:` shortened so the test takes seconds.
fn rendered_rules() -> String {
    let rules = support::monitoring::rule_file();
    let stale = "opstatus_last_successful_write_timestamp_seconds[10m])) > 300\n";
    let stale_for = "opstatus_status_yielded) == 1)\n    for: 1m";
    assert!(rules.contains(stale) && rules.contains(stale_for), "the stale alert changed: update this test");
    rules
        .replace(stale, "opstatus_last_successful_write_timestamp_seconds[10m])) > 6\n")
        .replace(stale_for, "opstatus_status_yielded) == 1)\n    for: 2s")
}

#[test]
fn the_stale_alert_fires_in_a_real_prometheus_during_an_outage_and_clears() {
    let cp = shared();
    let pod = cp.deploy("monitoring");
    let proxy = TcpProxy::start(cp.port());
    let env = support::pod_env(proxy.port(), &pod.sa);
    let agent = Run::every("2s").listen().start(&release_bin(), &env);
    let endpoint = wait_for(Duration::from_secs(20), Duration::from_millis(100), || endpoint_from_log(&agent.stderr()))
        .unwrap_or_else(|| panic!("no endpoint: {}", agent.stderr()));
    let prometheus = Prometheus::start(endpoint, &pod.namespace, &rendered_rules());
    let firing = r#"ALERTS{alertname="OpstatusStatusStale",alertstate="firing"}"#;
    let scraped = wait_for(Duration::from_secs(30), Duration::from_millis(500), || {
        (prometheus.count("opstatus_last_successful_write_timestamp_seconds > 0") == 1).then_some(())
    });
    assert!(scraped.is_some(), "opstatus was never scraped with a write");
    std::thread::sleep(Duration::from_secs(8));
    assert_eq!(prometheus.count(firing), 0, "stale while opstatus writes");

    proxy.cut();
    let cut = Instant::now();
    let fired = wait_for(Duration::from_secs(60), Duration::from_millis(500), || {
        (prometheus.count(firing) == 1).then(|| cut.elapsed())
    });
    let fired = fired.unwrap_or_else(|| panic!("OpstatusStatusStale never fired: {}", agent.stderr()));
    eprintln!("OpstatusStatusStale fired {:.1} s after the API server became unreachable", fired.as_secs_f64());

    proxy.restore();
    let restored = Instant::now();
    let cleared = wait_for(Duration::from_secs(60), Duration::from_millis(500), || {
        (prometheus.count(firing) == 0).then(|| restored.elapsed())
    });
    let cleared = cleared.unwrap_or_else(|| panic!("OpstatusStatusStale never cleared: {}", agent.stderr()));
    eprintln!("OpstatusStatusStale cleared {:.1} s after recovery", cleared.as_secs_f64());
}

#[test]
fn a_condition_stuck_in_one_status_fires_its_alert_in_a_real_prometheus_and_clears() {
    let cp = shared();
    cp.install_crd("foos.example.com");
    let pod = cp.deploy("condition-metrics");
    let ns = pod.namespace.clone();
    cp.apply_manifests("manifests/olm", &ns, &[]);
    // Each Foo's conditions: Migrating first (the one type counted, with
    // --condition-metrics-max-types=1), Ready past the cap. Their
    // lastTransitionTime is 2026-01-01: far past the alert's 3 hours.
    cp.create_foo(&ns, "stuck", &[("Migrating", "True"), ("Ready", "False")]);
    cp.create_foo(&ns, "calm", &[("Migrating", "False"), ("Ready", "True")]);
    cp.create_foo(&ns, "bare", &[]);
    let probe = "example.com/v1/foos:Upgradeable=!Migrating";
    let run = Run::every("2s").listen().flag("--check-interval", "1s").flag("--probe", probe);
    let run = run.flag("--probe-namespace", &ns).flag("--condition-metrics-max-types", "1");
    let agent = run.start(&release_bin(), &cp.pod_env(&pod));
    let endpoint = wait_for(Duration::from_secs(20), Duration::from_millis(100), || endpoint_from_log(&agent.stderr()))
        .unwrap_or_else(|| panic!("no endpoint: {}", agent.stderr()));
    let stuck_for = "> 3 * 3600\n    for: 5m";
    let rules = rendered_rules();
    assert!(rules.contains(stuck_for), "the example alert changed: update this test");
    let prometheus = Prometheus::start(endpoint, &ns, &rules.replace(stuck_for, "> 3 * 3600\n    for: 2s"));
    let counted = |status: &str, n: u32| {
        let series = format!(
            r#"opstatus_resource_conditions{{group="example.com",kind="Foo",type="Migrating",status="{status}"}}"#
        );
        prometheus.count(&format!("{series} == {n}")) == 1
    };
    let scraped = wait_for(Duration::from_secs(40), Duration::from_millis(500), || {
        (counted("True", 1) && counted("False", 1) && counted("Absent", 1) && counted("Unknown", 0)).then_some(())
    });
    assert!(scraped.is_some(), "the counts never reached Prometheus: {}", agent.stderr());
    assert_eq!(prometheus.count(r#"opstatus_resource_conditions{type="Ready"}"#), 0, "past the cap");
    assert_eq!(prometheus.count(r#"opstatus_resource_condition_untracked_resources{kind="Foo"} == 2"#), 1);
    let oldest = r#"opstatus_resource_condition_oldest_transition_timestamp_seconds{type="Migrating",status="True"}"#;
    assert_eq!(prometheus.count(&format!("{oldest} == 1767225600")), 1, "2026-01-01T00:00:00Z");
    let firing = r#"ALERTS{alertname="OpstatusResourceConditionStuck",alertstate="firing",kind="Foo",type="Migrating",status="True"}"#;
    let fired =
        wait_for(Duration::from_secs(40), Duration::from_millis(500), || (prometheus.count(firing) == 1).then_some(()));
    assert!(fired.is_some(), "OpstatusResourceConditionStuck never fired: {}", agent.stderr());

    let (code, status, _) = support::http::get(endpoint, "/status");
    let status: serde_json::Value = serde_json::from_str(&status).unwrap_or_else(|e| panic!("{code} {e}: {status}"));
    let expected = serde_json::json!([{"group": "example.com", "kind": "Foo", "untracked": 2,
        "types": {"Migrating": {"Absent": 1, "True": 1, "False": 1, "Unknown": 0}}}]);
    assert_eq!(status["conditions"], expected, "{status}");

    cp.set_foo_conditions(&ns, "stuck", &[("Migrating", "False")]);
    let cleared = wait_for(Duration::from_secs(40), Duration::from_millis(500), || {
        (prometheus.count(firing) == 0 && counted("False", 2) && prometheus.count(oldest) == 0).then_some(())
    });
    assert!(cleared.is_some(), "the alert never cleared once the Foo moved on: {}", agent.stderr());
    let log = agent.stderr();
    let said = log.matches("Foo resources carry condition types past the 1 counted (such as Ready)").count();
    assert_eq!(said, 1, "the types past the cap are said once: {log}");
}

#[test]
fn the_podmonitor_and_the_rule_apply_with_strict_validation() {
    let cp = shared();
    if cp.is_debian_1_20() {
        // v1.20 refuses the Prometheus Operator's current CRDs (their
        // `default`s on nullable strings): said, and checked to stay so.
        let crd = std::fs::read_to_string(format!("{ROOT}/tests/fixtures/crds/podmonitors.monitoring.coreos.com.yaml"))
            .unwrap();
        let out = cp.kubectl(&["apply", "--dry-run=server", "-f", "-"], Some(&crd));
        let said = String::from_utf8_lossy(&out.stderr);
        assert!(!out.status.success() && said.contains(".default: Invalid value"), "{said}");
        eprintln!(
            "monitoring kit: NOT validated on kube-apiserver {} (it refuses the Prometheus Operator v0.93.0 CRDs); \
             the v1.36 run of scripts/test.sh validates it",
            cp.git_version()
        );
        return;
    }
    cp.install_crd("podmonitors.monitoring.coreos.com");
    cp.install_crd("prometheusrules.monitoring.coreos.com");
    let ns = support::control_plane::unique_namespace("monitoring-kit");
    cp.create_namespace(&ns);
    let overlay = TempDir::new("monitoring-overlay");
    let rel = |p: &str| relative_path(overlay.path(), &Path::new(ROOT).join(p)).display().to_string();
    std::fs::write(
        overlay.path().join("kustomization.yaml"),
        format!(
            "apiVersion: kustomize.config.k8s.io/v1beta1\nkind: Kustomization\nnamespace: {ns}\nresources:\n- {}\n\
             components:\n- opstatus-target\n- {}\n- {}\n",
            rel("tests/fixtures/sample-operator"),
            rel("manifests/components/opstatus-plain"),
            rel("manifests/components/monitoring"),
        ),
    )
    .unwrap();
    std::fs::create_dir(overlay.path().join("opstatus-target")).unwrap();
    let target = support::markdown::opstatus_target("sample-controller-manager");
    std::fs::write(overlay.path().join("opstatus-target/kustomization.yaml"), target).unwrap();
    let rendered = cp.kubectl_ok(&["kustomize", overlay.path().to_str().unwrap()]);
    let kit: Vec<&str> = rendered
        .split("\n---\n")
        .filter(|doc| doc.contains("kind: PodMonitor") || doc.contains("kind: PrometheusRule"))
        .collect();
    assert_eq!(kit.len(), 2, "{rendered}");
    for doc in kit {
        let out = cp.kubectl_stdin_ok(
            &["apply", "-n", &ns, "--dry-run=server", "--validate=strict", "-o", "name", "-f", "-"],
            Some(doc),
        );
        assert!(
            out.contains("podmonitor.monitoring.coreos.com/opstatus")
                || out.contains("prometheusrule.monitoring.coreos.com/opstatus"),
            "{out}"
        );
    }
    // The PodMonitor scrapes the port the component names, on the pods it
    // put the sidecar in (their label), whatever the operator's labels are.
    let podmonitor =
        std::fs::read_to_string(format!("{ROOT}/manifests/components/monitoring/podmonitor.yaml")).unwrap();
    let label = "opstatus.kube9.dev/sidecar: \"true\"";
    assert!(podmonitor.contains(label) && podmonitor.contains("- port: opstatus"), "{podmonitor}");
    assert!(rendered.contains("name: opstatus\n") && rendered.contains("containerPort: 8090"), "{rendered}");
    let pods: Vec<&str> = rendered.split("\n---\n").filter(|d| d.contains("kind: Deployment")).collect();
    for pod in pods {
        let labelled = pod.contains(label);
        assert_eq!(labelled, pod.contains("containerPort: 8090"), "labelled iff it has the sidecar: {pod}");
    }
}
