//! What the probe tests share: the fake API server set up with Foos and an
//! OperatorCondition ([`fake_with_foos`]), a real control plane's
//! namespace set up the same way ([`deploy_probed`]), the agent's
//! environment and arguments for either, the wait for `Upgradeable`, and a
//! loopback proxy that hands the API server's answers on at a set pace
//! ([`SlowProxy`]), so a list answer takes seconds to arrive however fast
//! or busy the machine is.
//!
//! The proxy forwards bytes, not requests: TLS stays end to end between
//! opstatus and the server (the server's certificate names 127.0.0.1, as
//! the proxy's address does). Its threads end, and the connections through
//! it close, when it is dropped.

use super::control_plane::{ControlPlane, Deployed};
use super::fake_apiserver::FakeApiServer;
use super::resources::{condition, find};
use super::{RunningAgent, ServiceAccountDir, pod_env, wait_for};
use serde_json::{Value, json};
use std::io::{Read, Write};
use std::net::{Shutdown, SocketAddr, TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::thread;
use std::time::Duration;

/// The probed Foos of the fake API server (namespace `ops`).
pub const FOOS: &str = "/apis/example.com/v1/namespaces/ops/foos";
/// The fake API server's OperatorCondition, `ops/op.v1`.
pub const OC: &str = "/apis/operators.coreos.com/v2/namespaces/ops/operatorconditions/op.v1";

/// A Foo in `ops` whose `Migrating` condition is `migrating`.
pub fn foo(name: &str, migrating: &str) -> Value {
    json!({"metadata": {"name": name, "namespace": "ops"}, "status": {"conditions": [condition("Migrating", migrating)]}})
}

/// A fake API server accepting `token` with the Foo CRD (annotated
/// `Upgradeable=!Migrating`), `foos` in `ops`, and the OperatorCondition
/// [`OC`] carrying the operator's own `conditions`; and the ServiceAccount
/// directory that reaches it.
pub fn fake_with_foos(
    token: &str,
    foos: impl IntoIterator<Item = Value>,
    conditions: Value,
) -> (FakeApiServer, ServiceAccountDir) {
    let api = FakeApiServer::start(token);
    let sa = ServiceAccountDir::new(token, &api.pki.ca_pem, "ops");
    api.put_foo_crd(json!({"olm.operatorframework.io/condition.Upgradeable": "!Migrating"}));
    for resource in foos {
        let name = resource["metadata"]["name"].as_str().unwrap().to_string();
        api.put_custom(&format!("{FOOS}/{name}"), resource);
    }
    api.put_custom(
        OC,
        json!({"apiVersion": "operators.coreos.com/v2", "kind": "OperatorCondition",
               "metadata": {"name": "op.v1", "namespace": "ops"}, "spec": {"conditions": conditions}}),
    );
    (api, sa)
}

/// The agent's environment for the fake API server at `port`: the Pod's,
/// and the OperatorCondition [`OC`].
pub fn fake_env(port: u16, sa: &ServiceAccountDir) -> Vec<(String, String)> {
    let mut env = pod_env(port, sa);
    env.push(("OPERATOR_CONDITION_NAME".into(), "op.v1".into()));
    env
}

/// `run` at `interval`, checking every `check`, probing the Foos of `ops`
/// as their CRD's annotations say, then `more`.
pub fn fake_args<'a>(interval: &'a str, check: &'a str, more: &[&'a str]) -> Vec<&'a str> {
    let mut args = vec!["run", "--interval", interval, "--check-interval", check];
    args.extend(["--probe-from-crd-annotations", "foos.example.com", "--probe-namespace", "ops"]);
    args.extend(more);
    args
}

/// The fake API server's OperatorCondition's `Upgradeable` once its status
/// is `status`, within `timeout`; panics with the agent's log if never.
pub fn fake_upgradeable(api: &FakeApiServer, agent: &RunningAgent, status: &str, timeout: Duration) -> Value {
    let seen = wait_for(timeout, Duration::from_millis(20), || {
        let oc = api.custom(OC)?;
        find(&oc["spec"]["conditions"], "Upgradeable").filter(|c| c["status"] == status).cloned()
    });
    seen.unwrap_or_else(|| panic!("never Upgradeable={status}\n{}", agent.stderr()))
}

/// A real control plane's namespace for opstatus (`label`) with the CRD
/// `crd` installed and an OperatorCondition `name` it may update as OLM
/// grants (RBAC for the probed resources is the caller's).
pub fn deploy_probed(cp: &ControlPlane, label: &str, crd: &str, name: &str) -> Deployed {
    cp.install_crd(crd);
    cp.install_crd("operatorconditions.operators.coreos.com");
    let pod = cp.deploy(label);
    cp.grant_operator_condition_as_olm(&pod.namespace, name);
    cp.create_operator_condition(&pod.namespace, name, &[]);
    pod
}

/// The agent's environment in `pod`, the API server at `port` (the
/// control plane's, or a proxy's), its OperatorCondition `name`.
pub fn probed_env(port: u16, pod: &Deployed, name: &str) -> Vec<(String, String)> {
    let mut env = pod_env(port, &pod.sa);
    env.push(("OPERATOR_CONDITION_NAME".into(), name.into()));
    env
}

/// `run` at `interval`, checking every second, with `--probe probe` in
/// namespace `ns`, then `more`.
pub fn probed_args<'a>(interval: &'a str, probe: &'a str, ns: &'a str, more: &[&'a str]) -> Vec<&'a str> {
    let mut args = vec!["run", "--interval", interval, "--check-interval", "1s", "--probe", probe];
    args.extend(["--probe-namespace", ns]);
    args.extend(more);
    args
}

/// The OperatorCondition `ns/name`'s `Upgradeable` once its status is
/// `status`, within `timeout`.
pub fn probed_upgradeable(cp: &ControlPlane, ns: &str, name: &str, status: &str, timeout: Duration) -> Option<Value> {
    wait_for(timeout, Duration::from_millis(100), || {
        let oc = cp.operator_condition(ns, name);
        find(&oc["spec"]["conditions"], "Upgradeable").filter(|c| c["status"] == status).cloned()
    })
}

/// How often the proxy hands a slice of an answer on.
const TICK: Duration = Duration::from_millis(20);

/// A proxy to `127.0.0.1:to` that passes what the client sends at once and
/// what the server answers at `bytes_per_second` at most.
pub struct SlowProxy {
    port: u16,
    stop: Arc<AtomicBool>,
    open: Arc<Mutex<Vec<TcpStream>>>,
}

impl SlowProxy {
    /// Listens on 127.0.0.1 (a free port).
    pub fn start(to: u16, bytes_per_second: usize) -> SlowProxy {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        listener.set_nonblocking(true).unwrap();
        let port = listener.local_addr().unwrap().port();
        let stop = Arc::new(AtomicBool::new(false));
        let open: Arc<Mutex<Vec<TcpStream>>> = Arc::default();
        let (s, o) = (stop.clone(), open.clone());
        let target = SocketAddr::from(([127, 0, 0, 1], to));
        let slice = (bytes_per_second * TICK.as_millis() as usize / 1000).max(1);
        thread::spawn(move || {
            while !s.load(Ordering::SeqCst) {
                let Ok((client, _)) = listener.accept() else {
                    thread::sleep(Duration::from_millis(10));
                    continue;
                };
                client.set_nonblocking(false).unwrap();
                let Ok(server) = TcpStream::connect_timeout(&target, Duration::from_secs(2)) else { continue };
                let mut open = o.lock().unwrap();
                open.retain(|s| s.peer_addr().is_ok());
                open.push(client.try_clone().unwrap());
                open.push(server.try_clone().unwrap());
                pipe(client.try_clone().unwrap(), server.try_clone().unwrap(), 16 * 1024, Duration::ZERO);
                pipe(server, client, slice, TICK);
            }
        });
        SlowProxy { port, stop, open }
    }

    pub fn port(&self) -> u16 {
        self.port
    }
}

impl Drop for SlowProxy {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::SeqCst);
        for s in self.open.lock().unwrap().drain(..) {
            let _ = s.shutdown(Shutdown::Both);
        }
    }
}

/// Copies `from` to `to` on a thread, at most `slice` bytes per `pause`,
/// until either side closes; what was read before `from` closed is all
/// handed on first (a server that cut its answer is seen to cut it there).
fn pipe(mut from: TcpStream, mut to: TcpStream, slice: usize, pause: Duration) {
    thread::spawn(move || {
        let mut buf = vec![0u8; slice];
        while let Ok(n) = from.read(&mut buf) {
            if n == 0 || to.write_all(&buf[..n]).is_err() {
                break;
            }
            thread::sleep(pause);
        }
        let _ = to.shutdown(Shutdown::Both);
        let _ = from.shutdown(Shutdown::Both);
    });
}
