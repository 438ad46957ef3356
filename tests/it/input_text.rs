//! What the command line and the environment give, as the system gives it:
//! a path may be any bytes (a file name need not be UTF-8) and is used as
//! it is; any other value that is not UTF-8, and an identity or URL that
//! can never work as given, is a usage error (exit 2) naming its flag or
//! variable, before any request. Never a panic, never a value dropped in
//! silence, never a fall-back to other credentials.

use crate::support;

use std::ffi::{OsStr, OsString};
use std::os::unix::ffi::OsStrExt;
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};
use support::fake_apiserver::FakeApiServer;
use support::{ServiceAccountDir, TempDir, opstatus_bin, pod_env};

const TOKEN: &str = "sa-token-for-input-text-tests";

/// `state\xff`: a file name no UTF-8 text can spell.
fn not_utf8(prefix: &str) -> OsString {
    let mut bytes = prefix.as_bytes().to_vec();
    bytes.push(0xff);
    OsStr::from_bytes(&bytes).to_owned()
}

/// Runs opstatus with exactly these arguments and variables (nothing
/// inherited), bounded in time.
fn run(args: &[OsString], env: &[(String, OsString)]) -> Output {
    let mut child = Command::new(opstatus_bin())
        .args(args)
        .env_clear()
        .env("HOME", "/nonexistent")
        .envs(env.iter().map(|(k, v)| (k, v)))
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let deadline = Instant::now() + Duration::from_secs(20);
    while child.try_wait().unwrap().is_none() {
        assert!(Instant::now() < deadline, "opstatus {args:?} did not finish");
        std::thread::sleep(Duration::from_millis(20));
    }
    child.wait_with_output().unwrap()
}

fn os(args: &[&str]) -> Vec<OsString> {
    args.iter().map(OsString::from).collect()
}

fn pod(server: &FakeApiServer, sa: &ServiceAccountDir) -> Vec<(String, OsString)> {
    pod_env(server.port(), sa).into_iter().map(|(k, v)| (k, v.into())).collect()
}

/// Exit 2, one line, naming `names`, and no request.
fn assert_usage_error(out: &Output, names: &str, server: &FakeApiServer) {
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert_eq!(stderr.lines().count(), 1, "{stderr}");
    assert!(stderr.starts_with("opstatus: error: ") && stderr.contains(names), "{stderr}");
    assert!(server.requests().is_empty(), "a usage error stops before any request");
}

#[test]
fn a_path_that_is_not_utf8_is_used_as_it_is() {
    let server = FakeApiServer::start(TOKEN);
    let sa = ServiceAccountDir::new(TOKEN, &server.pki.ca_pem, "ops");
    let dir = TempDir::new("not-utf8");
    // The heartbeat file exists under a name that is not UTF-8 and is
    // fresh: the operator is well. Before, the argument panicked (exit
    // 134) and the variable was dropped (the file not watched at all).
    let file = dir.path().join(not_utf8("state"));
    std::fs::write(&file, "").unwrap();
    let mut args = os(&["once", "--watch-file"]);
    args.push(file.clone().into());
    let out = run(&args, &pod(&server, &sa));
    assert_eq!(out.status.code(), Some(0), "{}", String::from_utf8_lossy(&out.stderr));
    assert_eq!(server.status_document("ops", "kube9-operator-status").unwrap()["health"], "healthy");

    // The same name in the variable, for a file that is missing: watched,
    // so the operator is not well (dropped, it was "healthy").
    let missing = dir.path().join(not_utf8("missing"));
    let mut env = pod(&server, &sa);
    env.push(("OPSTATUS_WATCH_FILE".into(), missing.into()));
    let out = run(&os(&["once"]), &env);
    assert_eq!(out.status.code(), Some(0), "{}", String::from_utf8_lossy(&out.stderr));
    let doc = server.status_document("ops", "kube9-operator-status").unwrap();
    assert_eq!(doc["health"], "degraded", "{doc}");
}

/// The arguments, the variables changed, and what the error names.
type Case = (Vec<OsString>, Vec<(&'static str, OsString)>, &'static str);

#[test]
fn text_that_is_not_utf8_is_a_usage_error_naming_its_source() {
    let server = FakeApiServer::start(TOKEN);
    let sa = ServiceAccountDir::new(TOKEN, &server.pki.ca_pem, "ops");
    let cases: Vec<Case> = vec![
        (vec!["once".into(), "--namespace".into(), not_utf8("ops")], vec![], "--namespace: \"ops\\xFF\" is not UTF-8"),
        (vec!["once".into(), not_utf8("--interval=2s")], vec![], "--interval: \"2s\\xFF\" is not UTF-8"),
        (vec![not_utf8("once")], vec![], "argument \"once\\xFF\" is not UTF-8 text"),
        (vec!["once".into()], vec![("OPSTATUS_INTERVAL", not_utf8("2s"))], "OPSTATUS_INTERVAL: \"2s\\xFF\""),
        (vec!["once".into()], vec![("OPSTATUS_WATCH_URLS", not_utf8("http://x/"))], "OPSTATUS_WATCH_URLS: "),
        (vec!["once".into()], vec![("WATCH_NAMESPACE", not_utf8("a"))], "WATCH_NAMESPACE: "),
        (vec!["once".into()], vec![("KUBE9_API_KEY", not_utf8("kdy_secret"))], "KUBE9_API_KEY is not UTF-8 text"),
        (vec!["once".into()], vec![("KUBERNETES_SERVICE_HOST", not_utf8("127.0.0.1"))], "KUBERNETES_SERVICE_HOST: "),
        (vec!["once".into()], vec![("POD_NAME", not_utf8("op-a"))], "POD_NAME: "),
    ];
    for (args, vars, names) in cases {
        let mut env = pod(&server, &sa);
        for (k, v) in vars {
            env.retain(|(name, _)| name != k);
            env.push((k.into(), v));
        }
        let out = run(&args, &env);
        assert_usage_error(&out, names, &server);
        assert!(!String::from_utf8_lossy(&out.stderr).contains("secret"), "the API key is never shown");
    }
}

/// A KUBECONFIG that is not UTF-8 names a file: it is read (here: it does
/// not exist, so the error names it), never passed over for the pod's own
/// service account.
#[test]
fn a_kubeconfig_path_that_is_not_utf8_is_never_passed_over() {
    let server = FakeApiServer::start(TOKEN);
    let sa = ServiceAccountDir::new(TOKEN, &server.pki.ca_pem, "ops");
    let mut env = pod(&server, &sa);
    env.push(("KUBECONFIG".into(), not_utf8("/nonexistent/kubeconfig")));
    let out = run(&os(&["once"]), &env);
    assert_usage_error(&out, "cannot read kubeconfig /nonexistent/kubeconfig", &server);
}

#[test]
fn an_identity_that_would_read_back_changed_is_refused_at_start() {
    let server = FakeApiServer::start(TOKEN);
    let sa = ServiceAccountDir::new(TOKEN, &server.pki.ca_pem, "ops");
    // A right-to-left override is sanitised where the lock is read back:
    // a restarted container would not know its own lock.
    for identity in ["op-a\u{202e}", "op\u{200f}a", "op\u{7f}a", &"a".repeat(254)] {
        let out = run(&os(&["once", "--identity", identity]), &pod(&server, &sa));
        assert_usage_error(&out, "--identity: ", &server);
        assert!(String::from_utf8_lossy(&out.stderr).contains("is not a usable identity"));
    }
    let mut env = pod(&server, &sa);
    env.push(("OPSTATUS_IDENTITY".into(), "op-a\u{2066}x".into()));
    assert_usage_error(&run(&os(&["once"]), &env), "OPSTATUS_IDENTITY: ", &server);
}

#[test]
fn a_watch_url_with_white_space_or_a_line_break_is_refused_at_start() {
    let server = FakeApiServer::start(TOKEN);
    let sa = ServiceAccountDir::new(TOKEN, &server.pki.ca_pem, "ops");
    for url in ["http://127.0.0.1:8081/healthz\r\nX-Injected: 1", "http://127.0.0.1:8081/health z"] {
        let out = run(&os(&["once", "--watch-url", url]), &pod(&server, &sa));
        assert_usage_error(&out, "--watch-url: ", &server);
        assert!(String::from_utf8_lossy(&out.stderr).contains("holds white space or a control character"));
    }
    let mut env = pod(&server, &sa);
    env.push(("OPSTATUS_WATCH_URLS".into(), "http://127.0.0.1:8081/a b".into()));
    assert_usage_error(&run(&os(&["once"]), &env), "OPSTATUS_WATCH_URLS: ", &server);
}
