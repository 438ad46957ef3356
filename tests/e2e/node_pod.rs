//! End to end on a real node: what kubelet enforces of the shipped
//! Deployment (manifests/examples/quick-start/deployment.yaml, only its
//! image changed to the node registry's), read from the running opstatus
//! process itself (/proc and its cgroup): user 65532, no capabilities, no
//! new privileges, seccomp RuntimeDefault, a read-only root, the memory
//! limit and CPU request. Then `kubectl delete pod`: kubelet's SIGTERM makes
//! opstatus write its final status and exit 0 well within the grace period,
//! as kubelet itself records it (the container's terminated state).

use crate::support;

use serde_json::Value;
use std::io::Read;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};
use support::control_plane::{ROOT, unique_namespace};
use support::node::{container_status, shared};

fn proc_field(status: &str, key: &str) -> String {
    status
        .lines()
        .find_map(|l| l.strip_prefix(&format!("{key}:")))
        .unwrap_or_else(|| panic!("no {key} in /proc/PID/status"))
        .split_whitespace()
        .collect::<Vec<_>>()
        .join(" ")
}

/// The cgroup v1 directory of `pid` in `controller`'s hierarchy.
fn cgroup_dir(pid: u32, controller: &str) -> String {
    let cgroups = std::fs::read_to_string(format!("/proc/{pid}/cgroup")).unwrap();
    let path = cgroups
        .lines()
        .find_map(|l| {
            let mut parts = l.splitn(3, ':');
            let (_, controllers, path) = (parts.next()?, parts.next()?, parts.next()?);
            controllers.split(',').any(|c| c == controller).then(|| path.to_string())
        })
        .unwrap_or_else(|| panic!("no {controller} cgroup for {pid}:\n{cgroups}"));
    let mount = std::fs::read_dir("/sys/fs/cgroup")
        .unwrap()
        .filter_map(|e| e.ok())
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .find(|n| n.split(',').any(|c| c == controller))
        .unwrap_or_else(|| panic!("{controller} not mounted"));
    format!("/sys/fs/cgroup/{mount}{path}")
}

#[test]
fn e2e_node_kubelet_enforces_the_shipped_security_context_and_sigterm_writes_the_final_status() {
    let node = shared();
    let cp = node.cp();
    let ns = unique_namespace("node-pod");
    cp.create_namespace(&ns);
    cp.apply_base_manifests(&ns);
    let image = format!("{}:{}", node.opstatus_image(), env!("CARGO_PKG_VERSION"));
    let deployment = std::fs::read_to_string(format!("{ROOT}/manifests/examples/quick-start/deployment.yaml"))
        .unwrap()
        .replace("image: opstatus:0.1.0", &format!("image: {image}"));
    assert!(deployment.contains(&image));
    cp.kubectl_stdin_ok(&["-n", &ns, "apply", "-f", "-"], Some(&deployment));
    let started = Instant::now();
    let pod = node.wait_ready(&ns, "app.kubernetes.io/name=opstatus", 1, Duration::from_secs(120)).remove(0);
    let ready_after = started.elapsed();
    let name = pod["metadata"]["name"].as_str().unwrap().to_string();

    // What kubelet and the runtime made of the security context and resources.
    let pid = node.container_pid(&pod, "opstatus");
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
    assert_eq!(proc_field(&status, "Uid"), "65532 65532 65532 65532");
    assert_eq!(proc_field(&status, "Gid"), "65532 65532 65532 65532");
    for caps in ["CapInh", "CapPrm", "CapEff", "CapBnd", "CapAmb"] {
        assert_eq!(proc_field(&status, caps), "0000000000000000", "{caps}: all capabilities dropped");
    }
    assert_eq!(proc_field(&status, "NoNewPrivs"), "1", "allowPrivilegeEscalation: false");
    assert_eq!(proc_field(&status, "Seccomp"), "2", "seccomp RuntimeDefault: a filter");
    let mountinfo = std::fs::read_to_string(format!("/proc/{pid}/mountinfo")).unwrap();
    let root = mountinfo.lines().find(|l| l.split_whitespace().nth(4) == Some("/")).expect("a root mount");
    assert!(root.split_whitespace().nth(5).unwrap().split(',').any(|o| o == "ro"), "read-only root: {root}");
    let run = mountinfo.lines().find(|l| l.split_whitespace().nth(4) == Some("/run/opstatus")).expect("the emptyDir");
    assert!(run.contains("tmpfs"), "medium: Memory: {run}");
    let memory = cgroup_dir(pid, "memory");
    let limit = std::fs::read_to_string(format!("{memory}/memory.limit_in_bytes")).unwrap();
    assert_eq!(limit.trim(), (16 * 1024 * 1024).to_string(), "limits.memory 16Mi");
    let shares = std::fs::read_to_string(format!("{}/cpu.shares", cgroup_dir(pid, "cpu"))).unwrap();
    assert_eq!(shares.trim(), "5", "requests.cpu 5m is 5 shares");
    let rss = proc_field(&status, "VmRSS");

    // `kubectl delete pod` with no replacement (the Deployment is orphaned
    // first): kubelet's record of how the container ended, from a watch.
    cp.kubectl_ok(&["-n", &ns, "delete", "deployment", "opstatus", "--cascade=orphan"]);
    let mut watch = Command::new("kubectl")
        .args(["--kubeconfig", cp.kubeconfig(), "-n", &ns, "get", "pod", &name, "--watch", "-o", "json"])
        .args(["--request-timeout=0"])
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .stdin(Stdio::null())
        .spawn()
        .unwrap();
    let mut stream = watch.stdout.take().unwrap();
    let reader = std::thread::spawn(move || {
        let mut text = String::new();
        let _ = stream.read_to_string(&mut text);
        text
    });
    std::thread::sleep(Duration::from_secs(1));
    let deleted = Instant::now();
    cp.kubectl_ok(&["-n", &ns, "delete", "pod", &name, "--wait=true", "--timeout=120s"]);
    let gone_after = deleted.elapsed();
    let _ = watch.kill();
    let _ = watch.wait();
    let text = reader.join().unwrap();
    let versions: Vec<Value> = serde_json::Deserializer::from_str(&text).into_iter().map_while(Result::ok).collect();
    let terminated = versions
        .iter()
        .rev()
        .map(|p| container_status(p, "opstatus")["state"]["terminated"].clone())
        .find(|t| t.is_object())
        .unwrap_or_else(|| {
            let states: Vec<String> = versions
                .iter()
                .map(|p| format!("{} {}", p["metadata"]["resourceVersion"], container_status(p, "opstatus")))
                .collect();
            panic!("kubelet recorded no termination in {} versions:\n{}", versions.len(), states.join("\n"))
        });
    assert_eq!(terminated["exitCode"], 0, "exit 0 on SIGTERM: {terminated}");
    let grace = pod["spec"]["terminationGracePeriodSeconds"].as_u64().unwrap();
    let last = versions.last().unwrap();
    // The API server sets deletionTimestamp to the delete's time plus the grace period.
    let asked = opstatus::testing::parse_rfc3339(last["metadata"]["deletionTimestamp"].as_str().unwrap()).unwrap()
        - Duration::from_secs(grace);
    let took = opstatus::testing::parse_rfc3339(terminated["finishedAt"].as_str().unwrap())
        .unwrap()
        .duration_since(asked)
        .unwrap_or_default();
    assert!(took < Duration::from_secs(grace), "exited {took:?} after the delete; grace {grace} s");
    let doc = cp.status_document(&ns, "kube9-operator-status").unwrap();
    assert_eq!((doc["health"].as_str(), doc["error"].as_str()), (Some("unhealthy"), Some("Shutting down")), "{doc}");
    println!(
        "e2e node pod (kubelet {}): Ready {:.1} s after apply; uid 65532, no capabilities, NoNewPrivs, seccomp \
         filter, read-only root, memory limit 16Mi, 5 cpu shares, {rss}; after `kubectl delete pod`: exit 0 within \
         {took:?} of the delete (grace {grace} s), final status written, pod gone in {:.1} s",
        node.version(),
        ready_after.as_secs_f64(),
        gone_after.as_secs_f64()
    );
}
