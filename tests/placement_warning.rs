//! The start-up warning for a status ConfigMap the kube9 extension will not
//! find: `kube9-operator-status` written outside kube9-system and default
//! (issue #19). Once, and only there.

mod support;

use std::time::Duration;
use support::fake_apiserver::FakeApiServer;
use support::{ServiceAccountDir, opstatus_bin, pod_env, run_to_end};

const TOKEN: &str = "sa-token-for-placement-tests";
const WARNING: &str = "is outside kube9-system and default, where the kube9 VS Code extension looks";

/// `opstatus once` in a pod whose namespace is `my-operator-system`: stderr.
fn once(args: &[&str]) -> String {
    let server = FakeApiServer::start(TOKEN);
    let sa = ServiceAccountDir::new(TOKEN, &server.pki.ca_pem, "my-operator-system");
    let mut all = vec!["once"];
    all.extend_from_slice(args);
    let out = run_to_end(&opstatus_bin(), &all, &pod_env(server.port(), &sa), Duration::from_secs(20));
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    assert!(out.status.success(), "{args:?}: {stderr}");
    stderr
}

#[test]
fn warns_once_outside_where_the_extension_looks() {
    let stderr = once(&[]);
    assert_eq!(stderr.matches(WARNING).count(), 1, "{stderr}");
    let line = stderr.lines().find(|l| l.contains(WARNING)).unwrap();
    assert!(line.contains("WARN"), "{line}");
    assert!(line.contains("my-operator-system/kube9-operator-status"), "{line}");
    assert!(line.contains("unless each user sets kube9.operatorNamespace to my-operator-system"), "{line}");
    assert!(line.contains("README"), "{line}");
}

#[test]
fn no_warning_where_the_extension_looks_or_for_another_name() {
    for args in [&["--namespace", "kube9-system"][..], &["--namespace", "default"], &["--configmap", "my-status"]] {
        let stderr = once(args);
        assert!(!stderr.contains(WARNING), "{args:?}: {stderr}");
        assert!(stderr.contains("Status updated"), "{args:?}: {stderr}");
    }
}
