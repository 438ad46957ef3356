//! A kubeconfig user's `exec` credential plugin, run as client-go runs one
//! (`client.authentication.k8s.io/v1` and `v1beta1`; how EKS, GKE and AKS
//! kubeconfigs authenticate): `command` with `args`, `env` added to ours
//! and `KUBERNETES_EXEC_INFO` (`spec.interactive`, and `spec.cluster` when
//! `provideClusterInfo`); standard input only when it may interact
//! (`interactiveMode`); its standard error logged line by line, sanitised;
//! its run bounded; its standard output an `ExecCredential` whose token or
//! client certificate holds until `expirationTimestamp`. The credential is
//! never shown: not in a log line, an error or `Debug`.

use super::Secret;
use serde_json::{Value, json};
use std::io::{IsTerminal, Read};
use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant, SystemTime};

/// How long a plugin may run when nobody can answer it (EKS's, GKE's and
/// AKS's take a second or a few); then it is stopped.
const UNATTENDED: Duration = Duration::from_secs(30);

/// How long a plugin that may ask someone at a terminal may run (a device
/// code or browser login).
const ATTENDED: Duration = Duration::from_secs(300);

/// The most of a plugin's standard output read: an `ExecCredential` with a
/// certificate chain is a few KiB.
const MAX_OUTPUT: u64 = 1024 * 1024;

/// The most lines of a plugin's standard error logged per run.
const MAX_STDERR_LINES: usize = 50;

/// A plugin, ready to run again. Its `env` may hold secrets: `Debug`
/// shows the command only.
#[derive(Clone)]
pub struct Plugin {
    command: PathBuf,
    args: Vec<String>,
    env: Vec<(String, String)>,
    api_version: String,
    mode: Mode,
    /// `spec.cluster` of `KUBERNETES_EXEC_INFO`, when `provideClusterInfo`.
    cluster: Option<Value>,
    install_hint: Option<String>,
    /// Whether this command may hand the terminal to the plugin: not a
    /// `run`, which renews credentials with no one to answer.
    pub(super) attended: bool,
}

impl std::fmt::Debug for Plugin {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Plugin({})", self.command.display())
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Mode {
    Never,
    IfAvailable,
    Always,
}

/// What a plugin gave: a token, else a client certificate and key (PEM),
/// and until when (`None`: until the server refuses it).
pub(crate) struct Issued {
    pub token: Option<Secret>,
    pub client_cert: Option<(Vec<u8>, Secret)>,
    pub expires: Option<SystemTime>,
}

const VERSIONS: [&str; 2] = ["client.authentication.k8s.io/v1", "client.authentication.k8s.io/v1beta1"];

impl Plugin {
    /// The plugin a user's `exec` section describes. A command with a `/`
    /// is relative to the kubeconfig's directory `base` (as kubectl
    /// resolves it), else looked up on `PATH`. `cluster`: what
    /// `provideClusterInfo` passes.
    pub(crate) fn new(exec: &Value, base: &std::path::Path, cluster: Value) -> Result<Plugin, String> {
        let text = |key: &str| exec.get(key).and_then(Value::as_str);
        let api_version = text("apiVersion").unwrap_or_default().to_string();
        if !VERSIONS.contains(&api_version.as_str()) {
            return Err(format!(
                "its exec plugin's apiVersion {:?} is not one opstatus speaks ({})",
                crate::util::text::sanitize(&api_version, 100),
                VERSIONS.join(", ")
            ));
        }
        let command = text("command").filter(|c| !c.is_empty()).ok_or("its exec plugin has no command")?;
        let mode = match text("interactiveMode") {
            Some("Never") => Mode::Never,
            Some("IfAvailable") => Mode::IfAvailable,
            Some("Always") => Mode::Always,
            None if api_version.ends_with("v1beta1") => Mode::IfAvailable,
            None => return Err(format!("its exec plugin of apiVersion {api_version} has no interactiveMode")),
            Some(other) => {
                let other = crate::util::text::sanitize(other, 100);
                return Err(format!("its exec plugin's interactiveMode {other:?} is not Never, IfAvailable or Always"));
            }
        };
        // What kubectl reads; a value is never quoted (an argument can be a token).
        let shape = "its exec plugin's args are not a list of text, or its env not a list of name and value";
        let list = |key: &str| match exec.get(key) {
            None | Some(Value::Null) => Ok(Vec::new()),
            Some(Value::Array(items)) => Ok(items.clone()),
            Some(_) => Err(shape.to_string()),
        };
        let args = list("args")?.iter().map(|a| a.as_str().map(String::from)).collect::<Option<_>>().ok_or(shape)?;
        let env = list("env")?
            .iter()
            .map(|e| Some((e.get("name")?.as_str()?.to_string(), e.get("value")?.as_str()?.to_string())))
            .collect::<Option<_>>()
            .ok_or(shape)?;
        Ok(Plugin {
            command: if command.contains('/') { base.join(command) } else { PathBuf::from(command) },
            args,
            env,
            api_version,
            mode,
            cluster: (exec.get("provideClusterInfo") == Some(&Value::Bool(true))).then_some(cluster),
            install_hint: text("installHint").map(String::from),
            attended: true,
        })
    }

    /// The plugin's name for messages: its command, sanitised.
    pub(crate) fn name(&self) -> String {
        format!("{:?}", crate::util::text::sanitize(&self.command.to_string_lossy(), 256))
    }

    /// Runs the plugin, bounded, and reads the credential it prints.
    pub(crate) fn run(&self) -> Result<Issued, String> {
        let name = self.name();
        let terminal = self.attended && std::io::stdin().is_terminal();
        let interactive = match self.mode {
            Mode::Never => false,
            Mode::IfAvailable => terminal,
            Mode::Always if !self.attended => {
                return Err(format!(
                    "exec plugin {name} needs someone at a terminal each time it runs (interactiveMode: Always), and \
                     `opstatus run` renews credentials while it runs, with no one to answer: give it a user whose \
                     plugin runs unattended, or a token"
                ));
            }
            Mode::Always if terminal => true,
            Mode::Always => {
                return Err(format!(
                    "exec plugin {name} needs a terminal (interactiveMode: Always) and standard input is not one: \
                     run opstatus from a terminal, or log in with the plugin first"
                ));
            }
        };
        let mut spec = json!({"interactive": interactive});
        if let Some(cluster) = &self.cluster {
            spec["cluster"] = cluster.clone();
        }
        let info = json!({"apiVersion": self.api_version, "kind": "ExecCredential", "spec": spec});
        let mut child = Command::new(&self.command)
            .args(&self.args)
            .envs(self.env.iter().map(|(k, v)| (k, v)))
            .env("KUBERNETES_EXEC_INFO", info.to_string())
            .stdin(if interactive { Stdio::inherit() } else { Stdio::null() })
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .map_err(|e| match (e.kind(), &self.install_hint) {
                (std::io::ErrorKind::NotFound, Some(hint)) => {
                    format!("exec plugin {name} is not installed: {}", crate::util::text::sanitize(hint, 1024))
                }
                _ => format!("cannot run exec plugin {name}: {e}"),
            })?;
        // Both pipes are read as the plugin writes, on threads of their own:
        // a plugin blocked on a full pipe would never end.
        let mut stdout = child.stdout.take().expect("piped");
        let output = std::thread::spawn(move || {
            let mut out = Vec::new();
            (&mut stdout).take(MAX_OUTPUT + 1).read_to_end(&mut out).map(|_| out)
        });
        let mut stderr = child.stderr.take().expect("piped");
        let logged = name.clone();
        let said = std::thread::spawn(move || log_lines(&mut stderr, &logged));
        let bound = if interactive { ATTENDED } else { UNATTENDED };
        let deadline = Instant::now() + bound;
        let status = loop {
            match child.try_wait() {
                // Its words are logged before its failure is said.
                Ok(Some(status)) if output.is_finished() && said.is_finished() => break status,
                Ok(Some(status)) if Instant::now() >= deadline => break status,
                Ok(_) if Instant::now() < deadline => std::thread::sleep(Duration::from_millis(20)),
                _ => {
                    let _ = child.kill();
                    let _ = child.wait();
                    return Err(format!("exec plugin {name} did not finish within {} s: stopped", bound.as_secs()));
                }
            }
        };
        match status.code() {
            Some(0) => {}
            Some(code) => return Err(format!("exec plugin {name} failed (exit code {code})")),
            None => return Err(format!("exec plugin {name} was killed by a signal")),
        }
        let out = match output.is_finished().then(|| output.join()) {
            Some(Ok(Ok(out))) if out.len() as u64 <= MAX_OUTPUT => out,
            Some(Ok(Ok(_))) => return Err(format!("exec plugin {name} printed more than {MAX_OUTPUT} bytes")),
            Some(Ok(Err(e))) => return Err(format!("cannot read what exec plugin {name} printed: {e}")),
            _ => return Err(format!("exec plugin {name} ended but its output did not")),
        };
        self.issued(&out).map_err(|why| format!("exec plugin {name} {why}"))
    }

    /// The credential in a plugin's output. Never quotes the output.
    fn issued(&self, out: &[u8]) -> Result<Issued, String> {
        let credential: Value = serde_json::from_slice(out)
            .map_err(|e| format!("printed no JSON (line {}, column {})", e.line(), e.column()))?;
        let text =
            |v: &Value, key: &str| v.get(key).and_then(Value::as_str).filter(|s| !s.is_empty()).map(String::from);
        let version = text(&credential, "apiVersion").unwrap_or_default();
        if version != self.api_version || text(&credential, "kind").as_deref() != Some("ExecCredential") {
            let version = crate::util::text::sanitize(&version, 100);
            return Err(format!("printed no ExecCredential of apiVersion {} (but {version:?})", self.api_version));
        }
        let status =
            credential.get("status").filter(|s| s.is_object()).ok_or("printed an ExecCredential without a status")?;
        let expires = match text(status, "expirationTimestamp") {
            None => None,
            Some(t) => Some(crate::util::time::parse_rfc3339(&t).ok_or_else(|| {
                format!(
                    "printed an expirationTimestamp that is not RFC 3339: {:?}",
                    crate::util::text::sanitize(&t, 64)
                )
            })?),
        };
        let token = text(status, "token").map(Secret::new);
        let client_cert = match (text(status, "clientCertificateData"), text(status, "clientKeyData")) {
            (Some(cert), Some(key)) => Some((cert.into_bytes(), Secret::new(key))),
            (None, None) => None,
            _ => return Err("printed only one of clientCertificateData and clientKeyData".into()),
        };
        if token.is_none() && client_cert.is_none() {
            return Err("printed neither a token nor a client certificate and key".into());
        }
        Ok(Issued { token, client_cert, expires })
    }
}

/// Logs a plugin's standard error line by line (at most
/// [`MAX_STDERR_LINES`], each sanitised and bounded), then drains the rest.
fn log_lines(stderr: &mut impl Read, name: &str) {
    let (mut pending, mut buf, mut logged) = (Vec::new(), [0u8; 4096], 0);
    while let Ok(n @ 1..) = stderr.read(&mut buf) {
        pending.extend_from_slice(&buf[..n]);
        while let Some(end) = pending.iter().position(|&b| b == b'\n').or((pending.len() >= 4096).then_some(4095)) {
            let line: Vec<u8> = pending.drain(..=end).collect();
            if logged < MAX_STDERR_LINES {
                let text = String::from_utf8_lossy(&line);
                log::warn!("exec plugin {name}: {}", crate::util::text::sanitize(text.trim_end(), 512));
                logged += 1;
            }
        }
    }
    if !pending.is_empty() && logged < MAX_STDERR_LINES {
        log::warn!("exec plugin {name}: {}", crate::util::text::sanitize(&String::from_utf8_lossy(&pending), 512));
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::path::Path;

    fn plugin(exec: Value) -> Result<Plugin, String> {
        Plugin::new(&exec, Path::new("/kube"), json!({"server": "https://h"}))
    }

    fn v1(extra: Value) -> Value {
        let mut exec =
            json!({"apiVersion": "client.authentication.k8s.io/v1", "command": "aws", "interactiveMode": "Never"});
        exec.as_object_mut().unwrap().extend(extra.as_object().unwrap().clone());
        exec
    }

    #[test]
    fn the_exec_section_is_read_as_kubectl_reads_it() {
        let p = plugin(v1(json!({"args": null, "env": [{"name": "AWS_PROFILE", "value": "s3cr3t"}]}))).unwrap();
        assert_eq!((p.command.as_path(), p.mode, p.cluster.is_none()), (Path::new("aws"), Mode::Never, true));
        assert!(!format!("{p:?}").contains("s3cr3t"), "{p:?}");
        let p = plugin(v1(json!({"command": "./bin/get-token", "provideClusterInfo": true}))).unwrap();
        assert_eq!(
            (p.command.as_path(), &p.cluster),
            (Path::new("/kube/./bin/get-token"), &Some(json!({"server": "https://h"})))
        );
        let beta = json!({"apiVersion": "client.authentication.k8s.io/v1beta1", "command": "gke-gcloud-auth-plugin"});
        assert_eq!(plugin(beta).unwrap().mode, Mode::IfAvailable, "v1beta1's default");
        let cases = [
            (json!({"command": "x"}), "apiVersion \"\" is not one opstatus speaks"),
            (
                json!({"apiVersion": "client.authentication.k8s.io/v1alpha1", "command": "x"}),
                "is not one opstatus speaks",
            ),
            (json!({"apiVersion": "client.authentication.k8s.io/v1", "command": "x"}), "has no interactiveMode"),
            (v1(json!({"command": ""})), "has no command"),
            (v1(json!({"interactiveMode": "Sometimes"})), "\"Sometimes\" is not Never, IfAvailable or Always"),
            (v1(json!({"args": "--token=s3cr3t"})), "args are not a list of text"),
            (v1(json!({"env": [{"name": "TOKEN"}]})), "env not a list of name and value"),
        ];
        for (exec, needle) in cases {
            let e = plugin(exec.clone()).unwrap_err();
            assert!(e.contains(needle) && !e.contains("s3cr3t"), "{exec}: {e}");
        }
        let mut unattended = plugin(v1(json!({"interactiveMode": "Always"}))).unwrap();
        unattended.attended = false;
        let e = unattended.run().err().unwrap();
        assert!(e.contains("`opstatus run` renews credentials while it runs"), "{e}");
    }

    #[test]
    fn the_output_must_be_an_exec_credential_and_is_never_quoted() {
        let p = plugin(v1(json!({}))).unwrap();
        let out = |status: Value| json!({"apiVersion": "client.authentication.k8s.io/v1", "kind": "ExecCredential", "status": status});
        let issued = p
            .issued(
                out(json!({"token": "s3cr3t", "expirationTimestamp": "2030-01-01T00:00:00Z"})).to_string().as_bytes(),
            )
            .unwrap();
        assert_eq!(issued.token.unwrap().expose(), "s3cr3t");
        assert_eq!(issued.expires, crate::util::time::parse_rfc3339("2030-01-01T00:00:00Z"));
        let cert =
            p.issued(out(json!({"clientCertificateData": "C", "clientKeyData": "K"})).to_string().as_bytes()).unwrap();
        assert_eq!((cert.client_cert.unwrap().0, cert.expires), (b"C".to_vec(), None));
        let cases = [
            (b"s3cr3t".to_vec(), "printed no JSON (line 1, column 1)"),
            (json!({"status": "s3cr3t"}).to_string().into_bytes(), "printed no ExecCredential of apiVersion"),
            (out(json!("s3cr3t")).to_string().into_bytes(), "without a status"),
            (
                json!({"apiVersion": "client.authentication.k8s.io/v1beta1", "kind": "ExecCredential"})
                    .to_string()
                    .into_bytes(),
                "of apiVersion client.authentication.k8s.io/v1 (but \"client.authentication.k8s.io/v1beta1\")",
            ),
            (
                json!({"apiVersion": "client.authentication.k8s.io/v1", "kind": "ExecCredential"})
                    .to_string()
                    .into_bytes(),
                "without a status",
            ),
            (out(json!({"token": ""})).to_string().into_bytes(), "neither a token nor"),
            (out(json!({"clientKeyData": "s3cr3t"})).to_string().into_bytes(), "only one of"),
            (
                out(json!({"token": "s3cr3t", "expirationTimestamp": "soon"})).to_string().into_bytes(),
                "not RFC 3339: \"soon\"",
            ),
        ];
        for (printed, needle) in cases {
            let e = p.issued(&printed).err().unwrap();
            assert!(e.contains(needle) && !e.contains("s3cr3t"), "{needle}: {e}");
        }
    }
}
