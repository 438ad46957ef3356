//! Settings from flags and environment variables, validated up front.
//!
//! [`parse`] turns the command line plus an environment lookup into an
//! [`Invocation`] or a [`UsageError`] (exit code 2) whose message names the
//! flag or variable at fault. A flag wins over its variable. Nothing here
//! touches the network or the file system: files are checked when the
//! credentials are loaded, still before any request.

use std::fmt;
use std::path::PathBuf;
use std::time::Duration;

pub const DEFAULT_CONFIGMAP: &str = "kube9-operator-status";
pub const DEFAULT_NAMESPACE: &str = "kube9-system";
pub const DEFAULT_SERVICE_ACCOUNT_DIR: &str = "/var/run/secrets/kubernetes.io/serviceaccount";
pub const DEFAULT_INTERVAL: Duration = Duration::from_secs(60);
/// Readers call a status older than 5 minutes stale: a longer interval would
/// make every healthy status look stale between writes.
pub const MAX_INTERVAL: Duration = Duration::from_secs(240);
pub const MIN_INTERVAL: Duration = Duration::from_secs(1);

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

/// One setting: its flag, its variable, its default and its help line.
struct Flag {
    name: &'static str,
    env: &'static str,
    default: &'static str,
    help: &'static str,
}

const FLAGS: &[Flag] = &[
    Flag {
        name: "--namespace",
        env: "POD_NAMESPACE",
        default: "the service-account namespace, else kube9-system",
        help: "Namespace of the status ConfigMap (the operator's namespace).",
    },
    Flag {
        name: "--configmap",
        env: "OPSTATUS_CONFIGMAP",
        default: DEFAULT_CONFIGMAP,
        help: "Name of the status ConfigMap.",
    },
    Flag {
        name: "--interval",
        env: "OPSTATUS_INTERVAL",
        default: "60s",
        help: "Heartbeat: how often the status is written (1s to 4m; 90, 90s, 2m).",
    },
    Flag {
        name: "--operator-version",
        env: "OPSTATUS_OPERATOR_VERSION",
        default: "opstatus's own version",
        help: "Semantic version of the operator this sidecar reports for.",
    },
    Flag {
        name: "--service-account-dir",
        env: "OPSTATUS_SERVICE_ACCOUNT_DIR",
        default: DEFAULT_SERVICE_ACCOUNT_DIR,
        help: "Where the in-cluster token, ca.crt and namespace files are.",
    },
    Flag {
        name: "--kubeconfig",
        env: "KUBECONFIG",
        default: "in-cluster credentials, else ~/.kube/config",
        help: "Kubeconfig file to use instead of in-cluster credentials.",
    },
];

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
           help       Print this help\n  \
           version    Print the version\n\nFlags (each also read from an environment variable; the flag wins):\n",
        env!("CARGO_PKG_VERSION")
    );
    for f in FLAGS {
        s.push_str(&format!(
            "  {} VALUE\n      {}\n      [env: {}] [default: {}]\n",
            f.name, f.help, f.env, f.default
        ));
    }
    s.push_str(
        "  -h, --help       Print this help\n  -V, --version    Print the version\n\n\
         Exit codes: 0 success, 1 runtime failure, 2 usage or configuration error.\n\
         Logs go to stderr; RUST_LOG sets the level (default info).\n",
    );
    s
}

/// Parses `args` (without the program name), reading variables via `env`.
pub fn parse(
    args: &[String],
    env: &dyn Fn(&str) -> Option<String>,
) -> Result<Invocation, UsageError> {
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
            let v = args
                .get(i)
                .ok_or_else(|| UsageError(format!("{name} needs a value")))?;
            i += 1;
            Ok(v.clone())
        };
        match name {
            "-h" | "--help" => {
                return Ok(Invocation {
                    command: Command::Help,
                    settings: defaults(),
                });
            }
            "-V" | "--version" => {
                return Ok(Invocation {
                    command: Command::Version,
                    settings: defaults(),
                });
            }
            "-o" | "--output" => {
                let v = take_value(name)?;
                output = Some(match v.as_str() {
                    "text" => OutputFormat::Text,
                    "json" => OutputFormat::Json,
                    _ => {
                        return Err(UsageError(format!(
                            "{name}: {v:?} is not an output format (text or json)"
                        )));
                    }
                });
            }
            _ if name.starts_with('-') => {
                let flag = FLAGS.iter().find(|f| f.name == name).ok_or_else(|| {
                    UsageError(format!("unknown flag {name} (see opstatus --help)"))
                })?;
                let v = take_value(name)?;
                values.push((flag.name, v));
            }
            _ if command.is_none() => {
                command = Some(match name {
                    "run" => Command::Run,
                    "once" => Command::Once,
                    "get" => Command::Get {
                        output: OutputFormat::Text,
                    },
                    "help" => Command::Help,
                    "version" => Command::Version,
                    _ => {
                        return Err(UsageError(format!(
                            "unknown command {name:?} (run, once, get, help, version)"
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
        return Ok(Invocation {
            command,
            settings: defaults(),
        });
    }
    let settings = settings_from(&values, env)?;
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
    }
}

fn settings_from(
    values: &[(&'static str, String)],
    env: &dyn Fn(&str) -> Option<String>,
) -> Result<Settings, UsageError> {
    // The value of a setting and the name to blame when it is wrong.
    let lookup = |flag: &Flag| -> Result<Option<(String, String)>, UsageError> {
        if let Some((_, v)) = values.iter().rev().find(|(n, _)| *n == flag.name) {
            if v.is_empty() {
                return Err(UsageError(format!("{} is empty", flag.name)));
            }
            return Ok(Some((v.clone(), flag.name.to_string())));
        }
        match env(flag.env) {
            // An empty KUBECONFIG means unset, as for kubectl.
            Some(v) if v.is_empty() && flag.env == "KUBECONFIG" => Ok(None),
            Some(v) if v.is_empty() => Err(UsageError(format!("{} is set but empty", flag.env))),
            Some(v) => Ok(Some((v, flag.env.to_string()))),
            None => Ok(None),
        }
    };
    let flag = |name: &str| FLAGS.iter().find(|f| f.name == name).expect("known flag");
    let mut s = defaults();
    if let Some((v, source)) = lookup(flag("--namespace"))? {
        check_dns_label(&v).map_err(|why| {
            UsageError(format!(
                "{source}: {v:?} is not a valid namespace name: {why}"
            ))
        })?;
        s.namespace = Some(v);
    }
    if let Some((v, source)) = lookup(flag("--configmap"))? {
        check_dns_subdomain(&v).map_err(|why| {
            UsageError(format!(
                "{source}: {v:?} is not a valid ConfigMap name: {why}"
            ))
        })?;
        s.configmap = v;
    }
    if let Some((v, source)) = lookup(flag("--interval"))? {
        s.interval =
            parse_interval(&v).map_err(|why| UsageError(format!("{source}: {v:?} {why}")))?;
    }
    if let Some((v, source)) = lookup(flag("--operator-version"))? {
        if !crate::status::is_semver(&v) {
            return Err(UsageError(format!(
                "{source}: {v:?} is not a semantic version (MAJOR.MINOR.PATCH, e.g. 1.4.2; no leading v)"
            )));
        }
        s.operator_version = v;
    }
    if let Some((v, _)) = lookup(flag("--service-account-dir"))? {
        s.service_account_dir = v.into();
    }
    if let Some((v, _)) = lookup(flag("--kubeconfig"))? {
        s.kubeconfig = Some(v.into());
    }
    Ok(s)
}

/// Parses an interval: whole seconds (`90`), or a number with `s`, `m` or
/// `h` (`90s`, `2m`), within [`MIN_INTERVAL`]..=[`MAX_INTERVAL`].
pub fn parse_interval(v: &str) -> Result<Duration, String> {
    let d = parse_duration(v)?;
    if d < MIN_INTERVAL || d > MAX_INTERVAL {
        return Err(
            "must be between 1s and 4m (readers treat a status older than 5 minutes as stale)"
                .into(),
        );
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
    seconds
        .map(Duration::from_secs)
        .ok_or_else(|| "is too large".into())
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
    if !b
        .iter()
        .all(|&c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == b'-')
    {
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

    fn args(s: &str) -> Vec<String> {
        s.split_whitespace().map(String::from).collect()
    }

    fn parse_with(cmdline: &str, vars: &[(&str, &str)]) -> Result<Invocation, UsageError> {
        let vars: Vec<(String, String)> = vars
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        parse(&args(cmdline), &move |k| {
            vars.iter().find(|(n, _)| n == k).map(|(_, v)| v.clone())
        })
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
        let vars = [
            ("OPSTATUS_INTERVAL", "5"),
            ("POD_NAMESPACE", "from-env"),
            ("OPSTATUS_CONFIGMAP", "env-cm"),
        ];
        let inv = parse_with("once --interval=2m --namespace ops", &vars).unwrap();
        assert_eq!(inv.command, Command::Once);
        assert_eq!(inv.settings.interval, Duration::from_secs(120));
        assert_eq!(inv.settings.namespace.as_deref(), Some("ops"));
        assert_eq!(inv.settings.configmap, "env-cm");
    }

    #[test]
    fn get_takes_an_output_format() {
        assert_eq!(
            parse_with("get -o json", &[]).unwrap().command,
            Command::Get {
                output: OutputFormat::Json
            }
        );
        assert_eq!(
            parse_with("get", &[]).unwrap().command,
            Command::Get {
                output: OutputFormat::Text
            }
        );
        assert_eq!(
            error_of("run -o json", &[]),
            "-o/--output is only for `opstatus get`"
        );
        assert_eq!(
            error_of("get -o yaml", &[]),
            "-o: \"yaml\" is not an output format (text or json)"
        );
    }

    #[test]
    fn help_and_version_need_no_valid_settings() {
        assert_eq!(
            parse_with("--help", &[("OPSTATUS_INTERVAL", "bad")])
                .unwrap()
                .command,
            Command::Help
        );
        assert_eq!(parse_with("run -V", &[]).unwrap().command, Command::Version);
    }

    #[test]
    fn help_lists_every_flag_with_env_and_default() {
        let help = help_text();
        for f in FLAGS {
            assert!(
                help.contains(f.name) && help.contains(f.env) && help.contains(f.default),
                "{}",
                f.name
            );
        }
    }

    #[test]
    fn intervals() {
        for (v, secs) in [("90", 90), ("90s", 90), ("2m", 120), ("1s", 1), ("4m", 240)] {
            assert_eq!(parse_interval(v), Ok(Duration::from_secs(secs)), "{v}");
        }
        for v in [
            "",
            "0",
            "0s",
            "5m",
            "1h",
            "-5",
            "1.5s",
            "5x",
            "s",
            "99999999999999999999999",
            "18446744073709551615h",
        ] {
            assert!(parse_interval(v).is_err(), "{v:?}");
        }
    }

    #[test]
    fn every_bad_input_names_its_source() {
        type Case<'a> = (&'a str, &'a [(&'a str, &'a str)], &'a str);
        let cases: &[Case] = &[
            ("--bogus", &[], "unknown flag --bogus (see opstatus --help)"),
            (
                "frobnicate",
                &[],
                "unknown command \"frobnicate\" (run, once, get, help, version)",
            ),
            ("run extra", &[], "unexpected argument \"extra\""),
            ("--interval", &[], "--interval needs a value"),
            ("--interval=", &[], "--interval is empty"),
            (
                "--interval soon",
                &[],
                "--interval: \"soon\" is not a duration (use e.g. 90, 90s, 2m)",
            ),
            (
                "",
                &[("OPSTATUS_INTERVAL", "10m")],
                "OPSTATUS_INTERVAL: \"10m\" must be between 1s and 4m (readers treat a status older than 5 minutes as stale)",
            ),
            (
                "",
                &[("OPSTATUS_INTERVAL", "")],
                "OPSTATUS_INTERVAL is set but empty",
            ),
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
            (
                "--configmap a..b",
                &[],
                "--configmap: \"a..b\" is not a valid ConfigMap name: must not be empty",
            ),
            (
                "--operator-version v1.0",
                &[],
                "--operator-version: \"v1.0\" is not a semantic version (MAJOR.MINOR.PATCH, e.g. 1.4.2; no leading v)",
            ),
            (
                "",
                &[("OPSTATUS_SERVICE_ACCOUNT_DIR", "")],
                "OPSTATUS_SERVICE_ACCOUNT_DIR is set but empty",
            ),
        ];
        for (cmdline, vars, want) in cases {
            assert_eq!(&error_of(cmdline, vars), want, "{cmdline:?} {vars:?}");
        }
    }

    #[test]
    fn empty_kubeconfig_variable_means_unset() {
        assert_eq!(
            parse_with("", &[("KUBECONFIG", "")])
                .unwrap()
                .settings
                .kubeconfig,
            None
        );
    }

    #[test]
    fn names() {
        assert!(check_dns_label("kube9-system").is_ok());
        assert!(check_dns_label(&"a".repeat(64)).is_err());
        assert!(check_dns_subdomain("kube9.operator-status").is_ok());
        assert!(check_dns_subdomain("UPPER").is_err());
    }
}
