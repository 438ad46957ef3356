//! The kubebuilder-layout operator (tests/fixtures/kubebuilder-operator:
//! `config/default` with `namespace: gadget-system` and `namePrefix:
//! gadget-` over its own RBAC and manager, the ServiceAccount `manager`,
//! the Deployment `controller-manager`, two replicas electing a leader)
//! with opstatus added as docs/install.md's "Where the ConfigMap must
//! live" says, with its leader-election variable: a reader's directory,
//! nothing edited but what the docs tell a reader to set.

use super::TempDir;
use super::control_plane::ControlPlane;
use super::markdown::{opstatus_target_for, snippets_with};
use serde_json::Value;
use std::path::Path;
use std::process::Command;

const ROOT: &str = env!("CARGO_MANIFEST_DIR");

/// The operator's namespace, Deployment and ServiceAccount as rendered.
pub const NAMESPACE: &str = "gadget-system";
pub const DEPLOYMENT: &str = "gadget-controller-manager";
pub const ACCOUNT: &str = "gadget-manager";

/// The Lease the test plays the operator's leader election with.
pub const LEASE: &str = "gadget.example.com";

/// How the overlay is set up beyond the docs' words.
pub struct Layout<'a> {
    /// `opstatus` (native sidecar) or `opstatus-plain`.
    pub sidecar: &'a str,
    /// The opstatus image, for `images:` (the docs' placeholder when empty).
    pub image: &'a str,
    /// The operator's image (the fixture's `controller:latest` when empty).
    pub operator_image: &'a str,
    /// Added to the operator's `config/default` (`nameSuffix: -v2`).
    pub operator_extra: &'a str,
    /// More components of the operator overlay, under `manifests/components`.
    pub components: &'a [&'a str],
    /// More env entries for the sidecar, YAML at the docs' indentation.
    pub env: &'a str,
}

impl Default for Layout<'_> {
    fn default() -> Self {
        Layout { sidecar: "opstatus", image: "", operator_image: "", operator_extra: "", components: &[], env: "" }
    }
}

/// The env entry docs/install.md's "With leader election" adds, for the
/// Lease [`LEASE`].
fn follow_lease() -> String {
    let text = std::fs::read_to_string(Path::new(ROOT).join("docs/install.md")).unwrap();
    let blocks = super::markdown::fenced_blocks(&text);
    let (_, body) = blocks.iter().find(|(_, b)| b.contains("- name: OPSTATUS_FOLLOW_LEADER_LEASE")).expect("the docs");
    assert!(body.contains("value: my-operator.example.com"), "{body}");
    body.replace("my-operator.example.com", LEASE)
}

/// The reader's directory: `config/` (the operator), `opstatus/manifests`
/// (a copy), and `my-overlay` from the docs' kube9-system snippet (its
/// operator overlay in `gadget-system`, its `opstatus-target` naming
/// `controller-manager` and `manager` as the operator's files do), with
/// the leader-election variable.
pub fn workspace(layout: &Layout<'_>) -> TempDir {
    let dir = TempDir::new("kubebuilder");
    std::fs::create_dir_all(dir.path().join("opstatus")).unwrap();
    for (from, to) in [("manifests", "opstatus/manifests"), ("tests/fixtures/kubebuilder-operator/config", "config")] {
        let ok = Command::new("cp").arg("-r").arg(Path::new(ROOT).join(from)).arg(dir.path().join(to)).status();
        assert!(ok.unwrap().success());
    }
    let default = dir.path().join("config/default/kustomization.yaml");
    let text = std::fs::read_to_string(&default).unwrap() + layout.operator_extra;
    std::fs::write(default, text).unwrap();
    let snippet = snippets_with("docs/install.md", "# my-overlay/operator/kustomization.yaml", "")
        .into_iter()
        .next()
        .expect("docs/install.md: the kube9-system overlay");
    let mut env = follow_lease();
    env.push_str(layout.env);
    for (path, text) in snippet {
        let mut text = match path.as_str() {
            "my-overlay/opstatus-target/kustomization.yaml" => opstatus_target_for("controller-manager", "manager"),
            _ => text.replace("my-operator-system", NAMESPACE),
        };
        if path == "my-overlay/operator/kustomization.yaml" {
            let anchor = "              valueFrom: {fieldRef: {fieldPath: metadata.namespace}}\n";
            assert!(text.contains(anchor), "{text}");
            text = text.replacen(anchor, &format!("{anchor}{env}"), 1);
            let mut components = String::new();
            for c in layout.components {
                components.push_str(&format!("- ../../opstatus/manifests/components/{c}\n"));
            }
            text = text.replace(
                "- ../../opstatus/manifests/components/opstatus\n",
                &format!("- ../../opstatus/manifests/components/{}\n{components}", layout.sidecar),
            );
            if layout.sidecar == "opstatus-plain" {
                text = text.replace("initContainers:", "containers:");
            }
            if !layout.image.is_empty() {
                text = text.replace("newName: registry.example/team/opstatus}", layout.image);
            }
            if !layout.operator_image.is_empty() {
                text =
                    text.replace("images:\n", &format!("images:\n- {{name: controller, {}}}\n", layout.operator_image));
            }
        }
        let path = dir.path().join(path);
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(path, text).unwrap();
    }
    dir
}

/// `kubectl kustomize` of the workspace's overlay: the YAML, or its error.
pub fn render(dir: &TempDir) -> Result<String, String> {
    super::kustomize(&dir.path().join("my-overlay"))
}

/// Who holds the publisher lock of the status in kube9-system.
pub fn holder(cp: &ControlPlane) -> Option<String> {
    let cm = cp.configmap("kube9-system", "kube9-operator-status")?;
    let record: Value =
        serde_json::from_str(cm["metadata"]["annotations"]["opstatus.kube9.dev/publisher"].as_str()?).ok()?;
    Some(record["holderIdentity"].as_str()?.to_string())
}

/// The operator's leader election, as controller-runtime writes its Lease:
/// the pod `pod` leads, just renewed.
pub fn lead(cp: &ControlPlane, pod: &str) {
    let renewed = opstatus::testing::format_rfc3339(std::time::SystemTime::now()).replace('Z', ".000000Z");
    let lease = format!(
        "apiVersion: coordination.k8s.io/v1\nkind: Lease\nmetadata: {{name: {LEASE}, namespace: {NAMESPACE}}}\n\
         spec: {{holderIdentity: {pod}_0b9f, leaseDurationSeconds: 60, renewTime: \"{renewed}\"}}\n"
    );
    cp.kubectl_stdin_ok(&["apply", "-f", "-"], Some(&lease));
}

/// The rendered objects, parsed.
pub fn objects(yaml: &str) -> Vec<serde_json::Value> {
    yaml.split("\n---\n")
        .map(|doc| opstatus::testing::parse_yaml(doc).unwrap_or_else(|e| panic!("{e}: {doc}")))
        .collect()
}

/// When a test ends, passed or failed, it leaves kube9-system's status to
/// nobody, for the next test that writes it there: its writers gone (the
/// Deployment named, deleted with its Pods), then the status. Never panics
/// (it runs while a failed test unwinds).
pub struct Leave<'a>(pub &'a ControlPlane, pub Option<&'a str>);

impl Drop for Leave<'_> {
    fn drop(&mut self) {
        if let Some(deployment) = self.1 {
            let deployment = format!("deployment/{deployment}");
            let wait = ["--cascade=foreground", "--wait", "--timeout=180s", "--ignore-not-found"];
            let _ = self.0.kubectl(&[&["-n", NAMESPACE, "delete", &deployment][..], &wait[..]].concat(), None);
        }
        let _ = self.0.kubectl(
            &["-n", "kube9-system", "delete", "configmap", "kube9-operator-status", "--ignore-not-found"],
            None,
        );
    }
}
