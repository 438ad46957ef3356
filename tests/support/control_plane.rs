//! A real etcd + kube-apiserver for end-to-end tests, driven through
//! `scripts/control-plane.sh`, plus the few client operations the tests need
//! (kubectl with the admin kubeconfig, the audit log).
//!
//! The script's watchdog stops the control plane by PID when this test
//! process exits, also when it panics or is killed; dropping the handle
//! stops it at once.
//!
//! Which Kubernetes: `OPSTATUS_KUBE_VERSION` (passed through to the
//! script): unset or `1.20` is the Debian-built v1.20.2; `bin-dir` runs the
//! kube-apiserver and etcd of `OPSTATUS_KUBE_BIN_DIR` (by default
//! `../shared/k8s/v1.36.2`, v1.36.2). `scripts/test.sh` runs the end-to-end
//! tests on both. A test that needs a newer server than v1.20 asks
//! [`ControlPlane::is_debian_1_20`].

use super::{ServiceAccountDir, TempDir};
use serde_json::Value;
use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::sync::OnceLock;
use std::time::SystemTime;

pub const ROOT: &str = env!("CARGO_MANIFEST_DIR");

pub struct ControlPlane {
    dir: TempDir,
    env: HashMap<String, String>,
}

fn script() -> PathBuf {
    Path::new(ROOT).join("scripts/control-plane.sh")
}

impl ControlPlane {
    /// Starts a control plane; fails the test loudly when the API server
    /// binary is not built (`scripts/test.sh` builds it): never a skip.
    ///
    /// The script picks free loopback ports, then etcd and kube-apiserver
    /// bind them: another process may take one in between (many control
    /// planes start at once in a test run). That start is tried again, on
    /// new ports, three times at most.
    pub fn start() -> ControlPlane {
        let (mut dir, mut out);
        let mut attempts = 0;
        loop {
            attempts += 1;
            dir = TempDir::new("control-plane");
            out = Command::new(script())
                .arg("start")
                .arg(dir.path())
                .arg("--watch-pid")
                .arg(std::process::id().to_string())
                .stdin(Stdio::null())
                .output()
                .expect("run scripts/control-plane.sh");
            let taken = String::from_utf8_lossy(&out.stderr).contains("address already in use");
            if out.status.success() || !taken || attempts == 3 {
                break;
            }
            let _ = Command::new(script()).arg("stop").arg(dir.path()).status();
        }
        assert!(
            out.status.success(),
            "could not start the real API server (OPSTATUS_KUBE_VERSION={}; run scripts/test.sh, which \
             builds or prepares it):\n{}",
            requested_flavor(),
            String::from_utf8_lossy(&out.stderr)
        );
        let mut cp = ControlPlane { dir, env: HashMap::new() };
        cp.reload_env();
        // The version the server itself reports, so that a run against the
        // wrong control plane cannot pass unnoticed.
        assert_eq!(cp.var("KUBE_FLAVOR"), requested_flavor(), "the control plane started is not the one asked for");
        let version = cp.git_version();
        if cp.is_debian_1_20() {
            assert!(version.starts_with("v1.20.") || version.starts_with("v0.0.0"), "Debian build reports {version}");
        } else {
            assert!(!version.starts_with("v1.20."), "OPSTATUS_KUBE_VERSION=bin-dir started {version}");
        }
        eprintln!("control plane: kube-apiserver {version} ({}) on port {}", cp.var("KUBE_FLAVOR"), cp.port());
        cp
    }

    /// The control plane `control-plane.sh start` started in `dir` for
    /// another script (`scripts/node.sh`), which stops it.
    pub fn attach(dir: TempDir) -> ControlPlane {
        let mut cp = ControlPlane { dir, env: HashMap::new() };
        cp.reload_env();
        cp
    }

    /// `/version`'s `gitVersion` (the Debian build may say `v0.0.0-master`).
    pub fn git_version(&self) -> &str {
        self.var("KUBE_GIT_VERSION")
    }

    /// The Debian-built v1.20.2, with its quirks (shared/REAL_APISERVER.md):
    /// `""` in a typed CRD string field is validated as null, and fields
    /// newer than v1.20 (native sidecars) cannot be validated.
    pub fn is_debian_1_20(&self) -> bool {
        self.var("KUBE_FLAVOR") == "1.20"
    }

    fn reload_env(&mut self) {
        let text = std::fs::read_to_string(self.dir.path().join("env")).expect("control plane env file");
        self.env =
            text.lines().filter_map(|l| l.split_once('=')).map(|(k, v)| (k.to_string(), v.to_string())).collect();
    }

    fn var(&self, key: &str) -> &str {
        &self.env[key]
    }

    pub fn port(&self) -> u16 {
        self.var("APISERVER_PORT").parse().unwrap()
    }

    pub fn kubeconfig(&self) -> &str {
        self.var("KUBECONFIG")
    }

    pub fn ca_pem(&self) -> String {
        std::fs::read_to_string(self.var("CA_CERT")).unwrap()
    }

    /// The cluster admin's bearer token (system:masters).
    pub fn admin_token(&self) -> &str {
        self.var("ADMIN_TOKEN")
    }

    pub fn ca_path(&self) -> &str {
        self.var("CA_CERT")
    }

    /// Runs kubectl as the cluster admin.
    pub fn kubectl(&self, args: &[&str], stdin: Option<&str>) -> Output {
        let mut c = Command::new("kubectl");
        c.arg("--kubeconfig").arg(self.kubeconfig()).args(args);
        c.stdin(if stdin.is_some() { Stdio::piped() } else { Stdio::null() });
        c.stdout(Stdio::piped()).stderr(Stdio::piped());
        let mut child = c.spawn().expect("kubectl");
        if let Some(input) = stdin {
            use std::io::Write;
            child.stdin.take().unwrap().write_all(input.as_bytes()).unwrap();
        }
        child.wait_with_output().unwrap()
    }

    /// Starts a kubectl that keeps running (`get --watch`, `logs -f`) as
    /// the cluster admin; its output is collected until [`Following::stop`].
    pub fn kubectl_follow(&self, args: &[&str]) -> Following {
        let mut child = Command::new("kubectl")
            .arg("--kubeconfig")
            .arg(self.kubeconfig())
            .args(args)
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .stdin(Stdio::null())
            .spawn()
            .expect("kubectl");
        let mut out = child.stdout.take().unwrap();
        let reader = std::thread::spawn(move || {
            let mut text = String::new();
            let _ = std::io::Read::read_to_string(&mut out, &mut text);
            text
        });
        Following { child, reader }
    }

    /// Runs kubectl and returns stdout; panics with stderr on failure.
    pub fn kubectl_ok(&self, args: &[&str]) -> String {
        self.kubectl_stdin_ok(args, None)
    }

    pub fn kubectl_stdin_ok(&self, args: &[&str], stdin: Option<&str>) -> String {
        let out = self.kubectl(args, stdin);
        assert!(out.status.success(), "kubectl {args:?} failed: {}", String::from_utf8_lossy(&out.stderr));
        String::from_utf8(out.stdout).unwrap()
    }

    pub fn create_namespace(&self, ns: &str) {
        let body = serde_json::json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns}});
        let created = self.admin_client().create("/api/v1/namespaces", body.to_string().as_bytes(), "create namespace");
        created.unwrap_or_else(|e| panic!("create namespace {ns}: {e}"));
    }

    /// Applies `manifests/base` into `ns` the way a user would: a kustomize
    /// overlay that sets the namespace.
    pub fn apply_base_manifests(&self, ns: &str) {
        // Rendered once per test process (kustomize is the costly part);
        // the namespace is the one thing that differs.
        const PLACEHOLDER: &str = "opstatus-test-namespace-placeholder";
        static RENDERED: std::sync::OnceLock<String> = std::sync::OnceLock::new();
        let rendered = RENDERED.get_or_init(|| self.render_manifests("manifests/base", PLACEHOLDER));
        self.kubectl_stdin_ok(&["apply", "-f", "-"], Some(&rendered.replace(PLACEHOLDER, ns)));
    }

    /// Applies a kustomization under the project (e.g. `manifests/olm`)
    /// from an overlay that sets the namespace `ns`, as the docs have it:
    /// beside `manifests/base`, whose `opstatus` ServiceAccount kustomize
    /// binds the ClusterRoleBindings' subjects to (in `ns`). The
    /// kustomization's own names get the suffix `-NS` (cluster-scoped RBAC
    /// must not collide between tests); base's are as `deploy` applied
    /// them. `replace` edits the rendered YAML (placeholders such as a
    /// ClusterOperator name) before it is applied.
    pub fn apply_manifests(&self, dir: &str, ns: &str, replace: &[(&str, &str)]) {
        let mut rendered = self.render_manifests(dir, ns);
        for (from, to) in replace {
            rendered = rendered.replace(from, to);
        }
        self.kubectl_stdin_ok(&["apply", "-f", "-"], Some(&rendered));
    }

    /// What [`ControlPlane::apply_manifests`] applies, as rendered.
    fn render_manifests(&self, dir: &str, ns: &str) -> String {
        let overlay = TempDir::new("overlay");
        // kustomize refuses absolute paths to a base.
        let rel = |from: &Path, to: &str| relative_path(from, &Path::new(ROOT).join(to)).display().to_string();
        let resources = if dir == "manifests/base" {
            rel(overlay.path(), dir)
        } else {
            let suffixed = overlay.path().join("suffixed");
            std::fs::create_dir(&suffixed).unwrap();
            std::fs::write(
                suffixed.join("kustomization.yaml"),
                format!("nameSuffix: -{ns}\nresources:\n- {}\n", rel(&suffixed, dir)),
            )
            .unwrap();
            format!("{}\n- suffixed", rel(overlay.path(), "manifests/base"))
        };
        std::fs::write(
            overlay.path().join("kustomization.yaml"),
            format!("namespace: {ns}\nresources:\n- {resources}\n"),
        )
        .unwrap();
        self.kubectl_ok(&["kustomize", overlay.path().to_str().unwrap()])
    }

    /// Installs a CRD from `tests/fixtures/crds/` and waits until it is
    /// served. Idempotent: tests sharing a control plane may all call it.
    ///
    /// The fixtures are the schemas as openshift/api and OLM ship them. Only
    /// on the Debian v1.20 build, whose validation takes an empty string in
    /// a typed string field for null (real clusters, v1.36 here, accept
    /// `""`), are the string fields that opstatus may set to `""` (the core
    /// group of `relatedObjects`) marked `nullable: true` at install time:
    /// the stored value stays `""`, and on v1.36 the unmodified schema is
    /// what the tests prove opstatus against.
    pub fn install_crd(&self, name: &str) {
        // Two tests applying the same new CRD at once race between apply's
        // read and its create (AlreadyExists): one at a time.
        static INSTALLING: std::sync::Mutex<()> = std::sync::Mutex::new(());
        let _one_at_a_time = INSTALLING.lock().unwrap_or_else(|p| p.into_inner());
        let file = Path::new(ROOT).join("tests/fixtures/crds").join(format!("{name}.yaml"));
        let mut crd = std::fs::read_to_string(&file).unwrap();
        if self.is_debian_1_20() {
            let patched = debian_1_20_nullable_workaround(&crd);
            assert!(
                patched != crd || !crd.contains("relatedObjects"),
                "{name}: the v1.20 nullable workaround found no `group: {{type: string}}` to patch"
            );
            crd = patched;
        }
        self.kubectl_stdin_ok(&["apply", "-f", "-"], Some(&crd));
        self.wait_established(name);
    }

    /// Waits (60 s at most) until the CRD `name` is Established.
    ///
    /// Not `kubectl wait`, nor a jsonpath filter alone: both fail at once
    /// ("accessor error", "<nil> is not array or slice") on a CRD that has
    /// no status conditions yet, which a fresh one may not on a busy
    /// machine. Until the condition is there, a failed read means "not yet".
    pub fn wait_established(&self, name: &str) {
        let path = format!("/apis/apiextensions.k8s.io/v1/customresourcedefinitions/{name}");
        let established = |crd: &Value| {
            let conditions = crd["status"]["conditions"].as_array().cloned().unwrap_or_default();
            conditions.iter().any(|c| c["type"] == "Established" && c["status"] == "True")
        };
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
        loop {
            let crd = self.get_json(&path);
            if crd.as_ref().is_some_and(established) {
                return;
            }
            assert!(std::time::Instant::now() < deadline, "crd/{name} not Established within 60 s; last read: {crd:?}");
            std::thread::sleep(std::time::Duration::from_millis(100));
        }
    }

    /// A client with the admin token: for tests that write many objects
    /// (thousands of kubectl processes would take minutes).
    pub fn admin_client(&self) -> opstatus::testing::Client {
        let creds = opstatus::testing::Credentials {
            server: self.var("APISERVER_URL").to_string(),
            ca_pem: self.ca_pem().into_bytes(),
            ca_source: self.ca_path().to_string(),
            tls_server_name: None,
            proxy_url: None,
            auth: opstatus::testing::Auth::Token(opstatus::testing::Secret::new(self.var("ADMIN_TOKEN"))),
            namespace: None,
        };
        opstatus::testing::Client::new(&creds).expect("admin client")
    }

    /// A TokenRequest token for `sa` in `ns` (600 s, the API's minimum).
    pub fn token(&self, ns: &str, sa: &str) -> String {
        let body = r#"{"apiVersion":"authentication.k8s.io/v1","kind":"TokenRequest","spec":{"audiences":["https://kubernetes.default.svc"],"expirationSeconds":600}}"#;
        let path = format!("/api/v1/namespaces/{ns}/serviceaccounts/{sa}/token");
        let out = self.admin_client().create(&path, body.as_bytes(), "request a token");
        let out = out.unwrap_or_else(|e| panic!("a token for {ns}/{sa}: {e}"));
        let v: Value = serde_json::from_slice(&out).unwrap();
        v["status"]["token"].as_str().expect("TokenRequest answer has a token").to_string()
    }

    /// GET `path` as the cluster admin, in this process: the object's
    /// JSON, or `None` when it does not exist or cannot be read now (an API
    /// server stopped). Tests poll with it: a kubectl process costs about a
    /// tenth of a CPU second, which at a poll every 100 ms is a core.
    pub fn get_json(&self, path: &str) -> Option<Value> {
        let body = self.admin_client().get_path(path, "read as the cluster admin").ok()??;
        Some(serde_json::from_slice(&body).expect("the API server answers JSON"))
    }

    /// The ConfigMap's JSON, or `None` when it does not exist.
    pub fn configmap(&self, ns: &str, name: &str) -> Option<Value> {
        self.get_json(&format!("/api/v1/namespaces/{ns}/configmaps/{name}"))
    }

    /// The parsed `status` document of a ConfigMap.
    pub fn status_document(&self, ns: &str, name: &str) -> Option<Value> {
        let cm = self.configmap(ns, name)?;
        serde_json::from_str(cm["data"]["status"].as_str()?).ok()
    }

    /// Every audited request made by `username`, in order.
    pub fn audit_events(&self, username: &str) -> Vec<AuditEvent> {
        let text = std::fs::read_to_string(self.var("AUDIT_LOG")).unwrap_or_default();
        text.lines()
            .filter_map(|l| serde_json::from_str::<Value>(l).ok())
            .filter(|e| e["user"]["username"] == username && e["stage"] == "ResponseComplete")
            .map(|e| AuditEvent {
                verb: e["verb"].as_str().unwrap_or_default().to_string(),
                uri: e["requestURI"].as_str().unwrap_or_default().to_string(),
                code: e["responseStatus"]["code"].as_u64().unwrap_or(0) as u16,
                received: e["requestReceivedTimestamp"]
                    .as_str()
                    .and_then(opstatus::testing::parse_rfc3339)
                    .unwrap_or(SystemTime::UNIX_EPOCH),
            })
            .collect()
    }

    pub fn stop_apiserver(&self) {
        self.script_ok("stop-apiserver");
    }

    pub fn start_apiserver(&mut self) {
        self.script_ok("start-apiserver");
        self.reload_env();
    }

    fn script_ok(&self, verb: &str) {
        let out = Command::new(script()).arg(verb).arg(self.dir.path()).stdin(Stdio::null()).output().unwrap();
        assert!(out.status.success(), "control-plane.sh {verb}: {}", String::from_utf8_lossy(&out.stderr));
    }
}

impl Drop for ControlPlane {
    fn drop(&mut self) {
        let _ = Command::new(script()).arg("stop").arg(self.dir.path()).stdin(Stdio::null()).status();
    }
}

/// Marks every `group: {type: string}` field of a fixture CRD, and the
/// `name` beside it (a related object may name every object of its type
/// with `""`), `nullable: true`: the Debian v1.20 build rejects `""` there
/// as null.
fn debian_1_20_nullable_workaround(crd: &str) -> String {
    let beside = |indent: &str| format!("group: {{type: string}}\n{indent}name: {{type: string}}");
    let mut crd = crd.to_string();
    for indent in crd
        .lines()
        .filter(|l| l.trim() == "name: {type: string}")
        .map(|l| l[..l.len() - l.trim_start().len()].to_string())
        .collect::<Vec<_>>()
    {
        crd = crd.replace(
            &beside(&indent),
            &format!("group: {{type: string}}\n{indent}name: {{type: string, nullable: true}}"),
        );
    }
    crd.replace("group: {type: string}", "group: {type: string, nullable: true}")
}

/// `OPSTATUS_KUBE_VERSION` as the script reads it.
pub fn requested_flavor() -> String {
    std::env::var("OPSTATUS_KUBE_VERSION").ok().filter(|v| !v.is_empty()).unwrap_or_else(|| "1.20".into())
}

/// One audited request.
#[derive(Clone, Debug)]
pub struct AuditEvent {
    pub verb: String,
    pub uri: String,
    pub code: u16,
    pub received: SystemTime,
}

pub fn service_account_user(ns: &str, sa: &str) -> String {
    format!("system:serviceaccount:{ns}:{sa}")
}

/// The release binary the end-to-end tests drive, as users run it
/// (`OPSTATUS_BIN` overrides).
pub fn release_bin() -> PathBuf {
    match std::env::var_os("OPSTATUS_BIN") {
        Some(bin) => PathBuf::from(bin),
        None => fresh_build("target/release/opstatus", "cargo build --release"),
    }
}

/// The static (musl) release binary, as the scratch image holds it.
pub fn static_bin() -> PathBuf {
    fresh_build(
        "target/x86_64-unknown-linux-musl/release/opstatus",
        "cargo build --release --target x86_64-unknown-linux-musl",
    )
}

/// A built binary under the project; fails when it is missing or older than
/// the sources: a stale binary would test yesterday's code.
fn fresh_build(relative: &str, how: &str) -> PathBuf {
    let bin = Path::new(ROOT).join(relative);
    let built = std::fs::metadata(&bin)
        .and_then(|m| m.modified())
        .unwrap_or_else(|_| panic!("no binary at {}: run `{how}` (scripts/test.sh does)", bin.display()));
    for source in newest_sources(&Path::new(ROOT).join("src")) {
        let changed = std::fs::metadata(&source).unwrap().modified().unwrap();
        assert!(
            changed <= built,
            "{} is older than {}: run `{how}` (scripts/test.sh does)",
            bin.display(),
            source.display()
        );
    }
    bin
}

fn newest_sources(dir: &Path) -> Vec<PathBuf> {
    let mut files = Vec::new();
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            files.extend(newest_sources(&path));
        } else {
            files.push(path);
        }
    }
    files
}

/// A namespace name unique within this test process.
pub fn unique_namespace(label: &str) -> String {
    static COUNTER: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
    let n = COUNTER.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
    format!("{label}-{n}")
}

/// One control plane for all the tests of a test binary that do not
/// disturb it; its watchdog stops it when the binary exits.
pub fn shared() -> &'static ControlPlane {
    static SHARED: OnceLock<ControlPlane> = OnceLock::new();
    SHARED.get_or_init(ControlPlane::start)
}

/// Held by a test of the shared control plane that writes the status in
/// `kube9-system` or `default`, the two namespaces every such test shares:
/// one at a time, so that none reads another's status (which opstatus
/// would rightly leave to that other writer for a while).
pub fn shared_status_namespaces() -> std::sync::MutexGuard<'static, ()> {
    static LOCK: std::sync::Mutex<()> = std::sync::Mutex::new(());
    LOCK.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
}

/// opstatus installed in a namespace the way a user installs it.
pub struct Deployed {
    pub namespace: String,
    /// The service-account directory "mounted" into the pod.
    pub sa: ServiceAccountDir,
    /// The audit log's name for the pod's identity.
    pub user: String,
}

impl ControlPlane {
    /// A fresh namespace with `manifests/base` applied, and a pod-style
    /// service-account directory holding a TokenRequest token for the
    /// `opstatus` ServiceAccount the manifests create.
    pub fn deploy(&self, label: &str) -> Deployed {
        let namespace = unique_namespace(label);
        self.create_namespace(&namespace);
        self.apply_base_manifests(&namespace);
        let token = self.token(&namespace, "opstatus");
        let sa = ServiceAccountDir::new(&token, &self.ca_pem(), &namespace);
        let user = service_account_user(&namespace, "opstatus");
        Deployed { namespace, sa, user }
    }

    /// The environment of opstatus running "as in a pod" for `d`.
    pub fn pod_env(&self, d: &Deployed) -> Vec<(String, String)> {
        super::pod_env(self.port(), &d.sa)
    }
}

/// The path to `to` relative to the directory `from` (both absolute):
/// kustomize refuses absolute paths to a base.
pub fn relative_path(from: &Path, to: &Path) -> PathBuf {
    let (from, to) = (from.canonicalize().unwrap(), to.canonicalize().unwrap());
    let common = from.components().zip(to.components()).take_while(|(a, b)| a == b).count();
    let mut rel = PathBuf::new();
    for _ in from.components().skip(common) {
        rel.push("..");
    }
    for part in to.components().skip(common) {
        rel.push(part);
    }
    rel
}

/// A running kubectl's output ([`ControlPlane::kubectl_follow`]).
pub struct Following {
    child: std::process::Child,
    reader: std::thread::JoinHandle<String>,
}

impl Following {
    /// Stops kubectl; what it printed.
    pub fn stop(mut self) -> String {
        let _ = self.child.kill();
        let _ = self.child.wait();
        self.reader.join().unwrap()
    }
}
