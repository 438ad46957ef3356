//! The opstatus component is told which Deployment to add the sidecar to,
//! in one place of the user's overlay (the install guide's
//! `opstatus-target`), whatever the operator's names and labels: rendered
//! offline with kubectl's kustomize over an operator that is not shaped
//! like kubebuilder's (tests/fixtures/my-operator) and over one that is
//! (tests/fixtures/sample-operator). A wrong name, or no target at all,
//! fails the render instead of adding the RBAC without the sidecar.

use crate::support::TempDir;
use crate::support::markdown::opstatus_target;
use std::path::Path;
use std::process::Command;

const ROOT: &str = env!("CARGO_MANIFEST_DIR");

/// An overlay beside a copy of `manifests/` (as `opstatus/manifests`) and
/// of `operator` (as `config/default`): `components` after `opstatus-target`
/// (when `target` names a Deployment). The render, or kustomize's error.
fn render(operator: &str, namespace: &str, target: Option<&str>, components: &[&str]) -> Result<String, String> {
    let dir = TempDir::new("component-target");
    std::fs::create_dir_all(dir.path().join("opstatus")).unwrap();
    std::fs::create_dir_all(dir.path().join("config")).unwrap();
    std::fs::create_dir_all(dir.path().join("my-overlay/opstatus-target")).unwrap();
    for (from, to) in [("manifests", "opstatus/manifests"), (operator, "config/default")] {
        let ok = Command::new("cp").arg("-r").arg(Path::new(ROOT).join(from)).arg(dir.path().join(to)).status();
        assert!(ok.unwrap().success());
    }
    let mut listed: Vec<String> = components.iter().map(|c| format!("../opstatus/manifests/components/{c}")).collect();
    if let Some(deployment) = target {
        listed.insert(0, "opstatus-target".into());
        std::fs::write(dir.path().join("my-overlay/opstatus-target/kustomization.yaml"), opstatus_target(deployment))
            .unwrap();
    }
    let overlay = format!(
        "apiVersion: kustomize.config.k8s.io/v1beta1\nkind: Kustomization\nnamespace: {namespace}\n\
         resources: [../config/default]\ncomponents:\n- {}\n",
        listed.join("\n- ")
    );
    std::fs::write(dir.path().join("my-overlay/kustomization.yaml"), overlay).unwrap();
    crate::support::kustomize(&dir.path().join("my-overlay"))
}

/// The rendered document of `kind` named `name`.
fn document<'a>(yaml: &'a str, kind: &str, name: &str) -> Option<&'a str> {
    // Each document but the last ends at the separator, without its newline.
    let has = |d: &str, line: String| d.contains(&line) || d.ends_with(line.trim_end());
    yaml.split("\n---\n").find(|d| has(d, format!("kind: {kind}\n")) && has(d, format!("\n  name: {name}\n")))
}

#[test]
fn the_sidecar_goes_to_the_named_deployment_of_an_operator_not_shaped_like_kubebuilders() {
    let yaml = render("tests/fixtures/my-operator", "my-operator-system", Some("my-operator"), &["opstatus"])
        .unwrap_or_else(|e| panic!("the render fails: {e}"));
    let operator = document(&yaml, "Deployment", "my-operator").expect("the operator's Deployment");
    assert!(operator.contains("restartPolicy: Always") && operator.contains("image: opstatus:0.1.0"), "{operator}");
    assert!(operator.contains("opstatus.kube9.dev/sidecar: \"true\""), "the pod label the PodMonitor selects");
    let other = document(&yaml, "Deployment", "metrics-proxy").expect("the unrelated Deployment");
    assert!(!other.contains("opstatus"), "the component touched another Deployment: {other}");
    let binding = document(&yaml, "RoleBinding", "opstatus-status-writer").expect("the writer's binding");
    assert!(
        binding.contains("- kind: ServiceAccount\n  name: my-operator\n  namespace: my-operator-system"),
        "{binding}"
    );
    assert!(!yaml.contains("name: opstatus-target"), "the target is local config, never applied");
}

#[test]
fn the_same_target_fits_a_kubebuilder_scaffold_with_its_name_prefix() {
    for named in ["sample-controller-manager", "controller-manager"] {
        let yaml = render("tests/fixtures/sample-operator", "sample-system", Some(named), &["opstatus-plain"])
            .unwrap_or_else(|e| panic!("{named}: the render fails: {e}"));
        let operator = document(&yaml, "Deployment", "sample-controller-manager").expect("the operator");
        assert!(operator.contains("  name: opstatus\n"), "{named}: no sidecar: {operator}");
        assert!(!document(&yaml, "Deployment", "sample-webhook").unwrap().contains("opstatus"), "{named}");
        let binding = document(&yaml, "RoleBinding", "opstatus-status-writer").unwrap();
        assert!(binding.contains("  name: sample-controller-manager\n"), "{named}: the prefixed account: {binding}");
    }
}

#[test]
fn a_wrong_deployment_name_fails_the_render() {
    let err = render("tests/fixtures/my-operator", "my-operator-system", Some("my-operatr"), &["opstatus"])
        .expect_err("a target that names no Deployment");
    assert!(err.contains("nothing selected by") && err.contains("my-operatr"), "{err}");
}

#[test]
fn without_a_target_the_render_fails_instead_of_adding_rbac_without_a_sidecar() {
    // A Deployment without kubebuilder's label, and an account kubebuilder's
    // name: nothing tells the component which Deployment is the operator.
    for component in ["opstatus", "opstatus-plain"] {
        let err = render("tests/fixtures/my-operator", "my-operator-system", None, &[component])
            .expect_err("no opstatus-target: the render must fail");
        assert!(err.contains("nothing selected by") && err.contains("opstatus-target"), "{component}: {err}");
    }
}

#[test]
fn olm_wiring_binds_the_operators_account_with_its_namespace_for_its_own_type() {
    let dir_target = opstatus_target("my-operator");
    assert!(dir_target.contains("configMapGenerator:"), "{dir_target}");
    // The OLM literals, as docs/olm.md's overlay gives them.
    let olm = crate::support::markdown::snippets_with("docs/olm.md", "opstatus-olm", "");
    assert!(!olm.is_empty(), "docs/olm.md has the sidecar's OLM overlay");
    let yaml = render_with_olm_literals();
    let role = document(&yaml, "Role", "opstatus-probe-reader").expect("the probe reader");
    assert!(role.contains("- example.com\n") && role.contains("- widgets\n"), "{role}");
    assert!(!yaml.contains("foos"), "nothing of the example's type: {yaml}");
    let crd = document(&yaml, "ClusterRole", "opstatus-crd-reader.widgets.example.com").expect("named for its CRD");
    assert!(crd.contains("- widgets.example.com\n"), "{crd}");
    let binding = document(&yaml, "ClusterRoleBinding", "opstatus-crd-reader.widgets.example.com").unwrap();
    assert!(binding.contains("  name: my-operator\n  namespace: my-operator-system"), "{binding}");
}

/// The sidecar overlay with opstatus-olm and the target's probe literals.
fn render_with_olm_literals() -> String {
    let literals = "- name: opstatus-target\n  literals: [probeGroup=example.com, probeResource=widgets]\n";
    let target = opstatus_target("my-operator").replacen("- name: opstatus-target\n", literals, 1);
    assert!(target.contains("probeResource=widgets"), "{target}");
    let dir = TempDir::new("component-olm");
    for (from, to) in [("manifests", "opstatus/manifests"), ("tests/fixtures/my-operator", "config/default")] {
        std::fs::create_dir_all(dir.path().join(to).parent().unwrap()).unwrap();
        let ok = Command::new("cp").arg("-r").arg(Path::new(ROOT).join(from)).arg(dir.path().join(to)).status();
        assert!(ok.unwrap().success());
    }
    std::fs::create_dir_all(dir.path().join("my-overlay/opstatus-target")).unwrap();
    std::fs::write(dir.path().join("my-overlay/opstatus-target/kustomization.yaml"), target).unwrap();
    let overlay = "namespace: my-operator-system\nresources: [../config/default]\ncomponents:\n- opstatus-target\n\
                   - ../opstatus/manifests/components/opstatus\n- ../opstatus/manifests/components/opstatus-olm\n";
    std::fs::write(dir.path().join("my-overlay/kustomization.yaml"), overlay).unwrap();
    let out = Command::new("kubectl")
        .args(["kustomize", dir.path().join("my-overlay").to_str().unwrap()])
        .env("KUBECONFIG", "/dev/null")
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    String::from_utf8(out.stdout).unwrap()
}
