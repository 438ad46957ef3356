//! End to end, real kube-apiserver: the kustomize components that add
//! opstatus to an existing operator without editing its files
//! (manifests/components/opstatus, native sidecar; opstatus-plain, for
//! clusters before 1.29), rendered over a sample kubebuilder-style operator
//! (tests/fixtures/sample-operator: a name prefix, a `controller-manager`
//! Deployment and ServiceAccount, and an unrelated webhook Deployment) from
//! an overlay, as a user would, then applied with a server-side dry run.
//!
//! The Debian v1.20 API server predates native sidecars: it does not know
//! `initContainers[].restartPolicy` (its OpenAPI has no such field, and it
//! drops it) and so rejects the sidecar's probes as an init container's.
//! There the test asserts exactly that rejection and says the native
//! variant was not validated; the plain variant is applied in full. On a
//! server that knows the field (v1.29+; the v1.36 control plane) the native
//! variant is applied with strict field validation.

use crate::support;

use serde_json::Value;
use std::path::Path;
use support::TempDir;
use support::control_plane::{ControlPlane, ROOT, relative_path, service_account_user, shared, unique_namespace};

/// Renders `component` over the sample operator from an overlay that sets
/// the namespace `ns` (the operator's, as the component requires), after
/// the install guide's `opstatus-target` naming the operator's Deployment
/// as the sample's kustomization renders it (with its name prefix).
fn render(cp: &ControlPlane, component: &str, ns: &str) -> String {
    let overlay = TempDir::new("component-overlay");
    let rel = |p: &str| relative_path(overlay.path(), &Path::new(ROOT).join(p)).display().to_string();
    std::fs::write(
        overlay.path().join("kustomization.yaml"),
        format!(
            "apiVersion: kustomize.config.k8s.io/v1beta1\nkind: Kustomization\nnamespace: {ns}\nresources:\n- {}\ncomponents:\n- opstatus-target\n- {}\n",
            rel("tests/fixtures/sample-operator"),
            rel(component)
        ),
    )
    .unwrap();
    std::fs::create_dir(overlay.path().join("opstatus-target")).unwrap();
    let target = support::markdown::opstatus_target("sample-controller-manager");
    std::fs::write(overlay.path().join("opstatus-target/kustomization.yaml"), target).unwrap();
    cp.kubectl_ok(&["kustomize", overlay.path().to_str().unwrap()])
}

/// The rendered objects as JSON (kubectl parses; nothing is sent).
fn parse_objects(cp: &ControlPlane, yaml: &str) -> Vec<Value> {
    let out =
        cp.kubectl_stdin_ok(&["create", "--dry-run=client", "--validate=false", "-o", "json", "-f", "-"], Some(yaml));
    let values: Vec<Value> = serde_json::Deserializer::from_str(&out).into_iter().map(Result::unwrap).collect();
    values
        .into_iter()
        .flat_map(|v| if v["kind"] == "List" { v["items"].as_array().cloned().unwrap_or_default() } else { vec![v] })
        .collect()
}

fn find<'a>(objects: &'a [Value], kind: &str, name: &str) -> Option<&'a Value> {
    objects.iter().find(|o| o["kind"] == kind && o["metadata"]["name"] == name)
}

fn named<'a>(list: &'a Value, name: &str) -> Option<&'a Value> {
    list.as_array()?.iter().find(|c| c["name"] == name)
}

/// Does the server know native sidecars? Asked of its own OpenAPI, not of
/// a version string (the Debian v1.20 build reports v0.0.0-master).
fn server_knows_native_sidecars(cp: &ControlPlane) -> bool {
    cp.kubectl(&["explain", "pods.spec.initContainers.restartPolicy"], None).status.success()
}

/// What both variants must have done to the sample operator.
fn assert_common(objects: &[Value], ns: &str, opstatus: &Value) {
    let operator = find(objects, "Deployment", "sample-controller-manager").expect("the operator's Deployment");
    let pod = &operator["spec"]["template"]["spec"];
    assert_eq!(pod["serviceAccountName"], "sample-controller-manager", "the operator's identity is kept");
    let manager = named(&pod["containers"], "manager").expect("the operator's container is kept");
    assert_eq!(manager["image"], "registry.example.com/sample-operator:2.0.1");

    assert_eq!(opstatus["image"], "opstatus:0.1.0");
    let args: Vec<&str> = opstatus["args"].as_array().unwrap().iter().map(|a| a.as_str().unwrap()).collect();
    assert!(args.contains(&"--listen=:8090") && args.contains(&"--ready-file=/run/opstatus/ready"), "{args:?}");
    assert_eq!(opstatus["readinessProbe"]["httpGet"]["path"], "/readyz");
    assert_eq!(opstatus["livenessProbe"]["httpGet"]["path"], "/healthz");
    // The published version is the operator's, from its pod's label.
    let version = named(&opstatus["env"], "OPSTATUS_OPERATOR_VERSION").expect("the operator's version");
    assert_eq!(version["valueFrom"]["fieldRef"]["fieldPath"], "metadata.labels['app.kubernetes.io/version']");
    let sc = &opstatus["securityContext"];
    assert_eq!((sc["runAsUser"].as_u64(), sc["runAsNonRoot"].as_bool()), (Some(65532), Some(true)));
    assert_eq!(sc["readOnlyRootFilesystem"], true);
    assert_eq!(sc["allowPrivilegeEscalation"], false);
    assert_eq!(sc["capabilities"]["drop"], serde_json::json!(["ALL"]));
    assert_eq!(sc["seccompProfile"]["type"], "RuntimeDefault");
    assert_eq!(named(&opstatus["volumeMounts"], "opstatus-run").unwrap()["mountPath"], "/run/opstatus");
    assert_eq!(named(&pod["volumes"], "opstatus-run").unwrap()["emptyDir"]["medium"], "Memory");

    // The webhook is not selected: untouched.
    let webhook = find(objects, "Deployment", "sample-webhook").expect("the webhook Deployment");
    assert!(!webhook.to_string().contains("opstatus"), "the component touched the webhook: {webhook}");

    // RBAC: manifests/base's Roles, bound to the pod's ServiceAccount;
    // base's own `opstatus` ServiceAccount is not added.
    for role in ["opstatus-status-writer", "opstatus-own-pod"] {
        assert!(find(objects, "Role", role).is_some(), "{role}");
        let binding = find(objects, "RoleBinding", role).expect("the RoleBinding");
        assert_eq!(binding["subjects"][0]["name"], "sample-controller-manager", "{role}");
        assert_eq!(binding["subjects"][0]["namespace"], ns, "{role}");
    }
    assert!(find(objects, "ServiceAccount", "opstatus").is_none(), "base's ServiceAccount is left out");
}

/// Applies `yaml` with a server-side dry run; the output, or the error.
fn dry_run(cp: &ControlPlane, ns: &str, yaml: &str, strict: bool) -> Result<String, String> {
    let validate = if strict { "--validate=strict" } else { "--validate=false" };
    let out = cp.kubectl(&["apply", "-n", ns, "--dry-run=server", validate, "-f", "-"], Some(yaml));
    let text = String::from_utf8_lossy(&out.stdout).to_string();
    if out.status.success() { Ok(text) } else { Err(format!("{text}{}", String::from_utf8_lossy(&out.stderr))) }
}

#[test]
fn e2e_component_plain_adds_the_sidecar_and_rbac_and_the_api_server_accepts_it() {
    let cp = shared();
    let ns = unique_namespace("component-plain");
    cp.create_namespace(&ns);
    let yaml = render(cp, "manifests/components/opstatus-plain", &ns);
    let objects = parse_objects(cp, &yaml);
    let pod = &find(&objects, "Deployment", "sample-controller-manager").unwrap()["spec"]["template"]["spec"];
    let opstatus = named(&pod["containers"], "opstatus").expect("opstatus as a second container");
    assert!(pod["initContainers"].is_null(), "no init container: {pod}");
    assert!(opstatus["restartPolicy"].is_null());
    assert_common(&objects, &ns, opstatus);

    let out = dry_run(cp, &ns, &yaml, true).unwrap_or_else(|e| panic!("the API server refused the plain variant: {e}"));
    assert_eq!(out.matches("(server dry run)").count(), 8, "{out}");

    // For real, the RBAC alone: the pod's identity may write the one status
    // (and record events).
    let rbac: Vec<&str> = yaml.split("\n---\n").filter(|d| d.contains("kind: Role")).collect();
    cp.kubectl_stdin_ok(&["apply", "-n", &ns, "-f", "-"], Some(&rbac.join("\n---\n")));
    let user = service_account_user(&ns, "sample-controller-manager");
    for (verb, what, allowed) in [
        ("patch", "configmaps/kube9-operator-status", "yes"),
        ("create", "configmaps/kube9-operator-status", "yes"),
        ("patch", "configmaps/another", "no"),
        // Kubernetes Events about the pod (names are generated: unbounded).
        ("create", "events", "yes"),
        ("patch", "events", "no"),
        ("delete", "events", "no"),
        // Its own Pod, read when its operator's port refuses right after
        // passing: read-only, and no list.
        ("get", "pods/sample-controller-manager-0", "yes"),
        ("list", "pods", "no"),
        ("delete", "pods/sample-controller-manager-0", "no"),
    ] {
        let out = cp.kubectl(&["auth", "can-i", verb, what, "-n", &ns, "--as", &user], None);
        assert_eq!(String::from_utf8_lossy(&out.stdout).trim(), allowed, "{verb} {what} as {user}");
    }
    println!(
        "e2e component opstatus-plain: rendered over the sample operator; all 8 objects accepted (server dry run)"
    );
}

#[test]
fn e2e_component_native_sidecar_renders_and_is_validated_where_the_server_knows_it() {
    let cp = shared();
    let ns = unique_namespace("component-native");
    cp.create_namespace(&ns);
    let yaml = render(cp, "manifests/components/opstatus", &ns);
    let objects = parse_objects(cp, &yaml);
    let pod = &find(&objects, "Deployment", "sample-controller-manager").unwrap()["spec"]["template"]["spec"];
    let opstatus = named(&pod["initContainers"], "opstatus").expect("opstatus as an init container");
    assert_eq!(opstatus["restartPolicy"], "Always", "a native sidecar");
    assert_eq!(opstatus["startupProbe"]["httpGet"]["path"], "/healthz", "the operator waits for it");
    assert!(named(&pod["containers"], "opstatus").is_none());
    assert_common(&objects, &ns, opstatus);

    if server_knows_native_sidecars(cp) {
        let out = dry_run(cp, &ns, &yaml, true).unwrap_or_else(|e| panic!("refused the native sidecar: {e}"));
        assert_eq!(out.matches("(server dry run)").count(), 8, "{out}");
        // And the server kept the field (an old one would drop it silently).
        let echoed = cp.kubectl_stdin_ok(
            &["apply", "-n", &ns, "--dry-run=server", "--validate=strict", "-o", "json", "-f", "-"],
            Some(&yaml),
        );
        let echoed = parse_objects(cp, &echoed);
        let pod = &find(&echoed, "Deployment", "sample-controller-manager").unwrap()["spec"]["template"]["spec"];
        assert_eq!(named(&pod["initContainers"], "opstatus").unwrap()["restartPolicy"], "Always");
        println!("e2e component opstatus: native sidecar accepted with strict validation (server dry run)");
    } else {
        // v1.20: everything but the operator's Deployment is accepted; the
        // Deployment is refused for the probes of what the server takes for
        // a plain init container (it drops the unknown restartPolicy).
        let err = dry_run(cp, &ns, &yaml, false).expect_err("a pre-1.29 server cannot accept a native sidecar");
        assert_eq!(err.matches("(server dry run)").count(), 7, "{err}");
        assert!(err.contains(r#"The Deployment "sample-controller-manager" is invalid"#), "{err}");
        for probe in ["startupProbe", "readinessProbe", "livenessProbe"] {
            assert!(err.contains(&format!("initContainers[0].{probe}: Invalid value")), "{probe}: {err}");
        }
        assert!(err.contains("must not be set for init containers"), "{err}");
        println!(
            "e2e component opstatus: NOT VALIDATED on this API server (it predates native sidecars: no \
             initContainers[].restartPolicy, probes refused on init containers); rendered and checked offline; \
             the opstatus-plain variant is the one for such clusters"
        );
    }
}
