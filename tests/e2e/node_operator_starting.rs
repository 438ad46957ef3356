//! End to end on a real node: one replica, replaced (`strategy: Recreate`),
//! the new operator serving its health endpoint only 6 s after it starts
//! (the stand-in's `START_DELAY`), at the component's own heartbeat. The
//! old pod's opstatus leaves the lock released as it stops; the new pod's
//! opstatus (a native sidecar on a kubelet that runs them: it starts
//! before the operator) publishes nothing before its operator answers
//! (the start-up allowance, 60 s by default; on a node busy starting
//! containers kubelet has taken 14 s from the sidecar's start to the
//! operator's), so every status the new pod publishes says `healthy`, the
//! first about as soon as the operator answers.

use crate::node_sidecar::{CM, DEPLOYMENT, SELECTOR, deploy_operator};
use crate::support;

use serde_json::Value;
use std::time::{Duration, Instant};
use support::node::shared;

const ANNOTATION: &str = "opstatus.kube9.dev/publisher";
const START_DELAY: Duration = Duration::from_secs(6);

#[test]
fn e2e_node_a_replaced_pod_publishes_nothing_before_its_operator_answers() {
    let node = shared();
    let cp = node.cp();
    let spec = "spec:\n  replicas: 1\n  strategy: {type: Recreate}\n";
    let ns = deploy_operator(node, "node-starting", &[], spec);
    let old = node.wait_ready(&ns, SELECTOR, 1, Duration::from_secs(180)).remove(0);
    let old = old["metadata"]["name"].as_str().unwrap().to_string();
    let up = support::wait_for(Duration::from_secs(60), Duration::from_millis(500), || {
        cp.status_document(&ns, CM).filter(|doc| doc["health"] == "healthy")
    });
    assert!(up.is_some(), "healthy before the update: {:?}", cp.status_document(&ns, CM));

    let watch = cp.kubectl_follow(&["-n", &ns, "get", "configmap", CM, "--watch", "-o", "json", "--request-timeout=0"]);
    let patch = format!(
        r#"{{"spec":{{"template":{{"metadata":{{"annotations":{{"example.com/restarted":"now"}}}},"spec":{{"containers":[{{"name":"manager","env":[{{"name":"START_DELAY","value":"{}"}}]}}]}}}}}}}}"#,
        START_DELAY.as_secs()
    );
    let patched = Instant::now();
    cp.kubectl_ok(&["-n", &ns, "patch", "deployment", DEPLOYMENT, "-p", &patch]);
    // The new pod publishes (its holder in the lock) once its operator answers.
    let new = support::wait_for(Duration::from_secs(120), Duration::from_millis(250), || {
        let cm = cp.configmap(&ns, CM)?;
        let record: Value = serde_json::from_str(cm["metadata"]["annotations"][ANNOTATION].as_str()?).ok()?;
        let holder = record["holderIdentity"].as_str()?.to_string();
        (!holder.is_empty() && holder != old).then_some(holder)
    });
    let new = new.unwrap_or_else(|| panic!("no new publisher:\n{}", node.events_text(&ns)));
    let took = patched.elapsed();
    std::thread::sleep(Duration::from_secs(3));
    let text = watch.stop();
    let versions: Vec<Value> = serde_json::Deserializer::from_str(&text).into_iter().map_while(Result::ok).collect();
    let by_new: Vec<Value> = versions
        .iter()
        .filter(|cm| {
            let record = cm["metadata"]["annotations"][ANNOTATION].as_str().unwrap_or_default();
            record.contains(&format!("\"holderIdentity\":\"{new}\""))
        })
        .map(|cm| serde_json::from_str(cm["data"]["status"].as_str().unwrap()).unwrap())
        .collect();
    assert!(!by_new.is_empty(), "versions by {new}: {versions:?}");
    let not_healthy: Vec<&Value> = by_new.iter().filter(|doc| doc["health"] != "healthy").collect();
    let name = new.clone();
    let log = cp.kubectl(&["-n", &ns, "logs", &name, "-c", "opstatus"], None);
    assert!(
        not_healthy.is_empty(),
        "the new pod published before its operator answered: {not_healthy:?}\n{}",
        String::from_utf8_lossy(&log.stdout)
    );
    println!(
        "e2e node operator starting (kubelet {}): the replaced pod's operator answers {START_DELAY:?} after it \
         starts; the new pod {new} published {} versions, all healthy, the first {took:.1?} after the update",
        node.version(),
        by_new.len()
    );
}
