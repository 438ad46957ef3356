//! End to end, real kube-apiserver: `opstatus get` with the kubeconfigs of
//! managed clusters and laptops. Its user authenticates with an exec
//! credential plugin (a script printing an ExecCredential with a
//! ServiceAccount's token, as `aws eks get-token` prints an IAM one); the
//! kubeconfig is two files in `KUBECONFIG` merged as kubectl merges them
//! (the first to define a name wins, and the first `current-context`), and
//! `--context` picks another context than the current one. A plugin that
//! fails, one that hangs, one that needs a terminal and one that is not
//! installed each end with a clear error (exit 2); the token is never
//! shown. `kubectl opstatus get` finds opstatus on PATH as
//! `kubectl-opstatus` through kubectl's own plugin discovery. `run` renews
//! the plugin's token before it expires, and refuses a plugin it could
//! not run unattended.

use crate::support;

use serde_json::Value;
use std::os::unix::fs::PermissionsExt;
use std::path::Path;
use std::time::{Duration, Instant};
use support::control_plane::{ControlPlane, Deployed, shared};
use support::{RunningAgent, TempDir, opstatus_bin, run_to_end};

/// A kubeconfig pair in `dir`: `a.yaml` (the cluster `local`, the context
/// `lab` using it with the plugin's user, and a current-context `elsewhere`
/// that only `b.yaml` defines) and `plugins/b.yaml` (the user `plugin-user`,
/// whose exec section is `exec`, its command relative to `plugins/`; a
/// cluster `local` and a context `lab` of its own that the first file's
/// shadow, and the context `elsewhere` on a closed loopback port). The
/// `KUBECONFIG` value that lists both.
fn kubeconfigs(cp: &ControlPlane, dir: &Path, ns: &str, exec: &str) -> String {
    let closed = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
    let ca = cp.ca_path();
    let a = format!(
        "apiVersion: v1\nkind: Config\nclusters:\n- name: local\n  cluster:\n    server: https://127.0.0.1:{}\n    \
         certificate-authority: {ca}\ncontexts:\n- name: lab\n  context: {{cluster: local, user: plugin-user, namespace: \
         {ns}}}\ncurrent-context: elsewhere\n",
        cp.port()
    );
    let b = format!(
        "apiVersion: v1\nkind: Config\nclusters:\n- name: local\n  cluster: {{server: \"https://127.0.0.1:{closed}\", \
         certificate-authority: {ca}}}\n- name: closed\n  cluster: {{server: \"https://127.0.0.1:{closed}\", \
         certificate-authority: {ca}}}\ncontexts:\n- name: lab\n  context: {{cluster: closed, user: plugin-user}}\n\
         - name: elsewhere\n  context: {{cluster: closed, user: plugin-user}}\ncurrent-context: lab\nusers:\n\
         - name: plugin-user\n  user:\n    exec:\n{exec}"
    );
    std::fs::create_dir_all(dir.join("plugins/bin")).unwrap();
    std::fs::write(dir.join("a.yaml"), a).unwrap();
    std::fs::write(dir.join("plugins/b.yaml"), b).unwrap();
    format!("{}:{}", dir.join("a.yaml").display(), dir.join("plugins/b.yaml").display())
}

/// An executable script `plugins/bin/NAME` in `dir`.
fn script(dir: &Path, name: &str, body: &str) {
    let path = dir.join("plugins/bin").join(name);
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    std::fs::write(&path, format!("#!/bin/sh\n{body}")).unwrap();
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755)).unwrap();
}

/// The exec section of a user whose plugin is `plugins/bin/NAME`, in the
/// kubeconfig's YAML at its indentation (six spaces), as the cloud CLIs
/// write it (an installHint as a block scalar).
fn exec(name: &str, mode: &str) -> String {
    format!(
        "      apiVersion: client.authentication.k8s.io/v1\n      command: ./bin/{name}\n      args:\n      - --cluster\n      \
         - lab\n      env:\n      - name: GREETING\n        value: signed in\n      interactiveMode: {mode}\n      \
         provideClusterInfo: true\n      installHint: |\n        Install the test plugin.\n\n        # it is in plugins/bin\n"
    )
}

/// The plugin that signs in: checks its arguments, keeps what it was told
/// (`exec-info.json`) and counts its runs (`runs`), says so on its
/// standard error with an escape sequence in it, and prints an
/// ExecCredential with the token in `token` (valid `valid_for`).
fn signing_in(dir: &Path, valid_for: &str) {
    let body = format!(
        "[ \"$1 $2\" = \"--cluster lab\" ] || exit 3\nd=$(dirname \"$0\")/..\nprintf '%s' \"$KUBERNETES_EXEC_INFO\" > \
         \"$d/exec-info.json\"\necho run >> \"$d/runs\"\nprintf '%s \\033[2Jfor the test\\n' \"$GREETING\" >&2\n\
         until=$(date -u -d '{valid_for}' +%Y-%m-%dT%H:%M:%SZ)\n\
         printf '{{\"apiVersion\":\"client.authentication.k8s.io/v1\",\"kind\":\"ExecCredential\",\"status\":\
         {{\"token\":\"%s\",\"expirationTimestamp\":\"%s\"}}}}' \"$(cat \"$d/token\")\" \"$until\"\n"
    );
    script(dir, "sign-in", &body);
}

/// A deployed namespace with a status written in it, a kubeconfig pair
/// whose plugin gives its ServiceAccount's token, and that token.
fn setup(label: &str, plugin: &str, mode: &str) -> (&'static ControlPlane, Deployed, TempDir, String, String) {
    let cp = shared();
    let pod = cp.deploy(label);
    let out = run_to_end(&opstatus_bin(), &["once"], &cp.pod_env(&pod), Duration::from_secs(30));
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let dir = TempDir::new(label);
    let kubeconfig = kubeconfigs(cp, dir.path(), &pod.namespace, &exec(plugin, mode));
    let token = cp.token(&pod.namespace, "opstatus");
    std::fs::write(dir.path().join("plugins/token"), &token).unwrap();
    signing_in(dir.path(), "+1 hour");
    (cp, pod, dir, kubeconfig, token)
}

fn env(kubeconfig: &str) -> Vec<(String, String)> {
    vec![("KUBECONFIG".into(), kubeconfig.into()), ("PATH".into(), "/usr/bin:/bin".into())]
}

fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

#[test]
fn e2e_get_signs_in_with_an_exec_plugin_of_merged_kubeconfigs_in_the_context_asked() {
    let (_cp, pod, dir, kubeconfig, token) = setup("get-exec", "sign-in", "Never");
    let ns = pod.namespace.as_str();

    // The current-context (the first file's, defined in the second) is on a closed port.
    let out = run_to_end(&opstatus_bin(), &["get", "-n", ns], &env(&kubeconfig), Duration::from_secs(30));
    assert_eq!(out.status.code(), Some(1), "{}", text(&out.stderr));
    assert!(text(&out.stderr).contains("connection refused by https://127.0.0.1:"), "{}", text(&out.stderr));

    // `--context lab`: the first file's context and cluster win over the second's.
    let args = ["get", "--context", "lab", "-n", ns, "-o", "json"];
    let out = run_to_end(&opstatus_bin(), &args, &env(&kubeconfig), Duration::from_secs(30));
    let (stdout, stderr) = (text(&out.stdout), text(&out.stderr));
    assert_eq!(out.status.code(), Some(0), "{stderr}");
    let reading: Value = serde_json::from_str(&stdout).unwrap();
    assert_eq!((reading["mode"].as_str(), reading["namespace"].as_str()), (Some("operated"), Some(ns)), "{reading}");
    // The plugin's standard error is shown, sanitised; the token never.
    assert!(stderr.contains("signed in  [2Jfor ") && !stderr.contains('\u{1b}'), "{stderr}");
    assert!(!stdout.contains(&token) && !stderr.contains(&token), "the token was shown");
    // What client-go hands a plugin with provideClusterInfo.
    let info: Value =
        serde_json::from_slice(&std::fs::read(dir.path().join("plugins/exec-info.json")).unwrap()).unwrap();
    assert_eq!(info["apiVersion"], "client.authentication.k8s.io/v1", "{info}");
    assert_eq!(info["spec"]["interactive"], false, "{info}");
    assert_eq!(info["spec"]["cluster"]["server"], format!("https://127.0.0.1:{}", shared().port()), "{info}");
    // The CA as base64 PEM, even where the kubeconfig names a file.
    let ca = info["spec"]["cluster"]["certificate-authority-data"].as_str().unwrap_or_default();
    assert!(ca.starts_with("LS0tLS1CRUdJTi"), "{info}");
}

#[test]
fn e2e_get_says_why_a_plugin_gave_no_credential() {
    let (_cp, pod, dir, kubeconfig, token) = setup("get-exec-fails", "sign-in", "Never");
    let ns = pod.namespace.as_str();
    let cases = [
        (
            "fails",
            "echo 'error: the SSO session has expired \x1b]0;owned\x07' >&2\nexit 255\n",
            "Never",
            "failed (exit code 255)",
        ),
        ("hangs", "exec sleep 600\n", "Never", "did not finish within 30 s: stopped"),
        (
            "asks",
            "touch \"$(dirname \"$0\")/../asked\"\n",
            "Always",
            "needs a terminal (interactiveMode: Always) and standard input is not one",
        ),
        ("missing", "", "Never", "is not installed: Install the test plugin.  # it is in plugins/bin"),
    ];
    for (name, body, mode, needle) in cases {
        if name != "missing" {
            script(dir.path(), name, body);
        }
        let b = dir.path().join("plugins/b.yaml");
        let text_b = std::fs::read_to_string(&b).unwrap();
        let cut = text_b.find("    exec:\n").unwrap() + "    exec:\n".len();
        std::fs::write(&b, format!("{}{}", &text_b[..cut], exec(name, mode))).unwrap();
        let started = Instant::now();
        let args = ["get", "--context", "lab", "-n", ns];
        let out = run_to_end(&opstatus_bin(), &args, &env(&kubeconfig), Duration::from_secs(60));
        let stderr = text(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{name}: {stderr}");
        assert!(stderr.contains(needle) && stderr.contains(&format!("bin/{name}")), "{name}: {stderr}");
        assert!(!stderr.contains('\u{1b}') && !stderr.contains(&token), "{name}: {stderr}");
        if name == "fails" {
            assert!(stderr.contains("error: the SSO session has expired  ]0;owned"), "{stderr}");
        }
        if name == "hangs" {
            assert!(started.elapsed() < Duration::from_secs(45), "{:?}", started.elapsed());
        }
        assert!(!dir.path().join("plugins/asked").exists(), "a plugin that needs a terminal was run without one");
    }
}

#[test]
fn e2e_kubectl_finds_opstatus_as_its_plugin() {
    let (_cp, pod, dir, kubeconfig, _) = setup("kubectl-plugin", "sign-in", "IfAvailable");
    let path = dir.path().join("path");
    std::fs::create_dir_all(&path).unwrap();
    std::os::unix::fs::symlink(opstatus_bin(), path.join("kubectl-opstatus")).unwrap();
    let kubectl = std::process::Command::new("sh").args(["-c", "command -v kubectl"]).output().unwrap();
    let kubectl_dir = Path::new(text(&kubectl.stdout).trim()).parent().unwrap().to_path_buf();
    let search = format!("{}:{}:/usr/bin:/bin", path.display(), kubectl_dir.display());
    let listed = std::process::Command::new("kubectl").args(["plugin", "list"]).env("PATH", &search).output().unwrap();
    assert!(text(&listed.stdout).contains("kubectl-opstatus"), "{}{}", text(&listed.stdout), text(&listed.stderr));
    let out = std::process::Command::new("kubectl")
        .args(["opstatus", "get", "--context", "lab", "-n", &pod.namespace])
        .env_clear()
        .env("PATH", &search)
        .env("HOME", "/nonexistent")
        .env("KUBECONFIG", &kubeconfig)
        .stdin(std::process::Stdio::null())
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert!(text(&out.stdout).starts_with("Mode:        operated\n"), "{}", text(&out.stdout));
}

/// `run` keeps a plugin's token current: it runs the plugin again shortly
/// before the token expires (here every few seconds) and goes on writing;
/// a plugin that needs someone at a terminal is refused at start.
#[test]
fn e2e_run_renews_an_exec_plugins_token_and_refuses_one_that_needs_a_terminal() {
    let (cp, pod, dir, kubeconfig, _) = setup("run-exec", "sign-in", "IfAvailable");
    signing_in(dir.path(), "+35 seconds");
    let ns = pod.namespace.as_str();
    let mut run_env = env(&kubeconfig);
    run_env.push(("OPSTATUS_CONTEXT".into(), "lab".into()));
    let args = ["run", "--namespace", ns, "--interval", "1s", "--identity", "laptop"];
    let agent = RunningAgent::start(&opstatus_bin(), &args, &run_env);
    let runs = || std::fs::read_to_string(dir.path().join("plugins/runs")).unwrap_or_default().lines().count();
    let renewed =
        support::wait_for(Duration::from_secs(40), Duration::from_millis(200), || (runs() >= 3).then_some(()));
    assert!(renewed.is_some(), "the plugin ran {} times:\n{}", runs(), agent.stderr());
    let info: Value =
        serde_json::from_slice(&std::fs::read(dir.path().join("plugins/exec-info.json")).unwrap()).unwrap();
    assert_eq!(info["spec"]["interactive"], false, "`run` never hands the plugin a terminal: {info}");
    let log = agent.stderr();
    assert!(
        log.contains("context \"lab\", user \"plugin-user\" (exec plugin \"") && log.contains(", until 20"),
        "{log}"
    );
    assert!(log.contains("Renewed the token of exec plugin"), "{log}");
    assert!(!log.contains("401") && !log.contains("Keeping the previous token"), "{log}");
    let status = cp.status_document(ns, "kube9-operator-status").unwrap();
    let age = opstatus::testing::parse_rfc3339(status["lastUpdate"].as_str().unwrap()).unwrap();
    assert!(age.elapsed().unwrap_or_default() < Duration::from_secs(5), "the status is kept fresh: {status}");
    drop(agent);

    let b = dir.path().join("plugins/b.yaml");
    std::fs::write(
        &b,
        std::fs::read_to_string(&b).unwrap().replace("interactiveMode: IfAvailable", "interactiveMode: Always"),
    )
    .unwrap();
    let before = runs();
    let out = run_to_end(&opstatus_bin(), &args, &run_env, Duration::from_secs(30));
    let stderr = text(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(stderr.contains("`opstatus run` renews credentials while it runs, with no one to answer"), "{stderr}");
    assert_eq!(runs(), before, "the plugin was not run");
}
