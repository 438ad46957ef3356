//! The real node stays on loopback: kubelet and containerd run under
//! strace (`scripts/node.sh connects`), and every inet or inet6 connect
//! they made went to 127.0.0.0/8 or ::1, among them the API server, the
//! registry (containerd's pull of this test's image) and the Pod's probe
//! port (kubelet's probe); and the host's iptables rules are as they were
//! before the node started (`makeIPTablesUtilChains: false`).

use crate::support;

use std::time::Duration;
use support::node::{Node, shared};

#[test]
fn e2e_node_kubelet_and_containerd_connect_only_to_loopback_and_leave_iptables_alone() {
    let node = shared();
    let cp = node.cp();
    // A Pod to pull and probe, so that the trace has all three kinds.
    let ns = node.quick_start_deployment("node-loopback");
    let pod = node.wait_ready(&ns, "app.kubernetes.io/name=opstatus", 1, Duration::from_secs(120)).remove(0);
    let probe_port = Node::pod_port(&pod, 8090);

    let (on_loopback, connects) = node.connects();
    assert!(on_loopback, "a connect left loopback:\n{connects}");
    let to = |who: &str, port: &str| connects.lines().any(|l| l.starts_with(who) && l.ends_with(&format!(" {port}")));
    let apiserver = cp.port().to_string();
    let registry = node.registry().rsplit(':').next().unwrap().to_string();
    assert!(to("kubelet 127.0.0.1", &apiserver), "kubelet -> API server:\n{connects}");
    assert!(to("kubelet 127.0.0.1", &probe_port.to_string()), "kubelet -> the Pod's probe port:\n{connects}");
    assert!(to("containerd 127.0.0.1", &registry), "containerd -> registry:\n{connects}");

    let (before, now) = (node.iptables_before(), Node::iptables_rules());
    assert_eq!(before, now, "the host's iptables rules changed");
    let mut summary: Vec<String> = connects.lines().map(String::from).collect();
    summary.sort();
    summary.dedup_by(|a, b| a == b);
    let count = |who: &str| connects.lines().filter(|l| l.starts_with(who)).count();
    println!(
        "e2e node loopback (kubelet {}): {} connects by kubelet, {} by containerd, all to loopback; distinct: \
         {summary:?}; iptables unchanged ({} rule lines)",
        node.version(),
        count("kubelet "),
        count("containerd "),
        now.lines().count()
    );
}
