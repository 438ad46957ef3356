//! Bad input: every case exits 2 with one line naming the input, before
//! any network traffic (the test API server must see no request).

use crate::support;

use std::time::Duration;
use support::fake_apiserver::FakeApiServer;
use support::{ServiceAccountDir, TempDir, opstatus_bin, pod_env, run_to_end};

const TOKEN: &str = "sa-token-for-config-error-tests";

struct Case {
    args: &'static [&'static str],
    env: &'static [(&'static str, &'static str)],
    /// Files to break in the service-account directory: (name, contents or
    /// None to delete).
    sa_files: &'static [(&'static str, Option<&'static str>)],
    expect: &'static str,
}

const CASES: &[Case] = &[
    Case { args: &["--bogus"], env: &[], sa_files: &[], expect: "unknown flag --bogus (see opstatus --help)" },
    Case { args: &["frobnicate"], env: &[], sa_files: &[], expect: "unknown command \"frobnicate\"" },
    Case { args: &["help", "frobnicate"], env: &[], sa_files: &[], expect: "no help for \"frobnicate\"" },
    Case { args: &["--interval", "soon"], env: &[], sa_files: &[], expect: "--interval: \"soon\" is not a duration" },
    Case { args: &["--interval=0"], env: &[], sa_files: &[], expect: "--interval: \"0\" must be between 1s and 4m" },
    Case {
        args: &[],
        env: &[("OPSTATUS_INTERVAL", "1h")],
        sa_files: &[],
        expect: "OPSTATUS_INTERVAL: \"1h\" must be between 1s and 4m",
    },
    Case { args: &[], env: &[("OPSTATUS_INTERVAL", "")], sa_files: &[], expect: "OPSTATUS_INTERVAL is set but empty" },
    Case {
        args: &["--namespace", "Bad_NS"],
        env: &[],
        sa_files: &[],
        expect: "--namespace: \"Bad_NS\" is not a valid namespace name",
    },
    Case { args: &[], env: &[("POD_NAMESPACE", "")], sa_files: &[], expect: "POD_NAMESPACE is set but empty" },
    Case {
        args: &["--configmap", "UPPER"],
        env: &[],
        sa_files: &[],
        expect: "--configmap: \"UPPER\" is not a valid ConfigMap name",
    },
    Case {
        args: &["--operator-version", "latest"],
        env: &[],
        sa_files: &[],
        expect: "--operator-version: \"latest\" is not a semantic version",
    },
    Case { args: &["--interval"], env: &[], sa_files: &[], expect: "--interval needs a value" },
    Case { args: &["once"], env: &[], sa_files: &[("token", None)], expect: "cannot read token file" },
    Case { args: &["once"], env: &[], sa_files: &[("token", Some("  \n"))], expect: "is empty" },
    Case { args: &["once"], env: &[], sa_files: &[("ca.crt", None)], expect: "cannot read CA file" },
    Case {
        args: &["once"],
        env: &[],
        sa_files: &[("ca.crt", Some("not a certificate"))],
        expect: "holds no PEM certificate",
    },
    Case {
        args: &["once"],
        env: &[],
        sa_files: &[("namespace", Some("Not-Valid"))],
        expect: "namespace \"Not-Valid\" from service account",
    },
    Case {
        args: &["once"],
        env: &[("KUBERNETES_SERVICE_PORT", "")],
        sa_files: &[],
        expect: "KUBERNETES_SERVICE_HOST and KUBERNETES_SERVICE_PORT must both be set",
    },
    Case {
        args: &["once", "--kubeconfig", "/nonexistent/kubeconfig"],
        env: &[],
        sa_files: &[],
        expect: "cannot read kubeconfig /nonexistent/kubeconfig",
    },
    Case {
        args: &["get", "-o", "yaml"],
        env: &[],
        sa_files: &[],
        expect: "-o: \"yaml\" is not an output format (text or json)",
    },
    Case {
        args: &["--server-url", "api.kube9.dev"],
        env: &[],
        sa_files: &[],
        expect: "--server-url: \"api.kube9.dev\" must start with https://",
    },
    Case {
        args: &["once", "--api-key-file", "/run/key", "--server-ca-file", "/nonexistent/ca.pem"],
        env: &[],
        sa_files: &[],
        expect: "cannot read --server-ca-file /nonexistent/ca.pem",
    },
    Case {
        args: &["once", "--server-ca-file", "/etc/hostname"],
        env: &[("KUBE9_API_KEY", "kdy_x_y")],
        sa_files: &[],
        expect: "CA bundle /etc/hostname holds no PEM certificate",
    },
    Case {
        args: &["--server-url", "http://127.0.0.1:9"],
        env: &[],
        sa_files: &[],
        expect: "--server-url (KUBE9_SERVER_URL) \"http://127.0.0.1:9\" is plain http://: the API key would travel \
                 unencrypted; use https://, or give --allow-insecure-server-url to mean it",
    },
    Case {
        args: &["once"],
        env: &[("KUBE9_SERVER_URL", "http://127.0.0.1:9"), ("KUBE9_API_KEY", "kdy_x_y")],
        sa_files: &[],
        expect: "is plain http://: the API key would travel unencrypted",
    },
    Case {
        args: &["--server-url", "http://127.0.0.1:9", "--allow-insecure-server-url", "--server-ca-file", "/run/ca.pem"],
        env: &[],
        sa_files: &[],
        expect: "--server-ca-file is for an https:// kube9-server, and --server-url (KUBE9_SERVER_URL) \
                 \"http://127.0.0.1:9\" is http://",
    },
    // A port that is no number would send the API key to the scheme's
    // default port.
    Case {
        args: &["--server-url", "https://127.0.0.1:abc/"],
        env: &[],
        sa_files: &[],
        expect: "--server-url: \"https://127.0.0.1:abc/\" has port \"abc\": a port is a number from 1 to 65535",
    },
    Case {
        args: &["--server-url", "https://:8443"],
        env: &[],
        sa_files: &[],
        expect: "--server-url: \"https://:8443\" has no host",
    },
    Case {
        args: &["--watch-url", "http://127.0.0.1:99999/healthz"],
        env: &[],
        sa_files: &[],
        expect: "--watch-url: \"http://127.0.0.1:99999/healthz\" has port \"99999\": a port is a number from 1 to 65535",
    },
    Case {
        args: &["--server-url", "https://user:secret@api.kube9.dev"],
        env: &[],
        sa_files: &[],
        expect: "--server-url: \"https://***@api.kube9.dev\" holds a user name or password (user:password@)",
    },
    Case {
        args: &["once"],
        env: &[("KUBE9_SERVER_URL", "https://user:secret@api.kube9.dev")],
        sa_files: &[],
        expect: "KUBE9_SERVER_URL: \"https://***@api.kube9.dev\" holds a user name or password",
    },
    Case {
        args: &["--watch-url", "http://user:secret@127.0.0.1:8081/healthz"],
        env: &[],
        sa_files: &[],
        expect: "--watch-url: \"http://***@127.0.0.1:8081/healthz\" holds a user name or password",
    },
    Case {
        args: &[],
        env: &[("OPSTATUS_WATCH_URLS", "http://127.0.0.1:8081/healthz,http://admin:secret@127.0.0.1:8082/")],
        sa_files: &[],
        expect: "OPSTATUS_WATCH_URLS: \"http://***@127.0.0.1:8082/\" holds a user name or password",
    },
    Case { args: &["probe"], env: &[], sa_files: &[], expect: "probe needs --ready-file (or OPSTATUS_READY_FILE)" },
    Case {
        args: &["--listen", "localhost:8090"],
        env: &[],
        sa_files: &[],
        expect: "--listen: \"localhost:8090\" is not IP:PORT or :PORT",
    },
    Case {
        args: &["--watch-url", "https://127.0.0.1:8443/healthz"],
        env: &[],
        sa_files: &[],
        expect: "must start with http://",
    },
    Case {
        args: &[],
        env: &[("OPSTATUS_WATCH_CRITICAL", "sometimes")],
        sa_files: &[],
        expect: "OPSTATUS_WATCH_CRITICAL: \"sometimes\" is not true or false",
    },
    Case {
        args: &["--probe", "example.com/v1/foos:Upgradeable=!Migrating &&"],
        env: &[],
        sa_files: &[],
        expect: "--probe: \"example.com/v1/foos:Upgradeable=!Migrating &&\": Upgradeable expression \"!Migrating &&\": \
                 column 14: expected a condition name, '!' or '(', found the end",
    },
    Case {
        args: &["--probe", "example.com/v1/foos:Upgradeable=!Migrating"],
        env: &[(
            "OPSTATUS_PROBE_NAMESPACES",
            "ns-0,ns-1,ns-2,ns-3,ns-4,ns-5,ns-6,ns-7,ns-8,ns-9,ns-10,ns-11,ns-12,ns-13,ns-14,ns-15,ns-16,ns-17,ns-18,ns-19,ns-20,ns-21,ns-22,ns-23,ns-24,ns-25,ns-26,ns-27,ns-28,ns-29,ns-30,ns-31,ns-32",
        )],
        sa_files: &[],
        expect: "the probes would watch 33 collections (1 probe in 33 namespaces), more than 32 (each takes a thread \
                 and an API-server connection): probe fewer namespaces, or all at once (no --probe-namespace or \
                 WATCH_NAMESPACE, and a ClusterRole to list and watch)",
    },
    Case {
        args: &[
            "--probe",
            "example.com/v1/foos:Upgradeable=!Migrating",
            "--probe-from-crd-annotations",
            "bars.example.com",
        ],
        env: &[("WATCH_NAMESPACE", "a,b,c,d,e,f,g,h,i,j,k,l,m,n,o,p,q")],
        sa_files: &[],
        expect: "the probes would watch 34 collections (2 probes in 17 namespaces), more than 32",
    },
    Case {
        args: &[],
        env: &[("OPSTATUS_PROBES", "example.com/v1/foos:Important=Broken && Lost")],
        sa_files: &[],
        expect: "column 8: only '||' is allowed in an Important expression",
    },
    Case {
        args: &["--probe", "foos:Upgradeable=!Migrating"],
        env: &[],
        sa_files: &[],
        expect: "\"foos\" is not GROUP/VERSION/RESOURCE",
    },
    Case {
        args: &["--probe", "example.com/foos:Upgradeable=!Migrating"],
        env: &[],
        sa_files: &[],
        expect: "--probe: \"example.com/foos:Upgradeable=!Migrating\": \"example.com/foos\" has no version: write \
                 GROUP/VERSION/RESOURCE, e.g. example.com/v1/foos",
    },
    Case {
        args: &["--probe-from-crd-annotations", "foos"],
        env: &[],
        sa_files: &[],
        expect: "--probe-from-crd-annotations: \"foos\" is not a CRD name (PLURAL.GROUP, e.g. foos.example.com)",
    },
    Case {
        args: &[],
        env: &[("OPERATOR_CONDITION_NAME", "My_Operator.v1")],
        sa_files: &[],
        expect: "OPERATOR_CONDITION_NAME: \"My_Operator.v1\" is not a valid name",
    },
    Case {
        args: &["--cluster-operator", "demo", "--operand-version", "engine"],
        env: &[],
        sa_files: &[],
        expect: "--operand-version: \"engine\" is not NAME=VERSION",
    },
    Case {
        args: &["--cluster-operator", "demo", "--related-object", "configmaps/ops/x"],
        env: &[],
        sa_files: &[],
        expect: "--related-object: \"configmaps/ops/x\" is not GROUP/RESOURCE/NAMESPACE/NAME",
    },
    Case {
        args: &["--version-file", "/run/version"],
        env: &[],
        sa_files: &[],
        expect: "--version-file is for the ClusterOperator: give --cluster-operator too",
    },
    Case {
        args: &["--cluster-operator", "demo", "--degraded-inertia", "2d"],
        env: &[],
        sa_files: &[],
        expect: "--degraded-inertia: \"2d\" has an unknown unit \"d\"",
    },
    Case {
        args: &["--health-inertia", "2h"],
        env: &[],
        sa_files: &[],
        expect: "--health-inertia: \"2h\" must be between 0s and 3600s",
    },
    Case {
        args: &[],
        env: &[("OPSTATUS_HEALTH_INERTIA", "30s,soon")],
        sa_files: &[],
        expect: "OPSTATUS_HEALTH_INERTIA: \"30s,soon\" gives the window towards better as \"soon\", which is not a \
                 duration",
    },
    Case {
        args: &["--upgradeable-inertia", "0,61m"],
        env: &[],
        sa_files: &[],
        expect: "--upgradeable-inertia: \"0,61m\" gives the window towards better as \"61m\", which must be between \
                 0s and 3600s",
    },
    Case {
        args: &["--upgradeable-inertia", "1s,2s,3s"],
        env: &[],
        sa_files: &[],
        expect: "--upgradeable-inertia: \"1s,2s,3s\" is not WORSE[,BETTER]: two windows at most (e.g. 30s, or 0,5m)",
    },
    Case {
        args: &["--cluster-operator", "demo", "--degraded-inertia", "2m,-1"],
        env: &[],
        sa_files: &[],
        expect: "--degraded-inertia: \"2m,-1\" gives the window towards better as \"-1\", which is not a duration",
    },
    Case {
        args: &["--condition-metrics-max-types", "9"],
        env: &[],
        sa_files: &[],
        expect: "--condition-metrics-max-types: \"9\" must be a whole number from 0 to 8",
    },
    Case {
        args: &[],
        env: &[("OPSTATUS_CONDITION_METRICS_MAX_TYPES", "-1")],
        sa_files: &[],
        expect: "OPSTATUS_CONDITION_METRICS_MAX_TYPES: \"-1\" must be a whole number from 0 to 8",
    },
];

#[test]
fn every_bad_input_exits_2_with_one_line_and_no_request() {
    let server = FakeApiServer::start(TOKEN);
    for case in CASES {
        let sa = ServiceAccountDir::new(TOKEN, &server.pki.ca_pem, "ops");
        for (file, contents) in case.sa_files {
            match contents {
                Some(c) => std::fs::write(sa.path().join(file), c).unwrap(),
                None => std::fs::remove_file(sa.path().join(file)).unwrap(),
            }
        }
        let mut env = pod_env(server.port(), &sa);
        for (k, v) in case.env {
            env.retain(|(name, _)| name != k);
            env.push((k.to_string(), v.to_string()));
        }
        let out = run_to_end(&opstatus_bin(), case.args, &env, Duration::from_secs(10));
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{:?}: {stderr}", case.args);
        assert_eq!(stderr.lines().count(), 1, "{:?}: one line expected:\n{stderr}", case.args);
        assert!(stderr.starts_with("opstatus: error: ") && stderr.contains(case.expect), "{:?}: {stderr}", case.args);
        assert!(!stderr.contains("secret"), "{:?}: a password in a URL is never shown: {stderr}", case.args);
    }
    assert!(server.requests().is_empty(), "configuration errors must stop before any request");
}

#[test]
fn kubeconfig_errors_name_the_file_and_the_problem() {
    let dir = TempDir::new("kubeconfig-errors");
    let cases = [
        ("current-context: ghost\ncontexts: []\n", "context \"ghost\" is not defined in contexts"),
        (
            "current-context: c\ncontexts:\n- name: c\n  context: {cluster: k, user: u}\nclusters:\n- name: k\n  cluster: {server: 'https://127.0.0.1:1', insecure-skip-tls-verify: true}\nusers:\n- name: u\n  user: {token: x}\n",
            "always verifies TLS",
        ),
        ("a: b\n  c: d\n", "line 2, column 3: unexpected indentation"),
    ];
    // Valid but for the password in the server URL.
    let with_password = format!(
        "current-context: c\ncontexts:\n- name: c\n  context: {{cluster: k, user: u}}\nclusters:\n- name: k\n  \
         cluster: {{server: 'https://admin:secret@127.0.0.1:1', certificate-authority: '{}/tests/fixtures/fixture-ca.crt'}}\n\
         users:\n- name: u\n  user: {{token: x}}\n",
        env!("CARGO_MANIFEST_DIR")
    );
    let password_case =
        (with_password.as_str(), "cluster \"k\" server \"https://***@127.0.0.1:1\" holds a user name or password");
    // A port that is no number: the token would go to port 443.
    let bad_port = with_password.replace("admin:secret@127.0.0.1:1", "127.0.0.1:6443x");
    let port_case = (bad_port.as_str(), "cluster \"k\" server \"https://127.0.0.1:6443x\" has port \"6443x\"");
    let cases: Vec<(&str, &str)> = cases.into_iter().chain([password_case, port_case]).collect();
    for (i, (text, expect)) in cases.iter().enumerate() {
        let path = dir.path().join(format!("kubeconfig-{i}"));
        std::fs::write(&path, text).unwrap();
        let out =
            run_to_end(&opstatus_bin(), &["get", "--kubeconfig", path.to_str().unwrap()], &[], Duration::from_secs(10));
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{stderr}");
        assert!(stderr.contains(&format!("kubeconfig {}: ", path.display())) && stderr.contains(expect), "{stderr}");
        assert!(!stderr.contains("secret"), "a password in a URL is never shown: {stderr}");
    }
}

#[test]
fn a_malformed_token_line_is_placed_by_line_and_column_and_never_quoted() {
    let dir = TempDir::new("kubeconfig-token-line");
    let secret = "eyJhbGciOiJSUzI1NiJ9.c2VjcmV0";
    let path = dir.path().join("kubeconfig");
    let text = format!(
        "current-context: c\ncontexts:\n- name: c\n  context: {{cluster: k, user: u}}\nusers:\n- name: u\n  user:\n    token: \"{secret}\" {secret}-tail\n"
    );
    std::fs::write(&path, text).unwrap();
    let out =
        run_to_end(&opstatus_bin(), &["get", "--kubeconfig", path.to_str().unwrap()], &[], Duration::from_secs(10));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    let expect = format!(
        "kubeconfig {}: line 8, column 44: expected the end of the line or a `# comment` after the value",
        path.display()
    );
    assert!(stderr.contains(&expect), "{stderr}");
    assert!(!stderr.contains("eyJ") && !stderr.contains("tail"), "the token leaked: {stderr}");
}

#[test]
fn no_credentials_at_all_is_a_configuration_error() {
    let out = run_to_end(&opstatus_bin(), &["once"], &[], Duration::from_secs(10));
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("no Kubernetes credentials"));
}

#[test]
fn help_and_version_exit_0() {
    let out = run_to_end(&opstatus_bin(), &["--help"], &[], Duration::from_secs(10));
    assert_eq!(out.status.code(), Some(0));
    let help = String::from_utf8_lossy(&out.stdout);
    for needle in
        ["--namespace", "POD_NAMESPACE", "--interval", "OPSTATUS_INTERVAL", "--kubeconfig", "KUBECONFIG", "Exit codes"]
    {
        assert!(help.contains(needle), "--help lacks {needle}");
    }
    let out = run_to_end(&opstatus_bin(), &["--version"], &[], Duration::from_secs(10));
    assert_eq!(String::from_utf8_lossy(&out.stdout).trim(), format!("opstatus {}", env!("CARGO_PKG_VERSION")));
}
