//! Settings from flags and environment variables, validated up front.
//!
//! [`parse`] turns the command line plus an environment lookup into an
//! [`Invocation`] or a [`UsageError`] (exit code 2) whose message names the
//! flag or variable at fault. A flag wins over its variable. Nothing here
//! touches the network or the file system: files are checked when the
//! credentials are loaded, still before any request.

use crate::kube::Secret;
use crate::pro::client::ApiKeySource;
use crate::signals::probes::grammar::ProbeSpec;
use crate::sinks::cluster_operator::intent::{RelatedObject, Version};
use std::fmt;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

pub const DEFAULT_CONFIGMAP: &str = "kube9-operator-status";
pub const DEFAULT_NAMESPACE: &str = "kube9-system";
pub const DEFAULT_SERVICE_ACCOUNT_DIR: &str = "/var/run/secrets/kubernetes.io/serviceaccount";
pub const DEFAULT_INTERVAL: Duration = Duration::from_secs(60);
pub use crate::status::{MAX_INTERVAL, MIN_INTERVAL};
pub const DEFAULT_CHECK_INTERVAL: Duration = Duration::from_secs(5);
pub const DEFAULT_WATCH_MAX_AGE: Duration = Duration::from_secs(60);

/// What to do.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Command {
    /// The agent loop (the default).
    Run,
    /// Compute and write the status once.
    Once,
    /// Read and interpret the published status.
    Get {
        output: OutputFormat,
    },
    /// Exec readiness probe: is the readiness file present and fresh?
    Probe,
    Help,
    Version,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum OutputFormat {
    Text,
    Json,
}

/// The validated settings shared by every command.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Settings {
    /// Explicit namespace (`--namespace` / `POD_NAMESPACE`); when `None` the
    /// credentials' namespace, then [`DEFAULT_NAMESPACE`], is used.
    pub namespace: Option<String>,
    pub configmap: String,
    pub interval: Duration,
    pub operator_version: String,
    pub service_account_dir: PathBuf,
    pub kubeconfig: Option<PathBuf>,
    /// How often signals are checked; never longer than `interval`.
    pub check_interval: Duration,
    /// The probe and metrics endpoint's address; off when `None`.
    pub listen: Option<SocketAddr>,
    pub ready_file: Option<PathBuf>,
    /// `opstatus probe`: the oldest readiness file that still counts.
    pub max_age: Duration,
    pub watch_urls: Vec<String>,
    /// A failing watch makes the status `unhealthy` instead of `degraded`.
    pub watch_critical: bool,
    pub watch_file: Option<PathBuf>,
    pub watch_max_age: Duration,
    /// Publish `unhealthy` / "Shutting down" on SIGTERM.
    pub final_status: bool,
    /// Where the kube9 API key comes from (file first, then variable).
    pub api_key: ApiKeySource,
    pub server_url: String,
    pub server_ca_file: Option<PathBuf>,
    /// OLM's OperatorCondition name; off when `None`.
    pub operator_condition: Option<String>,
    pub probes: Vec<ProbeSpec>,
    /// CRDs whose annotations declare probes.
    pub probe_crds: Vec<String>,
    /// Where namespaced probed resources are listed; empty: everywhere.
    pub probe_namespaces: Vec<String>,
    /// OpenShift ClusterOperator name; off when `None`.
    pub cluster_operator: Option<String>,
    pub operand_versions: Vec<Version>,
    pub version_file: Option<PathBuf>,
    pub related_objects: Vec<RelatedObject>,
    pub degraded_inertia: Duration,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Invocation {
    pub command: Command,
    pub settings: Settings,
}

/// A usage or configuration error: exit code 2.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct UsageError(pub String);

impl fmt::Display for UsageError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for UsageError {}

/// How a flag takes its value.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Kind {
    /// `--flag VALUE` or `--flag=VALUE`.
    Value,
    /// `--flag` alone (or `--flag=true|false`); its variable takes
    /// true/false/1/0/yes/no.
    Switch,
    /// Repeatable; its variable is a comma-separated list.
    List,
}

/// One setting: its flag, its variable, its default and its help line.
struct Flag {
    name: &'static str,
    env: &'static str,
    kind: Kind,
    default: &'static str,
    help: &'static str,
}

const FLAGS: &[Flag] = &[
    Flag {
        name: "--namespace",
        env: "POD_NAMESPACE",
        kind: Kind::Value,
        default: "the service-account namespace, else kube9-system",
        help: "Namespace of the status ConfigMap (the operator's namespace).",
    },
    Flag {
        name: "--configmap",
        env: "OPSTATUS_CONFIGMAP",
        kind: Kind::Value,
        default: DEFAULT_CONFIGMAP,
        help: "Name of the status ConfigMap.",
    },
    Flag {
        name: "--interval",
        env: "OPSTATUS_INTERVAL",
        kind: Kind::Value,
        default: "60s",
        help: "Heartbeat: how often the status is written (1s to 4m; 90, 90s, 2m).",
    },
    Flag {
        name: "--operator-version",
        env: "OPSTATUS_OPERATOR_VERSION",
        kind: Kind::Value,
        default: "opstatus's own version",
        help: "Semantic version of the operator this sidecar reports for.",
    },
    Flag {
        name: "--service-account-dir",
        env: "OPSTATUS_SERVICE_ACCOUNT_DIR",
        kind: Kind::Value,
        default: DEFAULT_SERVICE_ACCOUNT_DIR,
        help: "Where the in-cluster token, ca.crt and namespace files are.",
    },
    Flag {
        name: "--kubeconfig",
        env: "KUBECONFIG",
        kind: Kind::Value,
        default: "in-cluster credentials, else ~/.kube/config",
        help: "Kubeconfig file to use instead of in-cluster credentials.",
    },
    Flag {
        name: "--check-interval",
        env: "OPSTATUS_CHECK_INTERVAL",
        kind: Kind::Value,
        default: "5s (at most --interval)",
        help: "How often the watched signals are checked; a health change is published at once.",
    },
    Flag {
        name: "--listen",
        env: "OPSTATUS_LISTEN",
        kind: Kind::Value,
        default: "off",
        help: "Serve /healthz, /readyz, /status, /metrics on IP:PORT or :PORT (suggested :8090).",
    },
    Flag {
        name: "--ready-file",
        env: "OPSTATUS_READY_FILE",
        kind: Kind::Value,
        default: "off",
        help: "Keep this file fresh while ready (for `opstatus probe` in images without a shell).",
    },
    Flag {
        name: "--max-age",
        env: "OPSTATUS_PROBE_MAX_AGE",
        kind: Kind::Value,
        default: "30s",
        help: "`opstatus probe`: the oldest readiness file that still counts as ready.",
    },
    Flag {
        name: "--watch-url",
        env: "OPSTATUS_WATCH_URLS",
        kind: Kind::List,
        default: "none",
        help: "The operator's own health endpoint, e.g. http://127.0.0.1:8081/healthz (repeatable; env: comma-separated).",
    },
    Flag {
        name: "--watch-critical",
        env: "OPSTATUS_WATCH_CRITICAL",
        kind: Kind::Switch,
        default: "false",
        help: "A failing watch makes the status unhealthy instead of degraded.",
    },
    Flag {
        name: "--watch-file",
        env: "OPSTATUS_WATCH_FILE",
        kind: Kind::Value,
        default: "none",
        help: "A heartbeat file the operator touches; stale or missing means the operator is not well.",
    },
    Flag {
        name: "--watch-max-age",
        env: "OPSTATUS_WATCH_MAX_AGE",
        kind: Kind::Value,
        default: "60s",
        help: "The oldest --watch-file that still counts as fresh.",
    },
    Flag {
        name: "--no-final-status",
        env: "OPSTATUS_NO_FINAL_STATUS",
        kind: Kind::Switch,
        default: "false",
        help: "On SIGTERM, do not publish the final unhealthy \"Shutting down\" status.",
    },
    Flag {
        name: "--api-key-file",
        env: "OPSTATUS_API_KEY_FILE",
        kind: Kind::Value,
        default: "none (then KUBE9_API_KEY)",
        help: "The kube9 API key, e.g. a mounted Secret; re-read on every check, so adding or removing it needs no restart.",
    },
    Flag {
        name: "--server-url",
        env: "KUBE9_SERVER_URL",
        kind: Kind::Value,
        default: crate::pro::client::DEFAULT_SERVER_URL,
        help: "kube9-server, for registration (pro tier); http:// only when you mean it.",
    },
    Flag {
        name: "--server-ca-file",
        env: "OPSTATUS_SERVER_CA_FILE",
        kind: Kind::Value,
        default: "the system CA bundle",
        help: "CA bundle that kube9-server's certificate must chain to.",
    },
    Flag {
        name: "--operator-condition",
        env: "OPERATOR_CONDITION_NAME",
        kind: Kind::Value,
        default: "off (OLM sets the variable for operators it installs)",
        help: "OLM OperatorCondition (in the namespace) to publish the probes' Upgradeable and Important on.",
    },
    Flag {
        name: "--probe",
        env: "OPSTATUS_PROBES",
        kind: Kind::List,
        default: "none",
        help: "Conditions from the operator's resources: GROUP/VERSION/RESOURCE:Upgradeable=EXPR[;Important=EXPR], \
               e.g. example.com/v1/foos:Upgradeable=!Migrating (repeatable; env: comma-separated).",
    },
    Flag {
        name: "--probe-from-crd-annotations",
        env: "OPSTATUS_PROBE_CRDS",
        kind: Kind::List,
        default: "none",
        help: "CRD names whose olm.operatorframework.io/condition.Upgradeable/.Important annotations give probes \
               (repeatable; env: comma-separated).",
    },
    Flag {
        name: "--probe-namespace",
        env: "OPSTATUS_PROBE_NAMESPACES",
        kind: Kind::List,
        default: "WATCH_NAMESPACE (OLM's target namespaces), else all namespaces",
        help: "Namespaces whose resources the probes list (repeatable; env: comma-separated).",
    },
    Flag {
        name: "--cluster-operator",
        env: "OPSTATUS_CLUSTER_OPERATOR",
        kind: Kind::Value,
        default: "off",
        help: "OpenShift ClusterOperator to create and keep current (versions, Available, Degraded, ...).",
    },
    Flag {
        name: "--operand-version",
        env: "OPSTATUS_OPERAND_VERSIONS",
        kind: Kind::List,
        default: "none",
        help: "ClusterOperator: an operand's version, NAME=VERSION (repeatable; env: comma-separated).",
    },
    Flag {
        name: "--version-file",
        env: "OPSTATUS_VERSION_FILE",
        kind: Kind::Value,
        default: "none (the flags' versions count as running)",
        help: "ClusterOperator: a file the operator writes once a version runs (VERSION or NAME=VERSION lines); \
               until then the old version is reported and Progressing is True.",
    },
    Flag {
        name: "--related-object",
        env: "OPSTATUS_RELATED_OBJECTS",
        kind: Kind::List,
        default: "the namespace, the status ConfigMap, the OperatorCondition",
        help: "ClusterOperator: another related object, GROUP/RESOURCE/NAMESPACE/NAME (repeatable).",
    },
    Flag {
        name: "--degraded-inertia",
        env: "OPSTATUS_DEGRADED_INERTIA",
        kind: Kind::Value,
        default: "2m",
        help: "ClusterOperator: how long bad health must last before Degraded turns True.",
    },
];

/// The operator's watched namespaces (OLM sets it from the
/// `olm.targetNamespaces` annotation): the probes' default scope.
pub const WATCH_NAMESPACE_ENV: &str = "WATCH_NAMESPACE";

/// The API key's variable. Never a flag: command lines are visible to
/// every process on the node.
pub const API_KEY_ENV: &str = "KUBE9_API_KEY";

/// The `--help` text: every flag with its variable and default.
pub fn help_text() -> String {
    let mut s = format!(
        "opstatus {} - publish a Kubernetes operator's health as the kube9 status ConfigMap\n\n\
         Usage: opstatus [COMMAND] [FLAGS]\n\n\
         Commands:\n  \
           run        Run the agent: write the status now and every interval (default)\n  \
           once       Compute and write the status once; exit 0 on success, 1 on failure\n  \
           get        Read the published status and interpret it as kube9 readers do\n             \
                      (-o, --output text|json)\n  \
           probe      Exec readiness probe: exit 0 when --ready-file is fresh, 1 otherwise\n  \
           help       Print this help\n  \
           version    Print the version\n\nFlags (each also read from an environment variable; the flag wins):\n",
        env!("CARGO_PKG_VERSION")
    );
    for f in FLAGS {
        let value = if f.kind == Kind::Switch { "" } else { " VALUE" };
        s.push_str(&format!(
            "  {}{value}\n      {}\n      [env: {}] [default: {}]\n",
            f.name, f.help, f.env, f.default
        ));
    }
    s.push_str(
        "  -h, --help       Print this help\n  -V, --version    Print the version\n\n\
         KUBE9_API_KEY (environment only, never a flag: command lines are visible on the node)\n      \
         The kube9 API key when --api-key-file gives none; it is never logged or published.\n\n\
         Exit codes: 0 success, 1 runtime failure, 2 usage or configuration error.\n\
         Logs go to stderr; RUST_LOG sets the level (default info).\n",
    );
    s
}

fn flag(name: &str) -> &'static Flag {
    FLAGS.iter().find(|f| f.name == name).expect("a known flag")
}

/// Parses `args` (without the program name), reading variables via `env`.
pub fn parse(args: &[String], env: &dyn Fn(&str) -> Option<String>) -> Result<Invocation, UsageError> {
    let mut command = None;
    let mut values: Vec<(&'static str, String)> = Vec::new();
    let mut output = None;
    let mut i = 0;
    while i < args.len() {
        let arg = args[i].as_str();
        i += 1;
        let (name, inline) = match arg.split_once('=') {
            Some((n, v)) if n.starts_with("--") => (n, Some(v.to_string())),
            _ => (arg, None),
        };
        let mut take_value = |name: &str| -> Result<String, UsageError> {
            if let Some(v) = inline.clone() {
                return Ok(v);
            }
            let v = args.get(i).ok_or_else(|| UsageError(format!("{name} needs a value")))?;
            i += 1;
            Ok(v.clone())
        };
        match name {
            "-h" | "--help" => return Ok(Invocation { command: Command::Help, settings: defaults() }),
            "-V" | "--version" => return Ok(Invocation { command: Command::Version, settings: defaults() }),
            "-o" | "--output" => {
                let v = take_value(name)?;
                output = Some(match v.as_str() {
                    "text" => OutputFormat::Text,
                    "json" => OutputFormat::Json,
                    _ => return Err(UsageError(format!("{name}: {v:?} is not an output format (text or json)"))),
                });
            }
            _ if name.starts_with('-') => {
                let flag = FLAGS
                    .iter()
                    .find(|f| f.name == name)
                    .ok_or_else(|| UsageError(format!("unknown flag {name} (see opstatus --help)")))?;
                let v = match (flag.kind, &inline) {
                    (Kind::Switch, None) => "true".to_string(),
                    _ => take_value(name)?,
                };
                values.push((flag.name, v));
            }
            _ if command.is_none() => {
                command = Some(match name {
                    "run" => Command::Run,
                    "once" => Command::Once,
                    "get" => Command::Get { output: OutputFormat::Text },
                    "probe" => Command::Probe,
                    "help" => Command::Help,
                    "version" => Command::Version,
                    _ => {
                        return Err(UsageError(format!(
                            "unknown command {name:?} (run, once, get, probe, help, version)"
                        )));
                    }
                });
            }
            _ => return Err(UsageError(format!("unexpected argument {name:?}"))),
        }
    }
    let mut command = command.unwrap_or(Command::Run);
    match (&mut command, output) {
        (Command::Get { output: o }, Some(v)) => *o = v,
        (_, Some(_)) => return Err(UsageError("-o/--output is only for `opstatus get`".into())),
        _ => {}
    }
    if matches!(command, Command::Help | Command::Version) {
        return Ok(Invocation { command, settings: defaults() });
    }
    let settings = settings_from(&values, env)?;
    if command == Command::Probe && settings.ready_file.is_none() {
        return Err(UsageError("probe needs --ready-file (or OPSTATUS_READY_FILE)".into()));
    }
    Ok(Invocation { command, settings })
}

fn defaults() -> Settings {
    Settings {
        namespace: None,
        configmap: DEFAULT_CONFIGMAP.into(),
        interval: DEFAULT_INTERVAL,
        operator_version: env!("CARGO_PKG_VERSION").into(),
        service_account_dir: DEFAULT_SERVICE_ACCOUNT_DIR.into(),
        kubeconfig: None,
        check_interval: DEFAULT_CHECK_INTERVAL,
        listen: None,
        ready_file: None,
        max_age: crate::ready_file::DEFAULT_MAX_AGE,
        watch_urls: Vec::new(),
        watch_critical: false,
        watch_file: None,
        watch_max_age: DEFAULT_WATCH_MAX_AGE,
        final_status: true,
        api_key: ApiKeySource { file: None, env: None },
        server_url: crate::pro::client::DEFAULT_SERVER_URL.into(),
        server_ca_file: None,
        operator_condition: None,
        probes: Vec::new(),
        probe_crds: Vec::new(),
        probe_namespaces: Vec::new(),
        cluster_operator: None,
        operand_versions: Vec::new(),
        version_file: None,
        related_objects: Vec::new(),
        degraded_inertia: crate::sinks::cluster_operator::DEFAULT_INERTIA,
    }
}

/// The raw values of the flags given on the command line or in variables,
/// each with the name to blame when it is wrong.
struct Raw<'a> {
    values: &'a [(&'static str, String)],
    env: &'a dyn Fn(&str) -> Option<String>,
}

impl Raw<'_> {
    /// The last value of a single-valued flag, else its variable.
    fn one(&self, name: &str) -> Result<Option<(String, String)>, UsageError> {
        let flag = flag(name);
        if let Some((_, v)) = self.values.iter().rev().find(|(n, _)| *n == flag.name) {
            if v.is_empty() {
                return Err(UsageError(format!("{} is empty", flag.name)));
            }
            return Ok(Some((v.clone(), flag.name.to_string())));
        }
        match (self.env)(flag.env) {
            // An empty KUBECONFIG means unset, as for kubectl.
            Some(v) if v.is_empty() && flag.env == "KUBECONFIG" => Ok(None),
            Some(v) if v.is_empty() => Err(UsageError(format!("{} is set but empty", flag.env))),
            Some(v) => Ok(Some((v, flag.env.to_string()))),
            None => Ok(None),
        }
    }

    /// Every value of a repeatable flag, else its comma-separated variable.
    fn list(&self, name: &str) -> Result<Vec<(String, String)>, UsageError> {
        let flag = flag(name);
        let given: Vec<_> = self.values.iter().filter(|(n, _)| *n == flag.name).collect();
        if !given.is_empty() {
            return given
                .into_iter()
                .map(|(_, v)| match v.is_empty() {
                    true => Err(UsageError(format!("{} is empty", flag.name))),
                    false => Ok((v.clone(), flag.name.to_string())),
                })
                .collect();
        }
        let Some(v) = (self.env)(flag.env) else { return Ok(Vec::new()) };
        let items: Vec<_> = v.split(',').map(str::trim).collect();
        if items.iter().any(|item| item.is_empty()) {
            return Err(UsageError(format!("{} has an empty item: {v:?}", flag.env)));
        }
        Ok(items.into_iter().map(|item| (item.to_string(), flag.env.to_string())).collect())
    }

    fn switch(&self, name: &str) -> Result<bool, UsageError> {
        match self.one(name)? {
            None => Ok(false),
            Some((v, source)) => match v.to_ascii_lowercase().as_str() {
                "true" | "1" | "yes" => Ok(true),
                "false" | "0" | "no" => Ok(false),
                _ => Err(UsageError(format!("{source}: {v:?} is not true or false"))),
            },
        }
    }

    fn duration(&self, name: &str, range: (Duration, Duration)) -> Result<Option<Duration>, UsageError> {
        let Some((v, source)) = self.one(name)? else { return Ok(None) };
        let d = parse_duration(&v).map_err(|why| UsageError(format!("{source}: {v:?} {why}")))?;
        if d < range.0 || d > range.1 {
            return Err(UsageError(format!(
                "{source}: {v:?} must be between {}s and {}s",
                range.0.as_secs(),
                range.1.as_secs()
            )));
        }
        Ok(Some(d))
    }
}

fn settings_from(
    values: &[(&'static str, String)],
    env: &dyn Fn(&str) -> Option<String>,
) -> Result<Settings, UsageError> {
    let raw = Raw { values, env };
    let mut s = defaults();
    if let Some((v, source)) = raw.one("--namespace")? {
        check_dns_label(&v)
            .map_err(|why| UsageError(format!("{source}: {v:?} is not a valid namespace name: {why}")))?;
        s.namespace = Some(v);
    }
    if let Some((v, source)) = raw.one("--configmap")? {
        check_dns_subdomain(&v)
            .map_err(|why| UsageError(format!("{source}: {v:?} is not a valid ConfigMap name: {why}")))?;
        s.configmap = v;
    }
    if let Some((v, source)) = raw.one("--interval")? {
        s.interval = parse_interval(&v).map_err(|why| UsageError(format!("{source}: {v:?} {why}")))?;
    }
    if let Some((v, source)) = raw.one("--operator-version")? {
        if !crate::status::is_semver(&v) {
            return Err(UsageError(format!(
                "{source}: {v:?} is not a semantic version (MAJOR.MINOR.PATCH, e.g. 1.4.2; no leading v)"
            )));
        }
        s.operator_version = v;
    }
    if let Some((v, _)) = raw.one("--service-account-dir")? {
        s.service_account_dir = v.into();
    }
    if let Some((v, _)) = raw.one("--kubeconfig")? {
        s.kubeconfig = Some(v.into());
    }
    let day = Duration::from_secs(86_400);
    if let Some(d) = raw.duration("--check-interval", (MIN_INTERVAL, MAX_INTERVAL))? {
        s.check_interval = d;
    }
    // Signals are checked at least as often as the heartbeat.
    s.check_interval = s.check_interval.min(s.interval);
    if let Some((v, source)) = raw.one("--listen")? {
        s.listen = Some(parse_listen(&v).map_err(|why| UsageError(format!("{source}: {v:?} {why}")))?);
    }
    if let Some((v, _)) = raw.one("--ready-file")? {
        s.ready_file = Some(v.into());
    }
    if let Some(d) = raw.duration("--max-age", (MIN_INTERVAL, day))? {
        s.max_age = d;
    }
    for (url, source) in raw.list("--watch-url")? {
        crate::signals::watch::check_url(&url).map_err(|why| UsageError(format!("{source}: {url:?} {why}")))?;
        s.watch_urls.push(url);
    }
    s.watch_critical = raw.switch("--watch-critical")?;
    if let Some((v, _)) = raw.one("--watch-file")? {
        s.watch_file = Some(v.into());
    }
    if let Some(d) = raw.duration("--watch-max-age", (MIN_INTERVAL, day))? {
        s.watch_max_age = d;
    }
    s.final_status = !raw.switch("--no-final-status")?;
    if let Some((v, _)) = raw.one("--api-key-file")? {
        s.api_key.file = Some(v.into());
    }
    // An empty variable means no key, as an unset one does.
    s.api_key.env = env(API_KEY_ENV).filter(|k| !k.trim().is_empty()).map(Secret::new);
    if let Some((v, source)) = raw.one("--server-url")? {
        if !v.starts_with("https://") && !v.starts_with("http://") {
            return Err(UsageError(format!("{source}: {v:?} must start with https:// (or http:// to mean it)")));
        }
        s.server_url = v;
    }
    if let Some((v, _)) = raw.one("--server-ca-file")? {
        s.server_ca_file = Some(v.into());
    }
    olm_and_openshift(&raw, &mut s)?;
    Ok(s)
}

/// The OperatorCondition, probe and ClusterOperator settings.
fn olm_and_openshift(raw: &Raw<'_>, s: &mut Settings) -> Result<(), UsageError> {
    let blame = |source: &str, v: &str, why: &str| UsageError(format!("{source}: {v:?} {why}"));
    if let Some((v, source)) = raw.one("--operator-condition")? {
        check_dns_subdomain(&v).map_err(|why| blame(&source, &v, &format!("is not a valid name: {why}")))?;
        s.operator_condition = Some(v);
    }
    for (v, source) in raw.list("--probe")? {
        s.probes.push(
            crate::signals::probes::grammar::parse_probe(&v)
                .map_err(|why| UsageError(format!("{source}: {v:?}: {why}")))?,
        );
    }
    for (v, source) in raw.list("--probe-from-crd-annotations")? {
        check_dns_subdomain(&v).map_err(|why| blame(&source, &v, &format!("is not a CRD name: {why}")))?;
        if !v.contains('.') {
            return Err(blame(&source, &v, "is not a CRD name (PLURAL.GROUP, e.g. foos.example.com)"));
        }
        s.probe_crds.push(v);
    }
    let mut namespaces = raw.list("--probe-namespace")?;
    if namespaces.is_empty() {
        // The operator's own namespaces: OLM's convention is WATCH_NAMESPACE
        // from the olm.targetNamespaces annotation; empty means all.
        let watched = (raw.env)(WATCH_NAMESPACE_ENV).unwrap_or_default();
        let items = watched.split(',').map(str::trim).filter(|n| !n.is_empty());
        namespaces = items.map(|n| (n.to_string(), WATCH_NAMESPACE_ENV.to_string())).collect();
    }
    for (v, source) in namespaces {
        check_dns_label(&v).map_err(|why| blame(&source, &v, &format!("is not a valid namespace name: {why}")))?;
        s.probe_namespaces.push(v);
    }
    if let Some((v, source)) = raw.one("--cluster-operator")? {
        check_dns_subdomain(&v).map_err(|why| blame(&source, &v, &format!("is not a valid name: {why}")))?;
        s.cluster_operator = Some(v);
    }
    for (v, source) in raw.list("--operand-version")? {
        let version = crate::sinks::cluster_operator::intent::parse_operand_version(&v)
            .map_err(|why| blame(&source, &v, &why))?;
        if s.operand_versions.iter().any(|o| o.name == version.name) {
            return Err(blame(&source, &v, &format!("names {:?} twice", version.name)));
        }
        s.operand_versions.push(version);
    }
    if let Some((v, _)) = raw.one("--version-file")? {
        s.version_file = Some(v.into());
    }
    for (v, source) in raw.list("--related-object")? {
        let object =
            crate::sinks::cluster_operator::intent::parse_related_object(&v).map_err(|why| blame(&source, &v, &why))?;
        s.related_objects.push(object);
    }
    if let Some(d) = raw.duration("--degraded-inertia", (Duration::ZERO, Duration::from_secs(3600)))? {
        s.degraded_inertia = d;
    }
    let cluster_operator_only = [
        ("--operand-version", !s.operand_versions.is_empty()),
        ("--version-file", s.version_file.is_some()),
        ("--related-object", !s.related_objects.is_empty()),
    ];
    if s.cluster_operator.is_none()
        && let Some((name, _)) = cluster_operator_only.iter().find(|(_, given)| *given)
    {
        return Err(UsageError(format!("{name} is for the ClusterOperator: give --cluster-operator too")));
    }
    Ok(())
}

/// `IP:PORT`, `[IPv6]:PORT` or `:PORT` (all IPv4 interfaces). Names are
/// refused: resolving them would need a resolver a scratch image lacks.
pub fn parse_listen(v: &str) -> Result<SocketAddr, String> {
    let full = if v.starts_with(':') { format!("0.0.0.0{v}") } else { v.to_string() };
    full.parse().map_err(|_| "is not IP:PORT or :PORT (e.g. :8090, 127.0.0.1:8090, [::]:8090)".to_string())
}

/// Parses an interval: whole seconds (`90`), or a number with `s`, `m` or
/// `h` (`90s`, `2m`), within [`MIN_INTERVAL`]..=[`MAX_INTERVAL`].
pub fn parse_interval(v: &str) -> Result<Duration, String> {
    let d = parse_duration(v)?;
    if d < MIN_INTERVAL || d > MAX_INTERVAL {
        return Err("must be between 1s and 4m (readers treat a status older than 5 minutes as stale)".into());
    }
    Ok(d)
}

/// `90`, `90s`, `2m`, `1h`: a whole number with an optional unit.
pub fn parse_duration(v: &str) -> Result<Duration, String> {
    let digits = v.bytes().take_while(u8::is_ascii_digit).count();
    let (number, unit) = v.split_at(digits);
    if number.is_empty() {
        return Err("is not a duration (use e.g. 90, 90s, 2m)".into());
    }
    let n: u64 = number.parse().map_err(|_| "is too large".to_string())?;
    let seconds = match unit {
        "" | "s" => Some(n),
        "m" => n.checked_mul(60),
        "h" => n.checked_mul(3600),
        _ => return Err(format!("has an unknown unit {unit:?} (use s, m or h)")),
    };
    seconds.map(Duration::from_secs).ok_or_else(|| "is too large".into())
}

/// RFC 1123 label, as Kubernetes requires of namespace names.
pub fn check_dns_label(v: &str) -> Result<(), &'static str> {
    if v.len() > 63 {
        return Err("at most 63 characters");
    }
    check_label_chars(v)
}

/// RFC 1123 subdomain, as Kubernetes requires of most object names.
pub fn check_dns_subdomain(v: &str) -> Result<(), &'static str> {
    if v.len() > 253 {
        return Err("at most 253 characters");
    }
    v.split('.').try_for_each(check_label_chars)
}

fn check_label_chars(v: &str) -> Result<(), &'static str> {
    let b = v.as_bytes();
    if b.is_empty() {
        return Err("must not be empty");
    }
    if !b.iter().all(|&c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == b'-') {
        return Err("only lowercase letters, digits and '-' are allowed");
    }
    if b[0] == b'-' || b[b.len() - 1] == b'-' {
        return Err("must start and end with a letter or digit");
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A command line, its variables, and the error it must give.
    type Case<'a> = (&'a str, &'a [(&'a str, &'a str)], &'a str);

    fn args(s: &str) -> Vec<String> {
        s.split_whitespace().map(String::from).collect()
    }

    fn parse_with(cmdline: &str, vars: &[(&str, &str)]) -> Result<Invocation, UsageError> {
        let vars: Vec<(String, String)> = vars.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect();
        parse(&args(cmdline), &move |k| vars.iter().find(|(n, _)| n == k).map(|(_, v)| v.clone()))
    }

    fn error_of(cmdline: &str, vars: &[(&str, &str)]) -> String {
        parse_with(cmdline, vars).unwrap_err().0
    }

    #[test]
    fn defaults_run_the_agent() {
        let inv = parse_with("", &[]).unwrap();
        assert_eq!(inv.command, Command::Run);
        assert_eq!(inv.settings, defaults());
        assert_eq!(inv.settings.interval, Duration::from_secs(60));
    }

    #[test]
    fn flags_win_over_environment() {
        let vars = [("OPSTATUS_INTERVAL", "5"), ("POD_NAMESPACE", "from-env"), ("OPSTATUS_CONFIGMAP", "env-cm")];
        let inv = parse_with("once --interval=2m --namespace ops", &vars).unwrap();
        assert_eq!(inv.command, Command::Once);
        assert_eq!(inv.settings.interval, Duration::from_secs(120));
        assert_eq!(inv.settings.namespace.as_deref(), Some("ops"));
        assert_eq!(inv.settings.configmap, "env-cm");
    }

    #[test]
    fn get_takes_an_output_format() {
        assert_eq!(parse_with("get -o json", &[]).unwrap().command, Command::Get { output: OutputFormat::Json });
        assert_eq!(parse_with("get", &[]).unwrap().command, Command::Get { output: OutputFormat::Text });
        assert_eq!(error_of("run -o json", &[]), "-o/--output is only for `opstatus get`");
        assert_eq!(error_of("get -o yaml", &[]), "-o: \"yaml\" is not an output format (text or json)");
    }

    #[test]
    fn help_and_version_need_no_valid_settings() {
        assert_eq!(parse_with("--help", &[("OPSTATUS_INTERVAL", "bad")]).unwrap().command, Command::Help);
        assert_eq!(parse_with("run -V", &[]).unwrap().command, Command::Version);
    }

    #[test]
    fn help_lists_every_flag_with_env_and_default() {
        let help = help_text();
        for f in FLAGS {
            assert!(help.contains(f.name) && help.contains(f.env) && help.contains(f.default), "{}", f.name);
        }
    }

    #[test]
    fn intervals() {
        for (v, secs) in [("90", 90), ("90s", 90), ("2m", 120), ("1s", 1), ("4m", 240)] {
            assert_eq!(parse_interval(v), Ok(Duration::from_secs(secs)), "{v}");
        }
        for v in
            ["", "0", "0s", "5m", "1h", "-5", "1.5s", "5x", "s", "99999999999999999999999", "18446744073709551615h"]
        {
            assert!(parse_interval(v).is_err(), "{v:?}");
        }
    }

    #[test]
    fn every_bad_input_names_its_source() {
        let cases: &[Case] = &[
            ("--bogus", &[], "unknown flag --bogus (see opstatus --help)"),
            ("frobnicate", &[], "unknown command \"frobnicate\" (run, once, get, probe, help, version)"),
            ("run extra", &[], "unexpected argument \"extra\""),
            ("--interval", &[], "--interval needs a value"),
            ("--interval=", &[], "--interval is empty"),
            ("--interval soon", &[], "--interval: \"soon\" is not a duration (use e.g. 90, 90s, 2m)"),
            (
                "",
                &[("OPSTATUS_INTERVAL", "10m")],
                "OPSTATUS_INTERVAL: \"10m\" must be between 1s and 4m (readers treat a status older than 5 minutes as stale)",
            ),
            ("", &[("OPSTATUS_INTERVAL", "")], "OPSTATUS_INTERVAL is set but empty"),
            (
                "--namespace Ops",
                &[],
                "--namespace: \"Ops\" is not a valid namespace name: only lowercase letters, digits and '-' are allowed",
            ),
            (
                "",
                &[("POD_NAMESPACE", "-x")],
                "POD_NAMESPACE: \"-x\" is not a valid namespace name: must start and end with a letter or digit",
            ),
            ("--configmap a..b", &[], "--configmap: \"a..b\" is not a valid ConfigMap name: must not be empty"),
            (
                "--operator-version v1.0",
                &[],
                "--operator-version: \"v1.0\" is not a semantic version (MAJOR.MINOR.PATCH, e.g. 1.4.2; no leading v)",
            ),
            ("", &[("OPSTATUS_SERVICE_ACCOUNT_DIR", "")], "OPSTATUS_SERVICE_ACCOUNT_DIR is set but empty"),
        ];
        for (cmdline, vars, want) in cases {
            assert_eq!(&error_of(cmdline, vars), want, "{cmdline:?} {vars:?}");
        }
    }

    #[test]
    fn endpoint_readiness_and_watch_settings() {
        let vars = [
            ("OPSTATUS_WATCH_URLS", "http://127.0.0.1:8081/healthz, http://127.0.0.1:9000/ready"),
            ("OPSTATUS_WATCH_CRITICAL", "yes"),
        ];
        let s = parse_with("run --listen :8090 --ready-file /run/ready --check-interval 2s --watch-file /tmp/hb --watch-max-age 2m --no-final-status", &vars)
            .unwrap()
            .settings;
        assert_eq!(s.listen, Some("0.0.0.0:8090".parse().unwrap()));
        assert_eq!(s.ready_file.as_deref(), Some(std::path::Path::new("/run/ready")));
        assert_eq!(s.check_interval, Duration::from_secs(2));
        assert_eq!(s.watch_urls, ["http://127.0.0.1:8081/healthz", "http://127.0.0.1:9000/ready"]);
        assert!(s.watch_critical && !s.final_status);
        assert_eq!(s.watch_max_age, Duration::from_secs(120));
        // Flags replace the variable's list; a switch can be turned off.
        let s = parse_with("--watch-url http://a:1/x --watch-url=http://b:2/y --watch-critical=false", &vars)
            .unwrap()
            .settings;
        assert_eq!(s.watch_urls, ["http://a:1/x", "http://b:2/y"]);
        assert!(!s.watch_critical);
        // The check interval never exceeds the heartbeat.
        assert_eq!(parse_with("--interval 2s", &[]).unwrap().settings.check_interval, Duration::from_secs(2));
        assert_eq!(parse_with("", &[]).unwrap().settings.check_interval, Duration::from_secs(5));
        assert_eq!(
            parse_with("--listen [::1]:9000", &[]).unwrap().settings.listen,
            Some("[::1]:9000".parse().unwrap())
        );
    }

    #[test]
    fn probe_needs_a_ready_file() {
        assert_eq!(error_of("probe", &[]), "probe needs --ready-file (or OPSTATUS_READY_FILE)");
        let inv = parse_with("probe --max-age 10s", &[("OPSTATUS_READY_FILE", "/run/ready")]).unwrap();
        assert_eq!((inv.command, inv.settings.max_age), (Command::Probe, Duration::from_secs(10)));
    }

    #[test]
    fn bad_endpoint_and_watch_settings_name_their_source() {
        let cases: &[Case] = &[
            (
                "--listen localhost:8090",
                &[],
                "--listen: \"localhost:8090\" is not IP:PORT or :PORT (e.g. :8090, 127.0.0.1:8090, [::]:8090)",
            ),
            ("--listen 8090", &[], "--listen: \"8090\" is not IP:PORT or :PORT"),
            ("--watch-url https://x/healthz", &[], "--watch-url: \"https://x/healthz\" must start with http://"),
            ("", &[("OPSTATUS_WATCH_URLS", "http://a:1/x,,http://b:2/y")], "OPSTATUS_WATCH_URLS has an empty item"),
            ("", &[("OPSTATUS_WATCH_CRITICAL", "maybe")], "OPSTATUS_WATCH_CRITICAL: \"maybe\" is not true or false"),
            ("--check-interval 0s", &[], "--check-interval: \"0s\" must be between 1s and 240s"),
            ("--watch-max-age forever", &[], "--watch-max-age: \"forever\" is not a duration"),
            ("probe --ready-file /r --max-age 2d", &[], "--max-age: \"2d\" has an unknown unit \"d\""),
            ("--ready-file=", &[], "--ready-file is empty"),
        ];
        for (cmdline, vars, want) in cases {
            let got = error_of(cmdline, vars);
            assert!(got.starts_with(want), "{cmdline:?}: {got}");
        }
    }

    #[test]
    fn olm_and_openshift_settings() {
        let vars = [
            ("OPERATOR_CONDITION_NAME", "demo-operator.v1.2.0"),
            ("OPSTATUS_PROBES", "example.com/v1/foos:Upgradeable=!Migrating, example.com/v1/bars:Important=Broken"),
        ];
        let s = parse_with(
            "--probe-namespace apps --probe-namespace=web --probe-from-crd-annotations foos.example.com \
             --cluster-operator demo --operand-version engine=2.0.0 --version-file /run/v \
             --related-object /configmaps/ops/settings --degraded-inertia 0",
            &vars,
        )
        .unwrap()
        .settings;
        assert_eq!(s.operator_condition.as_deref(), Some("demo-operator.v1.2.0"));
        let probed: Vec<String> = s.probes.iter().map(|p| p.display_name()).collect();
        assert_eq!(probed, ["foos.example.com", "bars.example.com"]);
        assert_eq!(
            (s.probe_namespaces, s.probe_crds),
            (vec!["apps".into(), "web".into()], vec!["foos.example.com".into()])
        );
        assert_eq!(s.cluster_operator.as_deref(), Some("demo"));
        assert_eq!(s.operand_versions, [Version::new("engine", "2.0.0")]);
        assert_eq!(s.version_file.as_deref(), Some(std::path::Path::new("/run/v")));
        assert_eq!(s.related_objects, [RelatedObject::new("", "configmaps", "ops", "settings")]);
        assert_eq!(s.degraded_inertia, Duration::ZERO);
        assert_eq!(parse_with("", &[]).unwrap().settings.degraded_inertia, Duration::from_secs(120));
        // The operator's watched namespaces are the default scope; empty means all.
        let watched = |v| parse_with("", &[("WATCH_NAMESPACE", v)]).map(|i| i.settings.probe_namespaces);
        assert_eq!(watched("apps, web"), Ok(vec!["apps".to_string(), "web".to_string()]));
        assert_eq!(watched(""), Ok(vec![]));
        assert_eq!(
            parse_with("--probe-namespace ops", &[("WATCH_NAMESPACE", "apps")]).unwrap().settings.probe_namespaces,
            ["ops"]
        );
        assert_eq!(
            watched("Apps").unwrap_err().0,
            "WATCH_NAMESPACE: \"Apps\" is not a valid namespace name: only lowercase letters, digits and '-' are allowed"
        );
        assert_eq!(
            error_of("--cluster-operator demo --operand-version a=1 --operand-version a=2", &[]),
            "--operand-version: \"a=2\" names \"a\" twice"
        );
        assert_eq!(
            error_of("--cluster-operator demo --degraded-inertia 2h", &[]),
            "--degraded-inertia: \"2h\" must be between 0s and 3600s"
        );
    }

    #[test]
    fn empty_kubeconfig_variable_means_unset() {
        assert_eq!(parse_with("", &[("KUBECONFIG", "")]).unwrap().settings.kubeconfig, None);
    }

    #[test]
    fn names() {
        assert!(check_dns_label("kube9-system").is_ok());
        assert!(check_dns_label(&"a".repeat(64)).is_err());
        assert!(check_dns_subdomain("kube9.operator-status").is_ok());
        assert!(check_dns_subdomain("UPPER").is_err());
    }
}
