//! End to end, real kube-apiserver: an operator author's first hour, from
//! the docs' own snippets as written. The operator is not shaped like
//! kubebuilder's scaffold (tests/fixtures/my-operator: ServiceAccount and
//! Deployment `my-operator`, no `control-plane` label, its own CRD
//! `widgets.example.com`, an unrelated second Deployment); the install
//! guide's sidecar overlay with its `opstatus-target`, docs/olm.md's OLM
//! wiring for the Widgets (under OLM, and without OLM with the
//! OperatorCondition added), and the install guide's kube9-system overlay
//! are rendered over it beside a copy of `manifests/` (nothing copied into
//! the overlay, nothing edited but the namespace, made unique per run) and
//! applied with a server-side dry run; the namespaced RBAC is applied for
//! real and checked with `kubectl auth can-i` as the operator's account.
//!
//! The Debian v1.20 server predates native sidecars: there each snippet is
//! rendered with `opstatus-plain` and `containers:` instead, as the docs say
//! for such clusters, and the native variant is named as not validated.

use crate::support;

use support::TempDir;
use support::control_plane::{ControlPlane, ROOT, service_account_user, shared, unique_namespace};
use support::markdown::snippets_with;

const IMAGE: &str = "registry.example/team/opstatus";

/// A reader's directory for `files` (a snippet), the operator in the
/// namespace `ns` instead of `my-operator-system`; on a server without
/// native sidecars, the plain variant.
fn workspace(cp: &ControlPlane, files: &[(String, String)], ns: &str) -> TempDir {
    let dir = TempDir::new("first-hour");
    for (from, to) in [("manifests", "opstatus/manifests"), ("tests/fixtures/my-operator", "config/default")] {
        std::fs::create_dir_all(dir.path().join(to).parent().unwrap()).unwrap();
        let ok =
            std::process::Command::new("cp").arg("-r").arg(format!("{ROOT}/{from}")).arg(dir.path().join(to)).status();
        assert!(ok.unwrap().success());
    }
    let operator = dir.path().join("config/default/kustomization.yaml");
    let text = std::fs::read_to_string(&operator).unwrap().replace("my-operator-system", ns);
    std::fs::write(operator, text).unwrap();
    let predates_native_sidecars =
        !cp.kubectl(&["explain", "pods.spec.initContainers.restartPolicy"], None).status.success();
    for (path, text) in files {
        let mut text = text.replace("my-operator-system", ns);
        if predates_native_sidecars {
            text = text
                .replace("components/opstatus\n", "components/opstatus-plain\n")
                .replace("initContainers:", "containers:");
        }
        let path = dir.path().join(path);
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(path, text).unwrap();
    }
    dir
}

/// Renders the snippet's `my-overlay` and applies it with a server-side dry
/// run (strict where the server validates): the rendered YAML.
fn render_and_dry_run(cp: &ControlPlane, files: &[(String, String)], ns: &str) -> String {
    let dir = workspace(cp, files, ns);
    let yaml = cp.kubectl_ok(&["kustomize", dir.path().join("my-overlay").to_str().unwrap()]);
    let documents = yaml.split("\n---\n").count();
    let out = cp.kubectl(&["apply", "--dry-run=server", "--validate=strict", "-f", "-"], Some(&yaml));
    let (stdout, stderr) = (String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
    assert!(out.status.success(), "the API server refused the render: {stdout}{stderr}\n{yaml}");
    assert_eq!(stdout.matches("(server dry run)").count(), documents, "{stdout}");
    yaml
}

fn document<'a>(yaml: &'a str, kind: &str, name: &str) -> Option<&'a str> {
    // Each document but the last ends at the separator, without its newline.
    let has = |d: &str, line: String| d.contains(&line) || d.ends_with(line.trim_end());
    yaml.split("\n---\n").find(|d| has(d, format!("kind: {kind}\n")) && has(d, format!("\n  name: {name}\n")))
}

fn can_i(cp: &ControlPlane, ns: &str, verb: &str, what: &str) -> String {
    let user = service_account_user(ns, "my-operator");
    let out = cp.kubectl(&["auth", "can-i", verb, what, "-n", ns, "--as", &user], None);
    String::from_utf8_lossy(&out.stdout).trim().to_string()
}

#[test]
fn e2e_the_documented_sidecar_setup_with_olm_fits_an_operator_not_shaped_like_the_example() {
    let cp = shared();
    let ns = unique_namespace("first-hour");
    cp.create_namespace(&ns);
    let _ = cp.kubectl(&["create", "namespace", "kube9-system"], None);
    cp.install_crd("operatorconditions.operators.coreos.com");
    // The operator's CRD, installed for real so that `kubectl auth can-i`
    // resolves its resources (nothing else uses Widgets).
    cp.kubectl_ok(&["apply", "-f", &format!("{ROOT}/tests/fixtures/my-operator/widgets.example.com.yaml")]);
    cp.wait_established("widgets.example.com");
    let predates_native_sidecars =
        !cp.kubectl(&["explain", "pods.spec.initContainers.restartPolicy"], None).status.success();

    // The install guide's sidecar overlay.
    let marker = "the one place that names your operator";
    let install = snippets_with("docs/install.md", marker, IMAGE).into_iter().next().expect("the sidecar overlay");
    let yaml = render_and_dry_run(cp, &install, &ns);
    let operator = document(&yaml, "Deployment", "my-operator").expect("the operator");
    assert!(operator.contains(&format!("image: {IMAGE}:0.1.0")), "{operator}");
    assert!(!document(&yaml, "Deployment", "metrics-proxy").unwrap().contains("opstatus"));
    let binding = document(&yaml, "RoleBinding", "opstatus-status-writer").unwrap();
    assert!(binding.contains(&format!("  name: my-operator\n  namespace: {ns}")), "{binding}");

    // docs/olm.md: under OLM, and without OLM (the OperatorCondition and
    // OLM's Role added). The second's RBAC is applied for real.
    let olm = snippets_with("docs/olm.md", "components/opstatus-olm", IMAGE);
    assert_eq!(olm.len(), 2, "docs/olm.md: the sidecar's overlay under OLM and without OLM");
    let _ = render_and_dry_run(cp, &olm[0], &ns);
    let yaml = render_and_dry_run(cp, &olm[1], &ns);
    assert!(!yaml.contains("foos"), "nothing of the example's type");
    let crd_reader = document(&yaml, "ClusterRoleBinding", "opstatus-crd-reader.widgets.example.com").unwrap();
    assert!(crd_reader.contains(&format!("  name: my-operator\n  namespace: {ns}")), "{crd_reader}");
    let namespaced: Vec<&str> = yaml
        .split("\n---\n")
        .filter(|d| (d.contains("kind: Role\n") || d.contains("kind: RoleBinding\n")) && d.contains(&ns))
        .collect();
    cp.kubectl_stdin_ok(&["apply", "-f", "-"], Some(&namespaced.join("\n---\n")));
    for (verb, what, allowed) in [
        ("patch", "configmaps/kube9-operator-status", "yes"),
        ("patch", "configmaps/another", "no"),
        ("list", "widgets.example.com", "yes"),
        ("watch", "widgets.example.com", "yes"),
        ("list", "foos.example.com", "no"),
        ("update", "operatorconditions.operators.coreos.com/my-operator.v1.4.2", "yes"),
    ] {
        assert_eq!(can_i(cp, &ns, verb, what), allowed, "{verb} {what}");
    }

    // The install guide's kube9-system overlay: the Namespace, the Role
    // there for this operator's account, and nothing left over here but
    // the Events Role.
    let k9 = snippets_with("docs/install.md", "components/status-in-kube9-system", IMAGE);
    let yaml = render_and_dry_run(cp, &k9[0], &ns);
    assert!(document(&yaml, "Namespace", "kube9-system").is_some(), "one apply creates kube9-system");
    let writer = document(&yaml, "RoleBinding", "kube9-operator-status-writer").unwrap();
    assert!(writer.contains("namespace: kube9-system\n"), "{writer}");
    assert!(writer.contains(&format!("  name: my-operator\n  namespace: {ns}")), "{writer}");
    for leftover in ["opstatus-status-writer", "kube9-status-reader"] {
        assert!(!yaml.contains(&format!("name: {leftover}\n")), "{leftover} left in {ns}:\n{yaml}");
    }
    let events = document(&yaml, "Role", "opstatus-events").unwrap();
    assert!(events.contains(&format!("namespace: {ns}\n")) && events.contains("- events\n"), "{events}");
    let pod = document(&yaml, "Deployment", "my-operator").unwrap();
    assert!(pod.contains("value: kube9-system"), "{pod}");

    println!(
        "e2e first hour: the install guide's sidecar overlay, docs/olm.md's two OLM overlays and the kube9-system \
         overlay rendered over my-operator and accepted (server dry run, strict); {}",
        if predates_native_sidecars {
            "rendered with opstatus-plain: this server predates native sidecars (the native variant NOT VALIDATED here)"
        } else {
            "native sidecar validated"
        }
    );
}
