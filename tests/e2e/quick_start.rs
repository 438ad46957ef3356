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
//! A control plane of its own: the quick start owns kube9-system and
//! default, which other tests of the shared one write and delete.

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

/// The fenced blocks of the README's quick start, dedented: (info string, body).
fn quick_start_blocks() -> Vec<(String, String)> {
    let readme = std::fs::read_to_string(Path::new(ROOT).join("README.md")).unwrap();
    let section = readme.split("\n## Quick start\n").nth(1).expect("README.md has a `## Quick start` section");
    let section = section.split("\n## ").next().unwrap();
    let mut blocks = Vec::new();
    let mut lines = section.lines();
    while let Some(line) = lines.next() {
        let indent = line.len() - line.trim_start().len();
        let Some(info) = line.trim_start().strip_prefix("```") else { continue };
        let mut body = String::new();
        for line in lines.by_ref() {
            if line.trim_start().starts_with("```") {
                break;
            }
            body.push_str(line.get(indent..).unwrap_or(line.trim_start()));
            body.push('\n');
        }
        blocks.push((info.trim().to_string(), body));
    }
    blocks
}

/// Runs `script` with bash (errexit, pipefail) in `dir`; its stdout.
fn bash(script: &str, dir: &Path, env: &[(&str, String)]) -> String {
    let mut c = Command::new("bash");
    // Nothing of the developer's environment leaks in; HOME holds kubectl's cache.
    c.args(["-euo", "pipefail", "-c", script]).current_dir(dir).env_clear().env("HOME", dir);
    for (k, v) in env {
        c.env(k, v);
    }
    let out = c.output().expect("bash");
    assert!(
        out.status.success(),
        "the README's quick start failed at:\n{script}\nstdout: {}\nstderr: {}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).unwrap()
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

#[test]
fn e2e_the_readme_quick_start_ends_with_opstatus_get_finding_the_status() {
    let blocks = quick_start_blocks();
    let script: String = blocks.iter().filter(|(info, _)| info == "sh").map(|(_, b)| b.as_str()).collect();
    let (before, after) =
        script.split_once(&format!("{ROLLOUT}\n")).unwrap_or_else(|| panic!("the quick start waits with `{ROLLOUT}`"));
    assert_eq!(after.trim(), "opstatus get", "the last step is `opstatus get`, with no --namespace");
    let expected = blocks.last().filter(|(info, _)| info.is_empty()).expect("the quick start ends with what get shows");

    let cp = ControlPlane::start();
    // A checkout: the quick start runs from the repository's root.
    let checkout = TempDir::new("quick-start");
    let copied = Command::new("cp").arg("-r").arg(Path::new(ROOT).join("manifests")).arg(checkout.path()).status();
    assert!(copied.unwrap().success());
    let bin = checkout.path().join("bin");
    std::fs::create_dir(&bin).unwrap();
    std::os::unix::fs::symlink(opstatus_bin(), bin.join("opstatus")).unwrap();
    let path = format!("{}:{}", bin.display(), std::env::var("PATH").unwrap_or_default());
    let env = [("KUBECONFIG", cp.kubeconfig().to_string()), ("IMAGE", IMAGE.to_string()), ("PATH", path)];
    bash(before, checkout.path(), &env);

    // The pod the Deployment asks for, as kubelet would start it.
    let ns = "kube9-system";
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
    let mut pod_env = pod_env(cp.port(), &sa);
    for entry in container["env"].as_array().unwrap() {
        let value = env_value(entry, ns, pod, &template["metadata"]["labels"]);
        pod_env.push((entry["name"].as_str().unwrap().to_string(), value));
    }
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let agent = RunningAgent::start(&opstatus_bin(), &args, &pod_env);
    let ready = run.path().join("ready");
    let written = wait_for(Duration::from_secs(30), Duration::from_millis(100), || {
        (ready.exists() && cp.configmap(ns, "kube9-operator-status").is_some()).then_some(())
    });
    assert!(written.is_some(), "the pod wrote no status and is not ready: {}", agent.stderr());

    // The last step, from the laptop.
    let shown = bash(after, checkout.path(), &env);
    for line in expected.1.lines().filter(|l| !l.trim().is_empty()) {
        assert!(shown.lines().any(|l| l == line), "the README promises {line:?}; opstatus get showed:\n{shown}");
    }
    println!("e2e quick start on kube-apiserver {}: `opstatus get` showed\n{shown}", cp.git_version());
}
