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

/// The node's admission webhook (`failurePolicy: Fail`) serves each
/// connection on its own thread: clients that connect and say nothing (no
/// TLS handshake) do not keep the API server from admitting a Pod. When the
/// handshake ran in the accept loop the first idle client blocked it, and
/// every Pod create failed after the webhook's 10 s timeout.
#[test]
fn e2e_node_idle_clients_of_the_admission_webhook_do_not_block_pod_creation() {
    let node = shared();
    let cp = node.cp();
    let ns = support::control_plane::unique_namespace("node-webhook-idle");
    cp.create_namespace(&ns);
    let idle: Vec<std::net::TcpStream> = (0..3)
        .map(|_| std::net::TcpStream::connect(("127.0.0.1", node.webhook_port())).expect("connect to the webhook"))
        .collect();
    // A server-side dry run goes through admission (the webhook has no side
    // effects) and shows what it made of the Pod.
    let image = node.operator_image();
    let out = cp.kubectl(
        &["-n", &ns, "run", "admitted", "--image", &image, "--port=8080", "--dry-run=server", "-o", "json"],
        None,
    );
    assert!(
        out.status.success(),
        "Pod create refused beside idle webhook clients: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let pod: serde_json::Value = serde_json::from_slice(&out.stdout).expect("the Pod as JSON");
    assert_eq!(pod["spec"]["hostNetwork"], true, "the webhook did not mutate the Pod: {pod}");
    let ports = pod["metadata"]["annotations"]["node.opstatus.test/ports"].as_str().unwrap_or_default();
    assert!(ports.starts_with("8080="), "no port mapping from the webhook: {pod}");
    drop(idle);
}

/// kubelet takes no anonymous request (with anonymous auth and
/// `AlwaysAllow` any local user could list the node's Pods or exec into
/// their containers): without credentials its API answers 401; the
/// control plane's admin, authorised by the API server, is let in; and the
/// API server still reaches kubelet with its client certificate (`kubectl
/// logs`, which the node tests use).
#[test]
fn e2e_node_kubelet_refuses_anonymous_requests_and_serves_the_api_server() {
    let node = shared();
    let cp = node.cp();
    let url = format!("https://127.0.0.1:{}/pods", node.kubelet_port());
    let status = |auth: Option<String>| {
        let mut c = std::process::Command::new("curl");
        c.args(["-sS", "--max-time", "10", "-o", "/dev/null", "-w", "%{http_code}", "--cacert", cp.ca_path()]);
        if let Some(header) = auth {
            c.args(["-H", &header]);
        }
        let out = c.arg(&url).output().expect("run curl");
        assert!(out.status.success(), "curl {url}: {}", String::from_utf8_lossy(&out.stderr));
        String::from_utf8_lossy(&out.stdout).into_owned()
    };
    assert_eq!(status(None), "401", "kubelet answered an anonymous request");
    let admin = format!("Authorization: Bearer {}", cp.admin_token());
    assert_eq!(status(Some(admin)), "200", "kubelet refused the admin");

    let ns = node.quick_start_deployment("node-kubelet-auth");
    let pod = node.wait_ready(&ns, "app.kubernetes.io/name=opstatus", 1, Duration::from_secs(120)).remove(0);
    let name = pod["metadata"]["name"].as_str().unwrap();
    let out = cp.kubectl(&["-n", &ns, "logs", name, "-c", "opstatus"], None);
    assert!(out.status.success(), "kubectl logs through kubelet: {}", String::from_utf8_lossy(&out.stderr));
    assert!(!out.stdout.is_empty(), "kubectl logs returned nothing");
}
