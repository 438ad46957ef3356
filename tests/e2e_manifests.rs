//! End to end, real kube-apiserver: every kustomization under manifests/
//! renders offline and the API server accepts what it renders (server-side
//! dry run: there is no scheduler to run pods).

mod support;

use std::path::{Path, PathBuf};
use support::control_plane::{ROOT, shared, unique_namespace};

fn kustomizations(dir: &Path, found: &mut Vec<PathBuf>) {
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            kustomizations(&path, found);
        } else if path.file_name().is_some_and(|n| n == "kustomization.yaml") {
            found.push(path.parent().unwrap().to_path_buf());
        }
    }
}

#[test]
fn e2e_every_kustomization_renders_and_the_api_server_accepts_it() {
    let cp = shared();
    let mut dirs = Vec::new();
    kustomizations(&Path::new(ROOT).join("manifests"), &mut dirs);
    dirs.sort();
    assert!(dirs.len() >= 4, "expected base, olm, openshift and the sidecar example: {dirs:?}");
    for dir in &dirs {
        let rendered = cp.kubectl_ok(&["kustomize", dir.to_str().unwrap()]);
        assert!(
            rendered.contains("kind: Role") || rendered.contains("kind: ClusterRole"),
            "{}: no RBAC",
            dir.display()
        );
        // Render into a namespace of its own; the example pins kube9-system.
        let ns = unique_namespace("manifests");
        cp.create_namespace(&ns);
        let rendered = rendered.replace("namespace: kube9-system", &format!("namespace: {ns}"));
        let out = cp.kubectl_stdin_ok(&["apply", "-n", &ns, "--dry-run=server", "-f", "-"], Some(&rendered));
        assert!(out.contains("(server dry run)"), "{}: {out}", dir.display());
        println!("{}: {}", dir.strip_prefix(ROOT).unwrap().display(), out.lines().count());
    }
}
