//! End to end on a real node: what kubelet enforces of the shipped
//! Deployment (manifests/examples/quick-start/deployment.yaml, only its
//! image changed to the node registry's), read from the running opstatus
//! process itself (/proc and its cgroup): user 65532, no capabilities, no
//! new privileges, seccomp RuntimeDefault, a read-only root, the memory
//! limit and CPU request. Then `kubectl delete pod`: kubelet's SIGTERM makes
//! opstatus write its final status and exit 0 well within the grace period,
//! as containerd records the task's exit and kubelet its stop (no SIGKILL).

use crate::support;

use serde_json::Value;
use std::io::{BufRead, BufReader};
use std::time::{Duration, Instant};
use support::node::{container_status, shared, tail};

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
    let started = Instant::now();
    let ns = node.quick_start_deployment("node-pod");
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

    // `kubectl delete pod` with no replacement (the Deployment and its
    // ReplicaSet are deleted first, the Pod orphaned). kubelet v1.20 does not keep a deleted Pod's container status
    // (it reports "ContainerStatusUnknown", exit code 137, for any container
    // of a deleted Pod): how the container ended is read from the runtime's
    // own record instead, containerd's task exit event, timed as it arrives,
    // and kubelet's log says whether the stop needed a SIGKILL.
    cp.kubectl_ok(&["-n", &ns, "delete", "deployment", "opstatus", "--cascade=orphan"]);
    cp.kubectl_ok(&["-n", &ns, "delete", "replicaset", "-l", "app.kubernetes.io/name=opstatus", "--cascade=orphan"]);
    let container_id = container_status(&pod, "opstatus")["containerID"].as_str().unwrap().to_string();
    let id = container_id.trim_start_matches("containerd://").to_string();
    let mut events = node.containerd_events();
    let stream = events.stdout.take().unwrap();
    let exits = std::thread::spawn({
        let id = id.clone();
        move || {
            // The first exit event of the container's task, and when it came.
            BufReader::new(stream)
                .lines()
                .map_while(Result::ok)
                .find(|l| l.contains("/tasks/exit") && l.contains(&format!("\"container_id\":\"{id}\"")))
                .map(|l| (l, Instant::now()))
        }
    });
    // What opstatus logs on its way out, for the message of a failure below.
    let log = cp.kubectl_follow(&["-n", &ns, "logs", "-f", &name, "-c", "opstatus", "--since=10m"]);
    std::thread::sleep(Duration::from_secs(1));
    let deleted = Instant::now();
    cp.kubectl_ok(&["-n", &ns, "delete", "pod", &name, "--wait=true", "--timeout=120s"]);
    let gone_after = deleted.elapsed();
    let _ = events.kill();
    let _ = events.wait();
    let log = log.stop();
    let (exit, exited) = exits.join().unwrap().expect("containerd reported the task's exit");
    let exit: Value = serde_json::from_str(&exit[exit.find('{').unwrap()..]).unwrap();
    // Protobuf's JSON leaves a zero status out.
    assert_eq!(exit["exit_status"].as_u64().unwrap_or(0), 0, "exit 0 on SIGTERM: {exit}");
    let took = exited.duration_since(deleted);
    let grace = pod["spec"]["terminationGracePeriodSeconds"].as_u64().unwrap();
    assert!(took < Duration::from_secs(grace), "exited {took:?} after the delete; grace {grace} s");
    let kubelet = node.kubelet_log();
    assert!(
        kubelet.lines().any(|l| l.contains("exited normally") && l.contains(&container_id)),
        "kubelet did not log that {container_id} exited normally (a SIGKILL?)"
    );
    let doc = cp.status_document(&ns, "kube9-operator-status").unwrap();
    assert_eq!(
        (doc["health"].as_str(), doc["error"].as_str()),
        (Some("unhealthy"), Some("Shutting down")),
        "{doc}\nopstatus's log:\n{}",
        tail(&log, 30)
    );
    println!(
        "e2e node pod (kubelet {}): Ready {:.1} s after apply; uid 65532, no capabilities, NoNewPrivs, seccomp \
         filter, read-only root, memory limit 16Mi, 5 cpu shares, {rss}; after `kubectl delete pod`: exit 0 within \
         {took:?} of the delete (grace {grace} s), final status written, pod gone in {:.1} s",
        node.version(),
        ready_after.as_secs_f64(),
        gone_after.as_secs_f64()
    );
}
