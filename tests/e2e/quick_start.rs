//! End to end, real kube-apiserver: the README's quick start, followed
//! literally. The commands are the `sh` blocks of its "Quick start" section,
//! run by bash in order against the API server, with the admin kubeconfig as
//! a user's laptop has it; so the test breaks when the README changes
//! without it.
//!
//! One step cannot happen here: there is no kubelet to pull the image and
//! start the pod. The README's wait for the rollout is where the pod would
//! run, so in its place opstatus runs "as in a pod" (as scripts/demo.sh
//! does): with the args and environment of the Deployment the README's
//! commands created, read back from the API server (the downward API
//! resolved, `--listen` on loopback, the emptyDir a temporary directory),
//! and a token of the Deployment's ServiceAccount. The last step, `opstatus
//! get` with no `--namespace`, must then show what the README says.
//!
//! docs/olm.md's recipe for trying OLM mode without OLM is followed the
//! same way, after the quick start it builds on: its last command must
//! print `True` once the restarted pod has checked.
//!
//! A control plane of its own for each: the quick start owns kube9-system
//! and default, which other tests of the shared one write and delete.

use crate::support;

use serde_json::Value;
use std::path::Path;
use std::process::Command;
use std::time::Duration;
use support::control_plane::{ControlPlane, ROOT};
use support::{RunningAgent, ServiceAccountDir, TempDir, opstatus_bin, pod_env, wait_for};

/// The README step that waits for the pod, which the test replaces by
/// running opstatus as in that pod.
const ROLLOUT: &str = "kubectl -n kube9-system rollout status deployment/opstatus --timeout=2m";
/// What `IMAGE` is set to, as the README asks.
const IMAGE: &str = "registry.example/team/opstatus";

/// The fenced blocks of `file`'s section `heading`, dedented: (info string, body).
pub(crate) fn section_blocks(file: &str, heading: &str) -> Vec<(String, String)> {
    let text = std::fs::read_to_string(Path::new(ROOT).join(file)).unwrap();
    let section = text.split(&format!("\n{heading}\n")).nth(1).unwrap_or_else(|| panic!("{file} has `{heading}`"));
    let section = section.split("\n## ").next().unwrap();
    support::markdown::fenced_blocks(section)
}

/// The `sh` blocks of a section, one script.
pub(crate) fn script(blocks: &[(String, String)]) -> String {
    blocks.iter().filter(|(info, _)| info == "sh").map(|(_, b)| b.as_str()).collect()
}

/// A user's checkout of this repository (what the commands read: the
/// manifests and the fixture CRDs), with `opstatus` on the PATH, on a
/// laptop whose kubeconfig is the admin's.
pub(crate) struct Laptop {
    checkout: TempDir,
    env: Vec<(&'static str, String)>,
}

impl Laptop {
    fn new(cp: &ControlPlane) -> Laptop {
        Laptop::with_image(cp, IMAGE)
    }

    /// The laptop with `IMAGE` set to `image` (`tests/e2e/node_quick_start.rs`:
    /// the real node's registry).
    pub(crate) fn with_image(cp: &ControlPlane, image: &str) -> Laptop {
        let checkout = TempDir::new("quick-start");
        std::fs::create_dir_all(checkout.path().join("tests")).unwrap();
        for part in ["manifests", "tests/fixtures"] {
            let to = checkout.path().join(part);
            let copied = Command::new("cp").arg("-r").arg(Path::new(ROOT).join(part)).arg(&to).status();
            assert!(copied.unwrap().success());
        }
        let bin = checkout.path().join("bin");
        std::fs::create_dir(&bin).unwrap();
        std::os::unix::fs::symlink(opstatus_bin(), bin.join("opstatus")).unwrap();
        let path = format!("{}:{}", bin.display(), std::env::var("PATH").unwrap_or_default());
        let env = vec![("KUBECONFIG", cp.kubeconfig().to_string()), ("IMAGE", image.to_string()), ("PATH", path)];
        Laptop { checkout, env }
    }

    /// Runs `script` with bash (errexit, pipefail) in the checkout; its stdout.
    pub(crate) fn run(&self, script: &str) -> String {
        self.try_run(script).unwrap_or_else(|e| panic!("the documented commands failed at:\n{script}\n{e}"))
    }

    pub(crate) fn try_run(&self, script: &str) -> Result<String, String> {
        let dir = self.checkout.path();
        let mut c = Command::new("bash");
        // Nothing of the developer's environment leaks in; HOME holds kubectl's cache.
        c.args(["-euo", "pipefail", "-c", script]).current_dir(dir).env_clear().env("HOME", dir);
        for (k, v) in &self.env {
            c.env(k, v);
        }
        let out = c.output().expect("bash");
        let text = |b: &[u8]| String::from_utf8_lossy(b).into_owned();
        if out.status.success() {
            Ok(text(&out.stdout))
        } else {
            Err(format!("stdout: {}\nstderr: {}", text(&out.stdout), text(&out.stderr)))
        }
    }
}

/// The value a container's `env` entry has in a pod `pod` of `ns`.
fn env_value(entry: &Value, ns: &str, pod: &str, labels: &Value) -> String {
    if let Some(v) = entry["value"].as_str() {
        return v.to_string();
    }
    let field = entry["valueFrom"]["fieldRef"]["fieldPath"].as_str().unwrap_or_else(|| panic!("unsupported: {entry}"));
    match field {
        "metadata.namespace" => ns.to_string(),
        "metadata.name" => pod.to_string(),
        "metadata.uid" => "00000000-0000-4000-8000-000000000001".to_string(),
        f => {
            let label = f.strip_prefix("metadata.labels['").and_then(|l| l.strip_suffix("']"));
            labels[label.unwrap_or_else(|| panic!("unsupported fieldRef {f}"))].as_str().unwrap_or("").to_string()
        }
    }
}

/// The pod of Deployment `ns/opstatus` as it is now in the API server, run
/// as kubelet would start it; returned once it has written the status and
/// is ready.
fn run_the_pod(cp: &ControlPlane, ns: &str) -> Pod {
    let deployment: Value =
        serde_json::from_str(&cp.kubectl_ok(&["-n", ns, "get", "deployment", "opstatus", "-o", "json"])).unwrap();
    let template = &deployment["spec"]["template"];
    let container = template["spec"]["containers"]
        .as_array()
        .and_then(|cs| cs.iter().find(|c| c["name"] == "opstatus"))
        .unwrap_or_else(|| panic!("no opstatus container: {deployment}"));
    assert_eq!(container["image"], format!("{IMAGE}:{}", env!("CARGO_PKG_VERSION")), "the image is the user's");
    let run = TempDir::new("quick-start-run"); // The emptyDir at /run/opstatus.
    let run_dir = run.path().display().to_string();
    let args: Vec<String> = container["args"]
        .as_array()
        .unwrap()
        .iter()
        .map(|a| match a.as_str().unwrap() {
            // Tests listen on loopback only.
            "--listen=:8090" => "--listen=127.0.0.1:0".to_string(),
            a => a.replace("/run/opstatus", &run_dir),
        })
        .collect();
    let pod = "opstatus-5d8f7c9b4-qs7x2";
    let sa_name = template["spec"]["serviceAccountName"].as_str().unwrap();
    let sa = ServiceAccountDir::new(&cp.token(ns, sa_name), &cp.ca_pem(), ns);
    let mut env = pod_env(cp.port(), &sa);
    for entry in container["env"].as_array().unwrap() {
        let value = env_value(entry, ns, pod, &template["metadata"]["labels"]);
        env.push((entry["name"].as_str().unwrap().to_string(), value));
    }
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let agent = RunningAgent::start(&opstatus_bin(), &args, &env);
    let ready = run.path().join("ready");
    let written = wait_for(Duration::from_secs(30), Duration::from_millis(100), || {
        (ready.exists() && cp.configmap(ns, "kube9-operator-status").is_some()).then_some(())
    });
    assert!(written.is_some(), "the pod wrote no status and is not ready: {}", agent.stderr());
    Pod { agent, _mounts: (run, sa) }
}

/// A running pod: opstatus and what is mounted into it (its emptyDir and
/// service-account token), removed when it stops.
struct Pod {
    agent: RunningAgent,
    _mounts: (TempDir, ServiceAccountDir),
}

/// The README's quick start up to its wait for the rollout, and what follows it.
fn quick_start() -> (String, String) {
    let script = script(&section_blocks("README.md", "## Quick start"));
    let (before, after) =
        script.split_once(&format!("{ROLLOUT}\n")).unwrap_or_else(|| panic!("the quick start waits with `{ROLLOUT}`"));
    (before.to_string(), after.to_string())
}

#[test]
fn e2e_the_readme_quick_start_ends_with_opstatus_get_finding_the_status() {
    let blocks = section_blocks("README.md", "## Quick start");
    let (before, after) = quick_start();
    assert_eq!(after.trim(), "opstatus get", "the last step is `opstatus get`, with no --namespace");
    let expected = blocks.last().filter(|(info, _)| info.is_empty()).expect("the quick start ends with what get shows");

    let cp = ControlPlane::start();
    let laptop = Laptop::new(&cp);
    laptop.run(&before);
    let _pod = run_the_pod(&cp, "kube9-system");

    // The last step, from the laptop.
    let shown = laptop.run(&after);
    for line in expected.1.lines().filter(|l| !l.trim().is_empty()) {
        assert!(shown.lines().any(|l| l == line), "the README promises {line:?}; opstatus get showed:\n{shown}");
    }
    println!("e2e quick start on kube-apiserver {}: `opstatus get` showed\n{shown}", cp.git_version());
}

#[test]
fn e2e_olm_mode_without_olm_as_docs_olm_has_it() {
    let recipe = script(&section_blocks("docs/olm.md", "## Trying OLM mode without OLM"));
    let last = "kubectl -n kube9-system get operatorcondition";
    let at = recipe.find(last).unwrap_or_else(|| panic!("the recipe ends with `{last} …`"));
    let (setup, check) = recipe.split_at(at);
    assert!(setup.contains("kubectl -n kube9-system set env deployment/opstatus"), "{setup}");

    let cp = ControlPlane::start();
    let laptop = Laptop::new(&cp);
    laptop.run(&quick_start().0);
    laptop.run(setup);
    // `set env` rolled the Deployment: its new pod, as kubelet would start it.
    let pod = run_the_pod(&cp, "kube9-system");
    let printed = wait_for(Duration::from_secs(30), Duration::from_millis(250), || {
        laptop.try_run(check).ok().filter(|out| out == "True")
    });
    assert!(
        printed.is_some(),
        "the recipe's last command never printed True: {:?}\n{}",
        laptop.try_run(check),
        pod.agent.stderr()
    );
    println!("e2e OLM mode without OLM on kube-apiserver {}: Upgradeable=True", cp.git_version());
}
