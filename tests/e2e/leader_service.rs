//! `--leader-service`, end to end on the real kube-apiserver: two opstatus
//! processes as the two pods of an operator (`op-a` at 10.0.0.10, `op-b` at
//! 10.0.0.11), with the RBAC of manifests/examples/leader-service (the
//! slice by name: `get, patch, create`), and the test as the stand-in
//! operator renewing its Lease. The EndpointSlice of the selector-less
//! Service points at the leader's pod; after a handover at the new
//! leader's; once the Lease is left unrenewed, at nobody. The audit log
//! counts what it costs: slice writes only on those changes, and while the
//! Lease is merely renewed one read per heartbeat by the leader (the drift
//! check: a slice deleted, pointed elsewhere or with its ports edited is
//! written again), none by the standby. `/leader` is 200 in the leader's
//! pod only.
//!
//! EndpointSlice `discovery.k8s.io/v1` is served from Kubernetes 1.21: on
//! v1.20 the same setup shows the clear error instead (status `degraded`,
//! saying so), and nothing else breaks.

use crate::support;

use opstatus::testing::Client;
use serde_json::{Value, json};
use std::net::SocketAddr;
use std::path::Path;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use support::control_plane::{ControlPlane, Deployed, ROOT, shared};
use support::http::{endpoint_from_log, get};
use support::replicas::{another_replica, bind_role, replica_env};
use support::{RunningAgent, ServiceAccountDir, opstatus_bin, run_to_end, wait_for};

const CM: &str = "kube9-operator-status";
const LEASE: &str = "example-operator-leader";
const SERVICE: &str = "example-operator-leader";
const IP_A: &str = "10.0.0.10";
const IP_B: &str = "10.0.0.11";
/// The Lease's `leaseDurationSeconds`: unrenewed for it and opstatus's
/// 10 s grace, it names no leader.
const LEASE_SECONDS: u64 = 3;

/// The operator's stand-in: renews the Lease for `holder` every 500 ms
/// (a fresh `renewTime`), or leaves it alone while `holder` is `None`.
struct StandIn {
    holder: Arc<Mutex<Option<String>>>,
    renewals: Arc<AtomicU64>,
    stop: Arc<AtomicBool>,
}

impl StandIn {
    fn start(cp: &ControlPlane, ns: &str, holder: &str) -> StandIn {
        let lease = format!(
            "apiVersion: coordination.k8s.io/v1\nkind: Lease\nmetadata: {{name: {LEASE}, namespace: {ns}}}\n\
             spec: {{holderIdentity: {holder}, leaseDurationSeconds: {LEASE_SECONDS}}}\n"
        );
        cp.kubectl_stdin_ok(&["apply", "-f", "-"], Some(&lease));
        let stand_in = StandIn {
            holder: Arc::new(Mutex::new(Some(holder.to_string()))),
            renewals: Arc::new(AtomicU64::new(0)),
            stop: Arc::new(AtomicBool::new(false)),
        };
        let (who, renewals, stop) = (stand_in.holder.clone(), stand_in.renewals.clone(), stand_in.stop.clone());
        let mut client = cp.admin_client();
        let path = format!("/apis/coordination.k8s.io/v1/namespaces/{ns}/leases/{LEASE}");
        std::thread::spawn(move || {
            // Bounded: at most ten minutes of renewals.
            for i in 0..1200u64 {
                if stop.load(Ordering::SeqCst) {
                    return;
                }
                if let Some(holder) = who.lock().unwrap().clone() {
                    let renew = format!("2026-11-28T07:{:02}:{:02}.{:06}Z", (i / 120) % 60, (i / 2) % 60, i % 2);
                    let body = json!({"spec": {"holderIdentity": holder, "renewTime": renew}});
                    if renew_lease(&mut client, &path, &body) {
                        renewals.fetch_add(1, Ordering::SeqCst);
                    }
                }
                std::thread::sleep(Duration::from_millis(500));
            }
        });
        stand_in
    }

    fn hand_over(&self, holder: Option<&str>) {
        *self.holder.lock().unwrap() = holder.map(String::from);
    }

    /// Waits until the Lease was renewed `n` more times.
    fn renewed(&self, n: u64) {
        let from = self.renewals.load(Ordering::SeqCst);
        let done = wait_for(Duration::from_secs(30), Duration::from_millis(100), || {
            (self.renewals.load(Ordering::SeqCst) >= from + n).then_some(())
        });
        assert!(done.is_some(), "the stand-in could not renew the Lease {n} times");
    }
}

fn renew_lease(client: &mut Client, path: &str, body: &Value) -> bool {
    client.merge_patch(path, body.to_string().as_bytes(), "renew the Lease").is_ok()
}

impl Drop for StandIn {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::SeqCst);
    }
}

/// Applies the example's Service and its Role (bound to `opstatus`), lets
/// both pods' accounts read the Lease, and binds the second one too.
fn two_pods(label: &str) -> (&'static ControlPlane, Deployed, ServiceAccountDir, String) {
    let cp = shared();
    let pod = cp.deploy(label);
    let ns = pod.namespace.as_str();
    let example = Path::new(ROOT).join("manifests/examples/leader-service");
    for file in ["service.yaml", "role-leader-service.yaml"] {
        cp.kubectl_ok(&["-n", ns, "apply", "-f", example.join(file).to_str().unwrap()]);
    }
    let lease_role = Path::new(ROOT).join("manifests/examples/sidecar/role-leader-lease.yaml");
    cp.kubectl_ok(&["-n", ns, "apply", "-f", lease_role.to_str().unwrap()]);
    let (sa_b, user_b) = another_replica(cp, &pod, "opstatus-b");
    bind_role(cp, ns, "opstatus-b", "opstatus-leader-service");
    bind_role(cp, ns, "opstatus-b", "opstatus-leader-lease");
    (cp, pod, sa_b, user_b)
}

fn start(cp: &ControlPlane, sa: &ServiceAccountDir, pod: &str, ip: &str) -> (RunningAgent, SocketAddr) {
    let mut env = replica_env(cp, sa, pod);
    env.push(("POD_IP".into(), ip.into()));
    let args = [
        "run",
        "--interval",
        "2s",
        "--check-interval",
        "1s",
        "--listen",
        "127.0.0.1:0",
        "--follow-leader-lease",
        LEASE,
        "--leader-service",
        SERVICE,
        "--leader-service-port",
        "http:8080/TCP",
    ];
    let agent = RunningAgent::start(&opstatus_bin(), &args, &env);
    let addr = wait_for(Duration::from_secs(10), Duration::from_millis(20), || endpoint_from_log(&agent.stderr()));
    let addr = addr.unwrap_or_else(|| panic!("{pod}: no endpoint:\n{}", agent.stderr()));
    (agent, addr)
}

/// The slice as the API server has it (`None` as well when it cannot be
/// read: a busy API server's slow answer is polled again).
fn slice(client: &mut Client, ns: &str) -> Option<Value> {
    let path = format!("/apis/discovery.k8s.io/v1/namespaces/{ns}/endpointslices/{SERVICE}");
    let body = client.get_path(&path, "get the EndpointSlice").ok()??;
    Some(serde_json::from_slice(&body).unwrap())
}

/// The addresses the slice points at.
fn addresses(client: &mut Client, ns: &str) -> Option<Vec<String>> {
    let slice = slice(client, ns)?;
    let endpoints = slice["endpoints"].as_array().cloned().unwrap_or_default();
    let addresses = endpoints.iter().flat_map(|e| e["addresses"].as_array().cloned().unwrap_or_default());
    Some(addresses.map(|a| a.as_str().unwrap().to_string()).collect())
}

fn wait_for_addresses(client: &mut Client, ns: &str, want: &[&str], logs: &[&RunningAgent]) {
    let seen = wait_for(Duration::from_secs(40), Duration::from_millis(100), || {
        (addresses(client, ns)? == want).then_some(())
    });
    let logs: Vec<String> = logs.iter().map(|a| a.stderr()).collect();
    assert!(
        seen.is_some(),
        "the slice never said {want:?} (it says {:?}):\n{}",
        addresses(client, ns),
        logs.join("\n--\n")
    );
}

/// How many times `user` read the operator's Lease, as the audit log has it.
fn lease_reads(cp: &ControlPlane, user: &str) -> usize {
    cp.audit_events(user).iter().filter(|e| e.verb == "get" && e.uri.contains("/leases/")).count()
}

/// Requests `user` made on endpointslices, as the audit log has them.
fn slice_requests(cp: &ControlPlane, user: &str) -> Vec<String> {
    let events = cp.audit_events(user).into_iter().filter(|e| e.uri.contains("/endpointslices"));
    events.map(|e| format!("{} {}", e.verb, e.code)).collect()
}

#[test]
fn e2e_the_leaders_service_points_at_the_leaders_pod_follows_a_handover_and_empties_when_the_lease_lapses() {
    let (cp, pod, sa_b, user_b) = two_pods("leader-service");
    let ns = pod.namespace.as_str();
    let mut client = cp.admin_client();
    let stand_in = StandIn::start(cp, ns, "op-a_4f1c");
    let (a, addr_a) = start(cp, &pod.sa, "op-a", IP_A);
    let (b, addr_b) = start(cp, &sa_b, "op-b", IP_B);

    if cp.is_debian_1_20() {
        // No discovery.k8s.io/v1 here: the leader's sidecar says why, in
        // its log and in the status it publishes; nothing else breaks.
        let said = "does not serve discovery.k8s.io/v1 EndpointSlices; --leader-service needs Kubernetes 1.21 or later";
        let logged = wait_for(Duration::from_secs(20), Duration::from_millis(100), || {
            let doc = cp.status_document(ns, CM)?;
            (a.stderr().contains(said) && doc["error"].as_str()?.contains(said)).then_some(doc)
        });
        let doc = logged.unwrap_or_else(|| panic!("no clear error on {}:\n{}", cp.git_version(), a.stderr()));
        assert_eq!(doc["health"], "degraded", "{doc}");
        assert_eq!(get(addr_a, "/leader").0, 200, "the Lease is still followed");
        assert_eq!(get(addr_a, "/readyz").0, 200, "readiness is not touched");
        return;
    }

    // op-a leads: the slice points at its pod, on the Service's port name.
    wait_for_addresses(&mut client, ns, &[IP_A], &[&a, &b]);
    let written = slice(&mut client, ns).unwrap();
    assert_eq!(written["addressType"], "IPv4");
    assert_eq!(written["ports"], json!([{"name": "http", "port": 8080, "protocol": "TCP"}]));
    assert_eq!(written["metadata"]["labels"]["kubernetes.io/service-name"], SERVICE);
    assert_eq!(written["metadata"]["labels"]["endpointslice.kubernetes.io/managed-by"], "opstatus");
    assert_eq!(written["endpoints"][0]["targetRef"]["name"], "op-a");
    assert_eq!(written["endpoints"][0]["conditions"]["ready"], true);
    // What `/leader` answers is set in each pod's first check, just after
    // its slice request: a moment after the slice shows, on a busy machine.
    let answers = || {
        let (a, b) = (get(addr_a, "/leader"), get(addr_b, "/leader"));
        ((a.0, a.1), (b.0, b.1))
    };
    let leads_a =
        ((200, "leader: this pod (op-a) leads\n".to_string()), (503, "not the leader: op-a leads\n".to_string()));
    let said = wait_for(Duration::from_secs(10), Duration::from_millis(50), || (answers() == leads_a).then_some(()));
    assert!(said.is_some(), "/leader: {:?}", answers());
    // Both pods are Ready (once their first tick is served: the slice is
    // written in the check before it): /leader is no readiness.
    let ready = wait_for(Duration::from_secs(10), Duration::from_millis(50), || {
        ((get(addr_a, "/readyz").0, get(addr_b, "/readyz").0) == (200, 200)).then_some(())
    });
    assert!(ready.is_some(), "{:?} {:?}", get(addr_a, "/readyz"), get(addr_b, "/readyz"));

    // While the Lease is only renewed, the slice costs one read per
    // heartbeat (2 s) by the leader, and nothing else, from either pod.
    let version = written["metadata"]["resourceVersion"].clone();
    let before = (slice_requests(cp, &pod.user), slice_requests(cp, &user_b));
    let (lease_reads_before, watched) = (lease_reads(cp, &pod.user), Instant::now());
    stand_in.renewed(10);
    assert_eq!(slice(&mut client, ns).unwrap()["metadata"]["resourceVersion"], version);
    let a_reads: Vec<String> = slice_requests(cp, &pod.user).split_off(before.0.len());
    let heartbeats = watched.elapsed().as_secs_f64() / 2.0;
    assert!(a_reads.iter().all(|r| r == "get 200"), "{a_reads:?}");
    assert!(a_reads.len() as f64 <= heartbeats.ceil() + 1.0, "{} reads in {heartbeats:.1} heartbeats", a_reads.len());
    assert_eq!(slice_requests(cp, &user_b), before.1, "the standby leaves the slice alone");
    // The Service reads who leads from the publisher's read of the Lease:
    // one read per check (a second of checks), not two.
    let reads = lease_reads(cp, &pod.user) - lease_reads_before;
    let checks = watched.elapsed().as_secs_f64().ceil() as usize + 2;
    assert!(reads <= checks, "{reads} Lease reads in {:?} of 1 s checks", watched.elapsed());
    // What it cost to get here: one apply that created the slice (name-
    // restricted `create`) from the leader; one read from the standby.
    assert_eq!(before.0.first().map(String::as_str), Some("patch 201"), "{}", a.stderr());
    assert!(before.0[1..].iter().all(|r| r == "get 200"), "{before:?}");
    assert!(before.1.iter().all(|r| r == "get 404" || r == "get 200") && before.1.len() <= 1, "{before:?}");

    // Someone deletes the slice, points it elsewhere, edits its ports: the
    // leader's drift check writes it again within a heartbeat or two.
    let path = format!("/apis/discovery.k8s.io/v1/namespaces/{ns}/endpointslices/{SERVICE}");
    cp.kubectl_ok(&["-n", ns, "delete", "endpointslice", SERVICE]);
    wait_for_addresses(&mut client, ns, &[IP_A], &[&a, &b]);
    let elsewhere = json!({"endpoints": [{"addresses": ["10.9.9.9"], "conditions": {"ready": true}}]});
    client.merge_patch(&path, elsewhere.to_string().as_bytes(), "point the slice elsewhere").unwrap();
    assert_eq!(addresses(&mut client, ns), Some(vec!["10.9.9.9".to_string()]));
    wait_for_addresses(&mut client, ns, &[IP_A], &[&a, &b]);
    let ports = json!({"ports": [{"name": "http", "port": 9999, "protocol": "TCP"}]});
    client.merge_patch(&path, ports.to_string().as_bytes(), "edit the slice's ports").unwrap();
    let repaired = wait_for(Duration::from_secs(20), Duration::from_millis(100), || {
        let ports = slice(&mut client, ns)?["ports"].clone();
        (ports == json!([{"name": "http", "port": 8080, "protocol": "TCP"}])).then_some(())
    });
    assert!(repaired.is_some(), "the ports were never repaired: {:?}\n{}", slice(&mut client, ns), a.stderr());
    assert!(a.logged("is written again: it had been changed or deleted"), "{}", a.stderr());
    assert_eq!(get(addr_a, "/leader").0, 200);

    // A handover: op-b's sidecar rewrites it within a check or two.
    stand_in.hand_over(Some("op-b_9d2e"));
    wait_for_addresses(&mut client, ns, &[IP_B], &[&a, &b]);
    let leads = wait_for(Duration::from_secs(10), Duration::from_millis(100), || {
        (get(addr_a, "/leader").0 == 503 && get(addr_b, "/leader").0 == 200).then_some(())
    });
    assert!(leads.is_some(), "/leader did not follow: {:?} {:?}", get(addr_a, "/leader"), get(addr_b, "/leader"));
    assert_eq!(get(addr_a, "/leader").1, "not the leader: op-b leads\n");
    let a_until_handover = slice_requests(cp, &pod.user).len();
    let after_handover = slice_requests(cp, &user_b);
    assert_eq!(after_handover.last().map(String::as_str), Some("patch 200"), "{after_handover:?}");

    // The Lease left unrenewed: after its 3 s and opstatus's 10 s grace the
    // slice points at nobody, emptied by the sidecar whose pod it named.
    stand_in.hand_over(None);
    wait_for_addresses(&mut client, ns, &[], &[&a, &b]);
    assert!(b.logged("is emptied: the operator's Lease names no live leader"), "{}", b.stderr());
    // op-a, which led before op-b, reads it once (is it still its pod?) and
    // leaves it: it never writes once it lost the lead.
    let a_since: Vec<String> = slice_requests(cp, &pod.user).split_off(a_until_handover);
    assert!(a_since.len() <= 1 && a_since.iter().all(|r| r == "get 200"), "{a_since:?}");
    let (code, body, _) = get(addr_b, "/leader");
    assert!(code == 503 && body.starts_with("no leader: The operator's leader is not renewing its Lease"), "{body}");
    assert_eq!(get(addr_a, "/leader").0, 503);
    assert_eq!((get(addr_a, "/readyz").0, get(addr_b, "/readyz").0), (200, 200));

    // Renewed again by op-a: it points at op-a once more.
    stand_in.hand_over(Some("op-a_4f1c"));
    wait_for_addresses(&mut client, ns, &[IP_A], &[&a, &b]);
    assert_eq!(get(addr_a, "/leader").0, 200);
}

#[test]
fn e2e_the_leaders_service_needs_the_lease_and_the_pods_ip_or_it_does_not_start() {
    let cp = shared();
    let pod = cp.deploy("leader-service-usage");
    let base = ["once", "--leader-service", SERVICE, "--leader-service-port", "http:8080"];
    let env = replica_env(cp, &pod.sa, "op-a");
    let cases: [(&[&str], Option<&str>, &str); 5] = [
        (&[], Some(IP_A), "--leader-service points its Service at the operator's leader: give --follow-leader-lease"),
        (
            &["--follow-leader-lease", LEASE],
            None,
            "--leader-service points its Service at this pod's IP: POD_IP is not set",
        ),
        (&["--follow-leader-lease", LEASE], Some("10.0.0"), "--leader-service: POD_IP \"10.0.0\" is not an IP address"),
        (&["--follow-leader-lease", LEASE], Some("127.0.0.1"), "the API server refuses it in an EndpointSlice"),
        (
            &["--follow-leader-lease", LEASE],
            Some("::ffff:10.0.0.5"),
            "POD_IP \"::ffff:10.0.0.5\" is an IPv4 address written as IPv6 (IPv4-mapped): give it as 10.0.0.5",
        ),
    ];
    for (extra, ip, said) in cases {
        let mut env = env.clone();
        env.extend(ip.map(|ip| ("POD_IP".to_string(), ip.to_string())));
        let args = [&base[..], extra].concat();
        let out = run_to_end(&opstatus_bin(), &args, &env, Duration::from_secs(20));
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {stderr}");
        assert!(stderr.contains(said), "{args:?}: {stderr}");
    }
    assert!(cp.configmap(&pod.namespace, CM).is_none(), "nothing written before the configuration is good");
}
