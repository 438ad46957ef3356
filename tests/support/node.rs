//! A real single-node cluster for the end-to-end tests that need kubelet
//! (`tests/e2e/node_*.rs`): `scripts/node.sh up` (containerd, a registry on
//! 127.0.0.1, kube-controller-manager, kube-scheduler and kubelet v1.20.2
//! beside the control plane of `scripts/control-plane.sh`), started once
//! per test binary; each test works in its own namespace. Its watchdog
//! takes the node down by PID when the test process exits.
//!
//! The images the tests run are built here once, with buildah, and pushed
//! to the node's registry: opstatus's from the Containerfile's offline path
//! (the static binary, as `tests/it/image.rs` builds it), and a stand-in
//! operator (`tests/fixtures/node/operator.c`, static, FROM scratch).
//!
//! The node has no pod network: its admission webhook puts every Pod on
//! the host's network and maps each port the Pod uses to a free one on
//! 127.0.0.1 (`scripts/lib/node-webhook.py`); [`Node::pod_port`] reads the
//! mapping.

use super::TempDir;
use super::control_plane::{ControlPlane, ROOT, static_bin};
use serde_json::Value;
use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::OnceLock;
use std::time::{Duration, Instant};

pub struct Node {
    dir: TempDir,
    env: HashMap<String, String>,
    cp: ControlPlane,
    iptables_before: String,
    /// How long `node.sh up` and the image builds took.
    pub up_seconds: f64,
    pub images_seconds: f64,
}

fn script() -> PathBuf {
    Path::new(ROOT).join("scripts/node.sh")
}

/// The node's image of opstatus, without the tag (`IMAGE` in the README).
pub const OPSTATUS_REPOSITORY: &str = "team/opstatus";
/// The stand-in operator's image, without the registry.
pub const OPERATOR_IMAGE: &str = "sample-operator:2.0.1";

/// The one node of this test binary.
pub fn shared() -> &'static Node {
    // A node that failed to start fails every test that needs it, started once.
    static SHARED: OnceLock<Result<Node, String>> = OnceLock::new();
    let started = SHARED.get_or_init(|| {
        std::panic::catch_unwind(Node::start).map_err(|e| {
            e.downcast_ref::<String>()
                .cloned()
                .or_else(|| e.downcast_ref::<&str>().map(|s| s.to_string()))
                .unwrap_or_default()
        })
    });
    match started {
        Ok(node) => node,
        Err(why) => panic!("the real node did not start: {why}"),
    }
}

impl Node {
    /// Starts the node; fails the test loudly when it cannot (the node
    /// binaries are built by `scripts/node.sh build`, which
    /// `scripts/test.sh` runs): never a skip.
    fn start() -> Node {
        let dir = TempDir::new("node");
        let iptables_before = Node::iptables_rules();
        let started = Instant::now();
        let out = Command::new(script())
            .arg("up")
            .arg(dir.path())
            .arg("--watch-pid")
            .arg(std::process::id().to_string())
            .stdin(Stdio::null())
            .output()
            .expect("run scripts/node.sh");
        let log = |name: &str| std::fs::read_to_string(dir.path().join("log").join(name)).unwrap_or_default();
        assert!(
            out.status.success(),
            "could not start the real node (scripts/node.sh build first; scripts/test.sh does):\n{}\nkubelet log \
             tail:\n{}",
            String::from_utf8_lossy(&out.stderr),
            tail(&log("kubelet.log"), 30)
        );
        let up_seconds = started.elapsed().as_secs_f64();
        let text = std::fs::read_to_string(dir.path().join("env")).expect("node env file");
        let env: HashMap<String, String> =
            text.lines().filter_map(|l| l.split_once('=')).map(|(k, v)| (k.to_string(), v.to_string())).collect();
        let cp = ControlPlane::attach(TempDir(dir.path().join("cp")));
        let mut node = Node { dir, env, cp, iptables_before, up_seconds, images_seconds: 0.0 };
        let started = Instant::now();
        node.build_images();
        node.images_seconds = started.elapsed().as_secs_f64();
        eprintln!(
            "node: kubelet {} Ready in {:.1} s, images built and pushed in {:.1} s (state in {})",
            node.env["NODE_VERSION"],
            node.up_seconds,
            node.images_seconds,
            node.dir.path().display()
        );
        node
    }

    pub fn cp(&self) -> &ControlPlane {
        &self.cp
    }

    pub fn dir(&self) -> &Path {
        self.dir.path()
    }

    /// `127.0.0.1:PORT` of the node's registry (plain http).
    pub fn registry(&self) -> &str {
        &self.env["REGISTRY"]
    }

    /// The port of kubelet's HTTPS API on 127.0.0.1 (no anonymous access).
    pub fn kubelet_port(&self) -> u16 {
        self.env["KUBELET_PORT"].parse().expect("KUBELET_PORT")
    }

    /// The port of the node's admission webhook on 127.0.0.1 (HTTPS).
    pub fn webhook_port(&self) -> u16 {
        self.env["WEBHOOK_PORT"].parse().expect("WEBHOOK_PORT")
    }

    /// kubelet's version, as `node.sh` started it.
    pub fn version(&self) -> &str {
        &self.env["NODE_VERSION"]
    }

    /// kubelet's minor version (20, 36).
    pub fn minor(&self) -> u32 {
        self.version().split('.').nth(1).and_then(|m| m.parse().ok()).expect("kubelet vMAJOR.MINOR.PATCH")
    }

    /// Does this kubelet run native sidecars (init containers with
    /// `restartPolicy: Always`, Kubernetes 1.29 and later)?
    pub fn native_sidecars(&self) -> bool {
        self.minor() >= 29
    }

    /// The User-Agent of this kubelet's probes.
    pub fn probe_agent(&self) -> String {
        format!("kube-probe/1.{}", self.minor())
    }

    /// kubelet's log lines saying `probe` (Readiness, Liveness, Startup) of
    /// `container` in `pod` succeeded (its --v=3 lines: v1.20's text, later
    /// versions' structured form).
    pub fn probe_successes(&self, probe: &str, pod: &Value, container: &str) -> Vec<String> {
        let (name, ns) = (pod["metadata"]["name"].as_str().unwrap(), pod["metadata"]["namespace"].as_str().unwrap());
        let text = (format!("{probe} probe for \"{name}_{ns}("), format!("):{container}\" succeeded"));
        let structured = [
            "\"Probe succeeded\"".to_string(),
            format!("probeType=\"{probe}\""),
            format!("pod=\"{ns}/{name}\""),
            format!("containerName=\"{container}\""),
        ];
        self.kubelet_log()
            .lines()
            .filter(|l| {
                (l.contains(&text.0) && l.contains(&text.1)) || structured.iter().all(|part| l.contains(part.as_str()))
            })
            .map(String::from)
            .collect()
    }

    /// `IMAGE` for the README: opstatus's image in the node's registry, no tag.
    pub fn opstatus_image(&self) -> String {
        format!("{}/{OPSTATUS_REPOSITORY}", self.registry())
    }

    pub fn operator_image(&self) -> String {
        format!("{}/{OPERATOR_IMAGE}", self.registry())
    }

    pub fn kubelet_log(&self) -> String {
        std::fs::read_to_string(&self.env["KUBELET_LOG"]).unwrap_or_default()
    }

    /// `node.sh connects`: every inet connect kubelet and containerd made,
    /// and whether all stayed on loopback.
    pub fn connects(&self) -> (bool, String) {
        let out = Command::new(script()).arg("connects").arg(self.dir.path()).stdin(Stdio::null()).output().unwrap();
        (out.status.success(), String::from_utf8_lossy(&out.stdout).into_owned())
    }

    /// The host's iptables and ip6tables rules (without counters), as
    /// they were before the node started.
    pub fn iptables_before(&self) -> &str {
        &self.iptables_before
    }

    /// The host's iptables and ip6tables rules now, without counters and
    /// comments; "(no TOOL)" for a tool not installed.
    pub fn iptables_rules() -> String {
        let mut rules = String::new();
        for tool in ["iptables-save", "ip6tables-save"] {
            match Command::new(tool).stdin(Stdio::null()).output() {
                Ok(out) => {
                    assert!(out.status.success(), "{tool}: {}", String::from_utf8_lossy(&out.stderr));
                    for line in String::from_utf8_lossy(&out.stdout).lines().filter(|l| !l.starts_with('#')) {
                        let line = match line.rfind(" [") {
                            Some(at) if line.starts_with(':') => &line[..at],
                            _ => line,
                        };
                        rules.push_str(line);
                        rules.push('\n');
                    }
                }
                Err(_) => rules.push_str(&format!("(no {tool})\n")),
            }
        }
        rules
    }

    /// containerd's socket.
    pub fn containerd_sock(&self) -> &str {
        &self.env["CONTAINERD_SOCK"]
    }

    /// containerd's event stream (`ctr events`), its standard output piped:
    /// task exits with their codes, as containerd saw them.
    pub fn containerd_events(&self) -> std::process::Child {
        Command::new("ctr")
            .args(["--address", self.containerd_sock(), "events"])
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .stdin(Stdio::null())
            .spawn()
            .unwrap()
    }

    /// A fresh namespace with `manifests/base` and the quick start's
    /// Deployment, its image the node's opstatus: the namespace.
    pub fn quick_start_deployment(&self, label: &str) -> String {
        let ns = super::control_plane::unique_namespace(label);
        self.cp.create_namespace(&ns);
        self.cp.apply_base_manifests(&ns);
        let image = format!("{}:{}", self.opstatus_image(), env!("CARGO_PKG_VERSION"));
        let deployment = std::fs::read_to_string(format!("{ROOT}/manifests/examples/quick-start/deployment.yaml"))
            .unwrap()
            .replace("image: opstatus:0.1.0", &format!("image: {image}"));
        assert!(deployment.contains(&image), "{deployment}");
        self.cp.kubectl_stdin_ok(&["-n", &ns, "apply", "-f", "-"], Some(&deployment));
        ns
    }

    /// ctr against the node's containerd, in kubelet's namespace.
    pub fn ctr(&self, args: &[&str]) -> String {
        let out = Command::new("ctr")
            .args(["--address", &self.env["CONTAINERD_SOCK"], "-n", "k8s.io"])
            .args(args)
            .stdin(Stdio::null())
            .output()
            .expect("ctr");
        assert!(out.status.success(), "ctr {args:?}: {}", String::from_utf8_lossy(&out.stderr));
        String::from_utf8_lossy(&out.stdout).into_owned()
    }

    fn build_images(&self) {
        let store = self.dir.path().join("buildah");
        let buildah = |dir: &Path, args: &[&str]| {
            let out = Command::new("buildah")
                .args(["--storage-driver", "vfs", "--root"])
                .arg(store.join("root"))
                .arg("--runroot")
                .arg(store.join("runroot"))
                .args(args)
                .current_dir(dir)
                .stdin(Stdio::null())
                .output()
                .expect("buildah (scripts/node.sh install installs it)");
            assert!(out.status.success(), "buildah {args:?}: {}", String::from_utf8_lossy(&out.stderr));
        };
        // opstatus: the Containerfile's offline path, from the static binary
        // staged where it looks (scripts/static-build.sh stages it).
        let staged = Path::new(ROOT).join("target/platforms/amd64/opstatus");
        let same = |a: &Path, b: &Path| std::fs::read(a).ok().zip(std::fs::read(b).ok()).is_some_and(|(a, b)| a == b);
        assert!(
            same(&staged, &static_bin()),
            "{} is not the fresh static binary {}: run scripts/static-build.sh (it stages it)",
            staged.display(),
            static_bin().display()
        );
        let opstatus = format!("{}:{}", self.opstatus_image(), env!("CARGO_PKG_VERSION"));
        buildah(
            Path::new(ROOT),
            &["build", "--quiet", "--target", "prebuilt", "-f", "Containerfile", "-t", &opstatus, "."],
        );
        buildah(Path::new(ROOT), &["push", "--quiet", "--tls-verify=false", &opstatus]);

        // The stand-in operator.
        let context = self.dir.path().join("operator-image");
        std::fs::create_dir_all(&context).unwrap();
        let built = Command::new("gcc")
            .args(["-O2", "-Wall", "-static", "-o"])
            .arg(context.join("manager"))
            .arg(Path::new(ROOT).join("tests/fixtures/node/operator.c"))
            .status()
            .expect("gcc");
        assert!(built.success(), "gcc tests/fixtures/node/operator.c");
        std::fs::write(
            context.join("Containerfile"),
            "FROM scratch\nCOPY manager /manager\nUSER 65532:65532\nENTRYPOINT [\"/manager\"]\n",
        )
        .unwrap();
        let operator = self.operator_image();
        buildah(&context, &["build", "--quiet", "-f", "Containerfile", "-t", &operator, "."]);
        buildah(&context, &["push", "--quiet", "--tls-verify=false", &operator]);
    }

    /// The Pods of `ns` matching `selector`, as JSON.
    pub fn pods(&self, ns: &str, selector: &str) -> Vec<Value> {
        self.listed_pods(ns, selector).unwrap_or_else(|| panic!("cannot list the pods of {ns}"))
    }

    /// The Pods of `ns` matching `selector`; `None` when the list failed
    /// (an API server slow to answer on a busy machine).
    fn listed_pods(&self, ns: &str, selector: &str) -> Option<Vec<Value>> {
        let selector = percent_encoding::utf8_percent_encode(selector, percent_encoding::NON_ALPHANUMERIC);
        let list = self.cp.get_json(&format!("/api/v1/namespaces/{ns}/pods?labelSelector={selector}"))?;
        Some(list["items"].as_array().cloned().unwrap_or_default())
    }

    /// Waits until `want` Pods of `ns` matching `selector` are Ready.
    pub fn wait_ready(&self, ns: &str, selector: &str, want: usize, timeout: Duration) -> Vec<Value> {
        let deadline = Instant::now() + timeout;
        loop {
            // A failed list is one more wait, until the deadline.
            let pods = self.listed_pods(ns, selector);
            let ready: Vec<Value> = pods.iter().flatten().filter(|p| is_ready(p)).cloned().collect();
            if ready.len() == want && pods.is_some_and(|p| p.len() == want) {
                return ready;
            }
            assert!(
                Instant::now() < deadline,
                "{want} ready pod(s) of {ns} -l {selector} not there after {timeout:?}:\n{}\nevents:\n{}",
                self.cp.kubectl_ok(&["-n", ns, "get", "pods", "-o", "wide"]),
                self.events_text(ns)
            );
            std::thread::sleep(Duration::from_millis(500));
        }
    }

    /// The events of `ns`, as JSON.
    /// kubelet's failed probes of `container` in `ns` as `(count, message)`
    /// (its `Unhealthy` Events; kubelet counts repeats in one Event), but
    /// those that only ran out of kubelet's time (one second by default).
    /// A late answer is what a shared CPU does to any server; the tests
    /// that use this also require successful probes, which a container that
    /// hangs would not have. An answer that is not 2xx, or a refused
    /// connection, is opstatus's own doing and stays.
    pub fn failed_probes(&self, ns: &str, container: &str) -> Vec<(u64, String)> {
        let field = format!("{{{container}}}");
        self.events(ns)
            .iter()
            .filter(|e| e["reason"] == "Unhealthy")
            .filter(|e| e["involvedObject"]["fieldPath"].as_str().unwrap_or_default().ends_with(&field))
            .map(|e| (e["count"].as_u64().unwrap_or(1), e["message"].as_str().unwrap_or_default().to_string()))
            .filter(|(_, message)| !kubelet_timed_out(message))
            .collect()
    }

    pub fn events(&self, ns: &str) -> Vec<Value> {
        let list = self.cp.get_json(&format!("/api/v1/namespaces/{ns}/events"));
        let list = list.unwrap_or_else(|| panic!("cannot list the events of {ns}"));
        list["items"].as_array().cloned().unwrap_or_default()
    }

    /// One line per event of `ns`: reason, source, object, message.
    pub fn events_text(&self, ns: &str) -> String {
        self.events(ns)
            .iter()
            .map(|e| {
                format!(
                    "{} {} {}/{} {}: {}",
                    e["count"],
                    e["reason"].as_str().unwrap_or_default(),
                    e["source"]["component"].as_str().unwrap_or_default(),
                    e["involvedObject"]["name"].as_str().unwrap_or_default(),
                    e["involvedObject"]["fieldPath"].as_str().unwrap_or_default(),
                    e["message"].as_str().unwrap_or_default()
                )
            })
            .collect::<Vec<_>>()
            .join("\n")
    }

    /// The port on 127.0.0.1 the node's webhook gave `pod`'s `port`.
    pub fn pod_port(pod: &Value, port: u16) -> u16 {
        let mapping = pod["metadata"]["annotations"]["node.opstatus.test/ports"].as_str().unwrap_or_default();
        mapping
            .split(',')
            .filter_map(|kv| kv.split_once('='))
            .find(|(from, _)| from.parse() == Ok(port))
            .and_then(|(_, to)| to.parse().ok())
            .unwrap_or_else(|| panic!("no mapping for port {port} in {mapping:?}"))
    }

    /// The host PID of `container` of `pod` (from containerd).
    pub fn container_pid(&self, pod: &Value, container: &str) -> u32 {
        let id = container_status(pod, container)["containerID"]
            .as_str()
            .and_then(|id| id.strip_prefix("containerd://"))
            .unwrap_or_else(|| panic!("no containerd id for {container}: {}", pod["status"]))
            .to_string();
        let tasks = self.ctr(&["tasks", "ls"]);
        let line = tasks.lines().find(|l| l.starts_with(&id)).unwrap_or_else(|| panic!("no task {id}:\n{tasks}"));
        line.split_whitespace().nth(1).unwrap().parse().unwrap()
    }

    /// A kustomize overlay directory, under the test's own temporary
    /// directory, whose kustomization is `text` with `{ROOT}` replaced by
    /// the path back to the repository (kustomize wants relative paths).
    pub fn overlay(&self, label: &str, text: &str) -> TempDir {
        let dir = TempDir::new(label);
        let root = super::control_plane::relative_path(dir.path(), Path::new(ROOT));
        std::fs::write(dir.path().join("kustomization.yaml"), text.replace("{ROOT}", &root.display().to_string()))
            .unwrap();
        dir
    }

    /// Renders and applies an overlay made by [`Node::overlay`].
    pub fn apply_overlay(&self, overlay: &TempDir) {
        let rendered = self.cp.kubectl_ok(&["kustomize", overlay.path().to_str().unwrap()]);
        self.cp.kubectl_stdin_ok(&["apply", "-f", "-"], Some(&rendered));
    }
}

/// Whether a kubelet probe failure message says only that its time ran out
/// (kubelet v1.20 and v1.36 word it as Go's HTTP client does).
pub fn kubelet_timed_out(message: &str) -> bool {
    ["Client.Timeout exceeded", "context deadline exceeded", "i/o timeout"].iter().any(|t| message.contains(t))
}

#[test]
fn a_probe_that_ran_out_of_time_is_told_from_one_answered_wrong() {
    assert!(kubelet_timed_out(
        r#"Readiness probe failed: Get "http://127.0.0.1:8081/readyz": context deadline exceeded (Client.Timeout exceeded while awaiting headers)"#
    ));
    assert!(!kubelet_timed_out("Readiness probe failed: HTTP probe failed with statuscode: 503"));
    assert!(!kubelet_timed_out(
        r#"Liveness probe failed: Get "http://127.0.0.1:8081/healthz": dial tcp 127.0.0.1:8081: connect: connection refused"#
    ));
}

pub fn is_ready(pod: &Value) -> bool {
    pod["status"]["conditions"]
        .as_array()
        .is_some_and(|cs| cs.iter().any(|c| c["type"] == "Ready" && c["status"] == "True"))
}

/// `name`'s entry in the Pod's containerStatuses or initContainerStatuses.
pub fn container_status<'a>(pod: &'a Value, name: &str) -> &'a Value {
    ["containerStatuses", "initContainerStatuses"]
        .iter()
        .filter_map(|k| pod["status"][k].as_array())
        .flatten()
        .find(|c| c["name"] == name)
        .unwrap_or(&Value::Null)
}

pub fn tail(text: &str, lines: usize) -> String {
    let all: Vec<&str> = text.lines().collect();
    all[all.len().saturating_sub(lines)..].join("\n")
}
