//! End to end, real kube-apiserver + the test kube9-server: the four
//! scenarios of the kube9 spec, observed in the ConfigMap.
//! Fresh install → operated/free; add a key → enabled/pro/registered with a
//! clusterId; server unreachable → degraded with the reason; remove the key
//! → operated/free, clusterId gone.

use crate::support;
use crate::support::run_args::Run;

use serde_json::Value;
use std::time::Duration;
use support::control_plane::{release_bin, shared};
use support::fake_kube9::{Answer, FakeKube9};
use support::{TempDir, wait_for};

const KEY: &str = "kdy_e2e_c0ffee0123456789";

#[test]
fn e2e_the_four_pro_tier_scenarios_of_the_spec() {
    let cp = shared();
    let pod = cp.deploy("pro");
    let kube9 = FakeKube9::start(Answer::Registered { cluster_id: "cls_e2e".into(), status_interval_seconds: 60 });
    let dir = TempDir::new("pro-e2e");
    let (key_file, ca) = (dir.path().join("api-key"), dir.path().join("kube9-ca.crt"));
    std::fs::write(&ca, &kube9.pki.ca_pem).unwrap();
    let agent =
        Run::every("60s").checks("1s").pro(&key_file, &kube9.url(), &ca).start(&release_bin(), &cp.pod_env(&pod));
    let status = || cp.status_document(&pod.namespace, "kube9-operator-status");
    let wait = |what: &str, check: &dyn Fn(&Value) -> bool| {
        wait_for(Duration::from_secs(15), Duration::from_millis(100), || status().filter(|s| check(s)))
            .unwrap_or_else(|| panic!("never {what}: {:?}", status()))
    };
    let summary = |s: &Value| (s["mode"].clone(), s["tier"].clone(), s["health"].clone(), s["registered"].clone());

    // 1. Fresh install.
    let s = wait("written", &|s| s["mode"] == "operated");
    assert_eq!(summary(&s), ("operated".into(), "free".into(), "healthy".into(), false.into()));

    // 2. Add an API key (the mounted Secret appears).
    std::fs::write(&key_file, KEY).unwrap();
    let s = wait("registered", &|s| s["registered"] == true);
    assert_eq!(summary(&s), ("enabled".into(), "pro".into(), "healthy".into(), true.into()));
    assert_eq!(s["clusterId"], "cls_e2e");
    let body: Value = serde_json::from_slice(&kube9.requests()[0].body).unwrap();
    assert!(body["kubernetesVersion"].as_str().unwrap().starts_with('v'), "from the API server's /version: {body}");
    assert_eq!(body["approximateNodeCount"], 0, "the sidecar may not list nodes");

    // 3. Server unreachable: a rotated key must register again, and cannot.
    kube9.set_answer(Answer::Close);
    std::fs::write(&key_file, "kdy_e2e_rotated000111").unwrap();
    let s = wait("degraded", &|s| s["health"] == "degraded");
    assert_eq!(summary(&s), ("enabled".into(), "free".into(), "degraded".into(), false.into()));
    assert!(s["error"].as_str().unwrap().starts_with("Failed to connect to kube9-server"), "{s}");

    // 4. Remove the key: the free tier at once; healthy again once three
    // checks in a row saw it (a recovery is held, docs/behaviour.md).
    std::fs::remove_file(&key_file).unwrap();
    let s = wait("free again", &|s| s["mode"] == "operated");
    assert_eq!(s["tier"], "free", "{s}");
    let s = wait("healthy again", &|s| s["health"] == "healthy");
    assert_eq!(summary(&s), ("operated".into(), "free".into(), "healthy".into(), false.into()));
    assert!(s.get("clusterId").is_none(), "{s}");
    assert!(!agent.stderr().contains(KEY), "the key leaked into the log");
}
