//! End to end, real kube-apiserver: every kustomization under manifests/
//! renders offline and the API server accepts what it renders, in a
//! server-side dry run (there is no scheduler to run pods) with strict field
//! validation (`--validate=strict`), so a misspelt field fails the test.
//!
//! Run on both control planes (scripts/test.sh). On v1.36 every
//! kustomization is applied, native sidecars (`initContainers[]` with
//! `restartPolicy: Always`) included, and the server itself rejects unknown
//! fields (`fieldValidation=Strict`). The Debian v1.20 build predates both:
//! it drops unknown fields silently and rejects a native sidecar's probes,
//! so there a kustomization with a native sidecar is named as not validated
//! (the v1.36 run is the one that proves it), and the misspelling test
//! asserts the old server's blindness instead.
//!
//! Each is rendered as the docs say to use it: from an overlay that sets
//! the namespace, with `manifests/base` beside those that bind its
//! ServiceAccount (olm, openshift): their ClusterRoleBindings name no
//! namespace, which kustomize fills in from that ServiceAccount, and which
//! the API server refuses when they are applied alone.
//!
//! Directories whose kustomization is a `kind: Component` cannot be built
//! alone: they are listed and left to their own tests.

use crate::support;

use serde_json::{Value, json};
use std::path::{Path, PathBuf};
use support::TempDir;
use support::control_plane::{ControlPlane, ROOT, relative_path, shared, unique_namespace};

fn is_component(dir: &Path) -> bool {
    let text = std::fs::read_to_string(dir.join("kustomization.yaml")).unwrap();
    text.lines().any(|l| l.trim() == "kind: Component")
}

/// Every directory under `dir` with a kustomization.yaml: (buildable, components).
fn kustomizations(dir: &Path, found: &mut Vec<PathBuf>, components: &mut Vec<PathBuf>) {
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            kustomizations(&path, found, components);
        } else if path.file_name().is_some_and(|n| n == "kustomization.yaml") {
            let dir = path.parent().unwrap().to_path_buf();
            if is_component(&dir) { components.push(dir) } else { found.push(dir) }
        }
    }
}

/// `dir` rendered from an overlay that sets namespace `ns`, with
/// `manifests/base` beside it when `dir` does not hold a ServiceAccount of
/// its own (it binds base's).
fn render_in(cp: &ControlPlane, dir: &Path, ns: &str) -> String {
    let overlay = TempDir::new("manifests-overlay");
    let rel = |p: &Path| relative_path(overlay.path(), p).display().to_string();
    let alone = cp.kubectl_ok(&["kustomize", dir.to_str().unwrap()]);
    let mut resources = vec![rel(dir)];
    if !alone.contains("\nkind: ServiceAccount\n") {
        resources.insert(0, rel(&Path::new(ROOT).join("manifests/base")));
    }
    let text = format!("namespace: {ns}\nresources:\n- {}\n", resources.join("\n- "));
    std::fs::write(overlay.path().join("kustomization.yaml"), text).unwrap();
    cp.kubectl_ok(&["kustomize", overlay.path().to_str().unwrap()])
}

/// The objects of a YAML stream, as JSON (kubectl parses; nothing is sent).
fn objects(cp: &ControlPlane, yaml: &str) -> Vec<Value> {
    let out =
        cp.kubectl_stdin_ok(&["create", "--dry-run=client", "--validate=false", "-o", "json", "-f", "-"], Some(yaml));
    let values: Vec<Value> = serde_json::Deserializer::from_str(&out).into_iter().map(Result::unwrap).collect();
    values.into_iter().flat_map(list_items).collect()
}

fn list_items(v: Value) -> Vec<Value> {
    if v["kind"] == "List" { v["items"].as_array().cloned().unwrap_or_default() } else { vec![v] }
}

/// `(container name, restartPolicy)` of every init container anywhere in
/// `v` (a Deployment's pod template, a CronJob's, a Pod's).
fn init_containers(v: &Value, found: &mut Vec<(String, Option<String>)>) {
    match v {
        Value::Object(map) => {
            for (key, value) in map {
                if key == "initContainers" {
                    for c in value.as_array().into_iter().flatten() {
                        found.push((
                            c["name"].as_str().unwrap_or_default().to_string(),
                            c["restartPolicy"].as_str().map(str::to_string),
                        ));
                    }
                } else {
                    init_containers(value, found);
                }
            }
        }
        Value::Array(items) => items.iter().for_each(|i| init_containers(i, found)),
        _ => {}
    }
}

/// The native sidecars (init containers with `restartPolicy: Always`) of some objects.
fn native_sidecars(objects: &[Value]) -> Vec<String> {
    let mut all = Vec::new();
    for o in objects {
        let mut found = Vec::new();
        init_containers(o, &mut found);
        all.extend(
            found
                .into_iter()
                .filter(|(_, policy)| policy.as_deref() == Some("Always"))
                .map(|(name, _)| format!("{} {}: {name}", o["kind"].as_str().unwrap_or("?"), o["metadata"]["name"])),
        );
    }
    all
}

#[test]
fn e2e_every_kustomization_renders_and_the_api_server_accepts_it_strictly() {
    let cp = shared();
    let (mut dirs, mut components) = (Vec::new(), Vec::new());
    kustomizations(&Path::new(ROOT).join("manifests"), &mut dirs, &mut components);
    dirs.sort();
    assert!(dirs.len() >= 4, "expected base, olm, openshift and the sidecar example: {dirs:?}");
    for c in &components {
        println!("{}: kind: Component, not buildable alone: skipped here", c.strip_prefix(ROOT).unwrap().display());
    }
    let mut not_validated = Vec::new();
    for dir in &dirs {
        let name = dir.strip_prefix(ROOT).unwrap().display().to_string();
        // Into a namespace of its own, set by the overlay as a user's would.
        let ns = unique_namespace("manifests");
        cp.create_namespace(&ns);
        let rendered = render_in(cp, dir, &ns);
        assert!(rendered.contains("kind: Role") || rendered.contains("kind: ClusterRole"), "{name}: no RBAC");
        // Every object follows the overlay's namespace. A value naming
        // kube9-system stays (the OLM example's sidecar writes its status
        // there, by design: tests/e2e/olm_kube9.rs).
        let left =
            rendered.lines().map(str::trim).find(|l| *l == "namespace: kube9-system" || *l == "name: kube9-system");
        assert!(left.is_none(), "{name}: the overlay's namespace did not reach everything: {left:?}");
        let sent = objects(cp, &rendered);
        let sidecars = native_sidecars(&sent);
        if cp.is_debian_1_20() && !sidecars.is_empty() {
            println!(
                "{name}: NOT validated on kube-apiserver {} (v1.20 predates native sidecars: {sidecars:?}); \
                 the v1.36 run of scripts/test.sh validates it",
                cp.git_version()
            );
            not_validated.push(name);
            continue;
        }
        let out = cp.kubectl(
            &["apply", "-n", &ns, "--dry-run=server", "--validate=strict", "-o", "json", "-f", "-"],
            Some(&rendered),
        );
        assert!(
            out.status.success(),
            "{name}: the API server ({}) refused it under strict validation: {}",
            cp.git_version(),
            String::from_utf8_lossy(&out.stderr)
        );
        let answered: Vec<Value> = list_items(serde_json::from_slice(&out.stdout).unwrap());
        assert_eq!(answered.len(), sent.len(), "{name}: one answer per object");
        for o in &answered {
            // Set by the server: the objects went through its admission.
            assert!(o["metadata"]["creationTimestamp"].is_string(), "{name}: not a server answer: {o}");
        }
        // A server that dropped the field (as v1.20 would) would not answer it back.
        assert_eq!(native_sidecars(&answered), sidecars, "{name}: native sidecars kept by the server");
        println!(
            "{name}: {} objects accepted by kube-apiserver {} (dry run, strict){}",
            sent.len(),
            cp.git_version(),
            if sidecars.is_empty() { String::new() } else { format!(", native sidecars {sidecars:?}") }
        );
    }
    assert!(
        !cp.is_debian_1_20() || not_validated.len() < dirs.len(),
        "v1.20 validated none of the kustomizations: {not_validated:?}"
    );
    assert!(cp.is_debian_1_20() || not_validated.is_empty());
}

/// The sidecar example's Deployment, rendered, in namespace `ns`.
fn example_deployment(cp: &ControlPlane, ns: &str) -> Value {
    let dir = Path::new(ROOT).join("manifests/examples/sidecar");
    let rendered = cp.kubectl_ok(&["kustomize", dir.to_str().unwrap()]);
    let mut deployment =
        objects(cp, &rendered).into_iter().find(|o| o["kind"] == "Deployment").expect("the example has a Deployment");
    deployment["metadata"]["namespace"] = json!(ns);
    deployment
}

/// The same Deployment with the opstatus container moved to a native
/// sidecar (an init container with `restartPolicy: Always`).
fn as_native_sidecar(deployment: &Value) -> Value {
    let mut d = deployment.clone();
    let spec = &mut d["spec"]["template"]["spec"];
    let containers = spec["containers"].as_array_mut().unwrap();
    let at = containers.iter().position(|c| c["name"] == "opstatus").expect("an opstatus container");
    let mut sidecar = containers.remove(at);
    sidecar["restartPolicy"] = json!("Always");
    spec["initContainers"] = json!([sidecar]);
    d
}

/// POSTs `object` to the Deployments of `ns` as a dry run with the server's
/// strict field validation (what `kubectl --validate=strict` asks a v1.25+
/// server for), bypassing kubectl's own client-side checks.
fn strict_dry_run(cp: &ControlPlane, ns: &str, object: &Value) -> Result<Value, String> {
    let uri = format!("/apis/apps/v1/namespaces/{ns}/deployments?dryRun=All&fieldValidation=Strict");
    let out = cp.kubectl(&["create", "--raw", &uri, "-f", "-"], Some(&object.to_string()));
    if out.status.success() {
        Ok(serde_json::from_slice(&out.stdout).unwrap())
    } else {
        Err(String::from_utf8_lossy(&out.stderr).into_owned())
    }
}

#[test]
fn e2e_a_misspelt_field_fails_under_strict_validation() {
    let cp = shared();
    let ns = unique_namespace("misspelt");
    cp.create_namespace(&ns);
    let good = example_deployment(cp, &ns);
    let opstatus = good["spec"]["template"]["spec"]["containers"]
        .as_array()
        .unwrap()
        .iter()
        .position(|c| c["name"] == "opstatus")
        .unwrap();
    let mut misspelt = good.clone();
    misspelt["spec"]["template"]["spec"]["containers"][opstatus]["imagePullPolicyy"] = json!("IfNotPresent");
    let field = format!("spec.template.spec.containers[{opstatus}].imagePullPolicyy");

    strict_dry_run(cp, &ns, &good).expect("the example as shipped is accepted");
    if cp.is_debian_1_20() {
        // The old server cannot check spelling: it drops the field and says nothing.
        let answer = strict_dry_run(cp, &ns, &misspelt).expect("v1.20 accepts unknown fields");
        assert!(answer["spec"]["template"]["spec"]["containers"][opstatus].get("imagePullPolicyy").is_none());
        println!(
            "kube-apiserver {} (v1.20) drops {field} silently: strict field validation is proven on the v1.36 run",
            cp.git_version()
        );
        return;
    }

    // The server itself refuses the misspelling...
    let refused = strict_dry_run(cp, &ns, &misspelt).expect_err("a misspelt field must be refused");
    assert!(refused.contains(&format!("strict decoding error: unknown field \"{field}\"")), "{refused}");
    // ...and so does the manifests test's command, whoever catches it first.
    let yaml = misspelt.to_string();
    let out = cp.kubectl(&["apply", "-n", &ns, "--dry-run=server", "--validate=strict", "-f", "-"], Some(&yaml));
    assert!(!out.status.success(), "kubectl apply --validate=strict accepted {field}");
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("imagePullPolicyy"),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );

    // Native sidecars are understood, not dropped: accepted and answered
    // back; misspelt, refused; and their rules enforced (probes on an init
    // container need restartPolicy: Always).
    let native = as_native_sidecar(&good);
    let answer = strict_dry_run(cp, &ns, &native).expect("a native sidecar is accepted");
    assert_eq!(answer["spec"]["template"]["spec"]["initContainers"][0]["restartPolicy"], "Always");
    let mut native_misspelt = native.clone();
    let sidecar = &mut native_misspelt["spec"]["template"]["spec"]["initContainers"][0];
    sidecar["restartPolicyy"] = sidecar.as_object_mut().unwrap().remove("restartPolicy").unwrap();
    let refused = strict_dry_run(cp, &ns, &native_misspelt).expect_err("restartPolicyy must be refused");
    assert!(
        refused
            .contains("strict decoding error: unknown field \"spec.template.spec.initContainers[0].restartPolicyy\""),
        "{refused}"
    );
    let mut not_a_sidecar = native.clone();
    not_a_sidecar["spec"]["template"]["spec"]["initContainers"][0]["restartPolicy"] = json!("Never");
    let refused = strict_dry_run(cp, &ns, &not_a_sidecar).expect_err("probes on a plain init container");
    assert!(refused.contains("may not be set for init containers without restartPolicy=Always"), "{refused}");
    println!(
        "kube-apiserver {}: refused {field} and initContainers[0].restartPolicyy (strict), accepted the native sidecar",
        cp.git_version()
    );
}

/// The ServiceAccount subjects of every ClusterRoleBinding: (binding, namespace).
fn cluster_binding_subjects(objects: &[Value]) -> Vec<(String, Option<String>)> {
    let bindings = objects.iter().filter(|o| o["kind"] == "ClusterRoleBinding");
    bindings
        .flat_map(|b| {
            let name = b["metadata"]["name"].as_str().unwrap().to_string();
            let subjects = b["subjects"].as_array().cloned().unwrap_or_default();
            subjects
                .into_iter()
                .filter(|s| s["kind"] == "ServiceAccount" && s["name"] == "opstatus")
                .map(move |s| (name.clone(), s["namespace"].as_str().map(str::to_string)))
        })
        .collect()
}

/// manifests/olm and manifests/openshift bind the `opstatus` ServiceAccount
/// of the namespace the overlay sets (kustomize fills the subject in from
/// base's ServiceAccount); rendered alone, the API server refuses their
/// ClusterRoleBindings instead of binding another namespace's account.
#[test]
fn e2e_the_cluster_role_bindings_follow_the_overlays_namespace_or_are_refused() {
    let cp = shared();
    for dir in ["manifests/olm", "manifests/openshift"] {
        let path = Path::new(ROOT).join(dir);
        let ns = unique_namespace("bindings");
        cp.create_namespace(&ns);
        let subjects = cluster_binding_subjects(&objects(cp, &render_in(cp, &path, &ns)));
        assert!(!subjects.is_empty(), "{dir}: no ClusterRoleBinding of the opstatus ServiceAccount");
        for (binding, namespace) in &subjects {
            assert_eq!(namespace.as_deref(), Some(ns.as_str()), "{dir}: {binding} binds another namespace's account");
        }

        let alone = cp.kubectl_ok(&["kustomize", path.to_str().unwrap()]);
        assert!(cluster_binding_subjects(&objects(cp, &alone)).iter().all(|(_, n)| n.is_none()), "{dir}: {alone}");
        let out = cp.kubectl(&["apply", "-n", &ns, "--dry-run=server", "-f", "-"], Some(&alone));
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(!out.status.success(), "{dir} alone was accepted");
        assert!(err.contains("subjects[0].namespace: Required value"), "{dir}: {err}");
        println!("{dir}: binds {ns}/opstatus from an overlay; alone, refused: {}", err.trim());
    }
}
