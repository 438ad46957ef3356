//! End to end, real kube-apiserver: the per-condition metrics follow the
//! condition types the resources carry. Three Foos carry `Migrating` and
//! `Ready` (two types counted, `--condition-metrics-max-types 2`); an
//! operator upgrade replaces them, Foo by Foo, with `Synced` and
//! `Healthy`. Once the last Foo changed, the two new types are counted on
//! every Foo and the old ones are gone from `/metrics`: a type no resource
//! carries gives up its place, and the collection is listed again (once)
//! to count the types that took their place on the Foos that changed
//! before it.

use crate::support;

use std::net::SocketAddr;
use std::time::Duration;
use support::control_plane::shared;
use support::http::{endpoint_from_log, get};
use support::run_args::Run;
use support::wait_for;

fn series(kind_type: &str, status: &str) -> String {
    format!(r#"opstatus_resource_conditions{{group="example.com",kind="Foo",type="{kind_type}",status="{status}"}}"#)
}

/// The value of `series` in `/metrics`, if it is there.
fn value(addr: SocketAddr, series: &str) -> Option<f64> {
    let (_, body, _) = get(addr, "/metrics");
    let line = body.lines().find(|l| l.starts_with(series) && l[series.len()..].starts_with(' '))?;
    line[series.len()..].trim().parse().ok()
}

#[test]
fn e2e_condition_metrics_follow_the_types_the_resources_carry() {
    let cp = shared();
    cp.install_crd("foos.example.com");
    let pod = cp.deploy("condition-types");
    let ns = pod.namespace.as_str();
    cp.apply_manifests("manifests/olm", ns, &[]);
    let foos = ["a", "b", "c"];
    for foo in foos {
        cp.create_foo(ns, foo, &[("Migrating", "False"), ("Ready", "True")]);
    }
    let agent = Run::every("2s")
        .checks("1s")
        .listen()
        .flag("--probe", "example.com/v1/foos:Upgradeable=!Migrating")
        .flag("--probe-namespace", ns)
        .flag("--condition-metrics-max-types", "2")
        .start(&support::control_plane::release_bin(), &cp.pod_env(&pod));
    let addr = wait_for(Duration::from_secs(20), Duration::from_millis(50), || endpoint_from_log(&agent.stderr()))
        .unwrap_or_else(|| panic!("no endpoint: {}", agent.stderr()));
    let counted = |kind_type: &str, status: &str, n: f64| value(addr, &series(kind_type, status)) == Some(n);
    let first = wait_for(Duration::from_secs(30), Duration::from_millis(200), || {
        (counted("Migrating", "False", 3.0) && counted("Ready", "True", 3.0)).then_some(())
    });
    assert!(first.is_some(), "never counted: {}\n{}", get(addr, "/metrics").1, agent.stderr());

    // The upgrade: each Foo's conditions replaced by two new types.
    for foo in foos {
        cp.set_foo_conditions(ns, foo, &[("Synced", "True"), ("Healthy", "False")]);
    }
    let untracked = r#"opstatus_resource_condition_untracked_resources{group="example.com",kind="Foo"}"#;
    let followed = wait_for(Duration::from_secs(30), Duration::from_millis(200), || {
        let metrics = get(addr, "/metrics").1;
        let gone = !metrics.contains(r#"type="Migrating""#) && !metrics.contains(r#"type="Ready""#);
        (gone
            && counted("Synced", "True", 3.0)
            && counted("Healthy", "False", 3.0)
            && value(addr, untracked) == Some(0.0))
        .then_some(())
    });
    assert!(followed.is_some(), "the metrics kept the first types: {}\n{}", get(addr, "/metrics").1, agent.stderr());
    let relists = agent.stderr().matches("listing again to count those").count();
    assert_eq!(relists, 1, "one list again: {}", agent.stderr());
}
