//! The command line: flags and environment variables, validated up front.
//!
//! [`parse`] turns the command line plus an environment lookup into an
//! [`Invocation`] or a [`ConfigError`] (exit code 2) whose message names the
//! flag or variable at fault. A flag wins over its variable. Nothing here
//! touches the network or the file system: files are checked when the
//! credentials are loaded, still before any request.
//!
//! - `flags`: every flag, defined once (name, variable, default, help, and
//!   what it does), and the raw-value rules they share.
//! - `settings`: the validated [`Settings`] and the rules between flags.
//! - `values`: parsers for durations, addresses and switches, and the
//!   rule that a value that is not a path is UTF-8 text.
//! - `pod`: what the downward API says of the sidecar's own pod.

mod flag;
mod flags;
mod help;
mod pod;
mod settings;
mod values;

pub use crate::util::config_error::ConfigError;
use flags::{FLAGS, Kind};
use std::ffi::{OsStr, OsString};
use std::os::unix::ffi::OsStrExt;

pub use crate::agent::AgentSettings;
pub use flags::check_identity;
pub use help::help_text;
pub(crate) use pod::Pod;
pub use settings::{ClusterOperatorSettings, ProSettings, ProbeSettings, Settings, WatchSettings};

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
    /// kubelet's preStop hook: tells `run` on this pod that it is stopping.
    PreStop,
    /// The help: for one command, or (`None`) for all.
    Help(Option<Box<Command>>),
    Version,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum OutputFormat {
    Text,
    Json,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Invocation {
    pub command: Command,
    pub settings: Settings,
}

/// The process environment as opstatus reads it: a variable's value as
/// the system holds it (`None`: unset). Paths are taken as they are; a
/// value that must be text goes through [`variable`].
pub type Env<'a> = &'a dyn Fn(&str) -> Option<OsString>;

/// A variable that must be text: `Ok(None)` when unset, a usage error
/// naming it when it is not UTF-8.
pub(crate) fn variable(env: Env<'_>, name: &str) -> Result<Option<String>, ConfigError> {
    env(name).map(|raw| values::text(raw, name)).transpose()
}

/// Parses `args` (without the program name), reading variables via `env`.
/// Arguments are taken as the system gives them: a path may be any bytes,
/// every other argument must be UTF-8 (a usage error otherwise).
pub fn parse(args: &[OsString], env: Env<'_>) -> Result<Invocation, ConfigError> {
    let mut command = None;
    // The values given for each flag, in FLAGS order.
    let mut given: Vec<Vec<OsString>> = vec![Vec::new(); FLAGS.len()];
    let mut output = None;
    let mut i = 0;
    while i < args.len() {
        let (name, inline) = split_argument(&args[i])?;
        i += 1;
        let mut take_value = |name: &str| -> Result<OsString, ConfigError> {
            if let Some(v) = inline.clone() {
                return Ok(v);
            }
            let v = args.get(i).ok_or_else(|| ConfigError(format!("{name} needs a value")))?;
            i += 1;
            Ok(v.clone())
        };
        match name {
            "-h" | "--help" => {
                let about = command.filter(|c| !matches!(c, Command::Help(_) | Command::Version)).map(Box::new);
                return Ok(Invocation { command: Command::Help(about), settings: flags::defaults() });
            }
            "-V" | "--version" => return Ok(Invocation { command: Command::Version, settings: flags::defaults() }),
            "-o" | "--output" => {
                let v = values::text(take_value(name)?, name)?;
                output = Some(match v.as_str() {
                    "text" => OutputFormat::Text,
                    "json" => OutputFormat::Json,
                    _ => return Err(ConfigError(format!("{name}: {v:?} is not an output format (text or json)"))),
                });
            }
            _ if name.starts_with('-') => {
                // kubectl's short name, for `kubectl opstatus get -n NAMESPACE`.
                let name = if name == "-n" { "--namespace" } else { name };
                let index = FLAGS.iter().position(|f| f.name == name).ok_or_else(|| unknown_flag(name))?;
                let v = match (FLAGS[index].kind, &inline) {
                    (Kind::Switch(_), None) => "true".into(),
                    _ => take_value(name)?,
                };
                given[index].push(v);
            }
            // `opstatus help COMMAND`: that command's help.
            _ if command == Some(Command::Help(None)) => {
                let about = parse_command(name).filter(|c| !matches!(c, Command::Help(_) | Command::Version));
                let about =
                    about.ok_or_else(|| ConfigError(format!("no help for {name:?} (run, once, get, probe)")))?;
                command = Some(Command::Help(Some(Box::new(about))));
            }
            _ if command.is_none() => {
                command = Some(parse_command(name).ok_or_else(|| {
                    ConfigError(format!("unknown command {name:?} (run, once, get, probe, prestop, help, version)"))
                })?);
            }
            _ => return Err(ConfigError(format!("unexpected argument {name:?}"))),
        }
    }
    let mut command = command.unwrap_or(Command::Run);
    match (&mut command, output) {
        (Command::Get { output: o }, Some(v)) => *o = v,
        (_, Some(_)) => return Err(ConfigError("-o/--output is only for `opstatus get`".into())),
        _ => {}
    }
    if matches!(command, Command::Help(_) | Command::Version) {
        return Ok(Invocation { command, settings: flags::defaults() });
    }
    // Table order, so the first bad value reported does not depend on the
    // order of the command line.
    let mut s = flags::defaults();
    for (flag, given) in FLAGS.iter().zip(&given) {
        flag.apply(&mut s, given, env)?;
    }
    // An empty variable means no key, as an unset one does. Never shown,
    // not even when it is not text.
    let key = env(flags::API_KEY_ENV).map(OsString::into_string).transpose();
    let key = key.map_err(|_| ConfigError(format!("{} is not UTF-8 text", flags::API_KEY_ENV)))?;
    s.pro.api_key.env = key.filter(|k| !k.trim().is_empty()).map(crate::kube::Secret::new);
    let settings = settings::finish(s, &command)?;
    Ok(Invocation { command, settings })
}

/// An argument as a name (a command, a flag, `--flag` of `--flag=VALUE`),
/// which must be text, and the value after `=`, taken as it is.
fn split_argument(arg: &OsStr) -> Result<(&str, Option<OsString>), ConfigError> {
    let bytes = arg.as_bytes();
    let (name, inline) = match bytes.iter().position(|&b| b == b'=') {
        Some(at) if bytes.starts_with(b"--") => (&bytes[..at], Some(OsStr::from_bytes(&bytes[at + 1..]).into())),
        _ => (bytes, None),
    };
    let name = std::str::from_utf8(name).map_err(|_| ConfigError(format!("argument {arg:?} is not UTF-8 text")))?;
    Ok((name, inline))
}

fn parse_command(name: &str) -> Option<Command> {
    Some(match name {
        "run" => Command::Run,
        "once" => Command::Once,
        "get" => Command::Get { output: OutputFormat::Text },
        "probe" => Command::Probe,
        "prestop" => Command::PreStop,
        "help" => Command::Help(None),
        "version" => Command::Version,
        _ => return None,
    })
}

/// An unknown flag, with the nearest one when it looks like a typo.
fn unknown_flag(name: &str) -> ConfigError {
    let known = FLAGS.iter().map(|f| f.name).chain(["--help", "--version", "--output"]);
    match crate::util::spelling::nearest(name, known) {
        Some(meant) => ConfigError(format!("unknown flag {name}: did you mean {meant}? (see opstatus --help)")),
        None => ConfigError(format!("unknown flag {name} (see opstatus --help)")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sinks::cluster_operator::intent::{RelatedObject, Version};
    use std::time::Duration;

    /// A command line, its variables, and the error it must give.
    type Case<'a> = (&'a str, &'a [(&'a str, &'a str)], &'a str);

    fn args(s: &str) -> Vec<OsString> {
        s.split_whitespace().map(OsString::from).collect()
    }

    fn parse_with(cmdline: &str, vars: &[(&str, &str)]) -> Result<Invocation, ConfigError> {
        let vars: Vec<(String, OsString)> = vars.iter().map(|(k, v)| (k.to_string(), v.into())).collect();
        parse(&args(cmdline), &move |k| vars.iter().find(|(n, _)| n == k).map(|(_, v)| v.clone()))
    }

    fn error_of(cmdline: &str, vars: &[(&str, &str)]) -> String {
        parse_with(cmdline, vars).unwrap_err().0
    }

    #[test]
    fn defaults_run_the_agent() {
        let inv = parse_with("", &[]).unwrap();
        assert_eq!(inv.command, Command::Run);
        assert_eq!(inv.settings.cluster_operator, None, "none without a name");
        assert_eq!(inv.settings.agent.interval, Duration::from_secs(60));
    }

    #[test]
    fn flags_win_over_environment() {
        let vars = [("OPSTATUS_INTERVAL", "5"), ("POD_NAMESPACE", "from-env"), ("OPSTATUS_CONFIGMAP", "env-cm")];
        let inv = parse_with("once --interval=2m --namespace ops", &vars).unwrap();
        assert_eq!(inv.command, Command::Once);
        assert_eq!(inv.settings.agent.interval, Duration::from_secs(120));
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
        assert_eq!(parse_with("--help", &[("OPSTATUS_INTERVAL", "bad")]).unwrap().command, Command::Help(None));
        assert_eq!(parse_with("run -V", &[]).unwrap().command, Command::Version);
    }

    #[test]
    fn every_bad_input_names_its_source() {
        let cases: &[Case] = &[
            ("--bogus", &[], "unknown flag --bogus (see opstatus --help)"),
            ("--intervl 5s", &[], "unknown flag --intervl: did you mean --interval? (see opstatus --help)"),
            ("get --namspace x", &[], "unknown flag --namspace: did you mean --namespace? (see opstatus --help)"),
            ("frobnicate", &[], "unknown command \"frobnicate\" (run, once, get, probe, prestop, help, version)"),
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
        assert_eq!(s.agent.ready_file.as_deref(), Some(std::path::Path::new("/run/ready")));
        assert_eq!(s.agent.check_interval, Duration::from_secs(2));
        assert_eq!(s.watch.urls, ["http://127.0.0.1:8081/healthz", "http://127.0.0.1:9000/ready"]);
        assert!(s.watch.critical && !s.agent.final_status);
        assert_eq!(s.watch.max_age, Duration::from_secs(120));
        // Flags replace the variable's list; a switch can be turned off.
        let s = parse_with("--watch-url http://a:1/x --watch-url=http://b:2/y --watch-critical=false", &vars)
            .unwrap()
            .settings;
        assert_eq!(s.watch.urls, ["http://a:1/x", "http://b:2/y"]);
        assert!(!s.watch.critical);
        // The check interval never exceeds the heartbeat.
        assert_eq!(parse_with("--interval 2s", &[]).unwrap().settings.agent.check_interval, Duration::from_secs(2));
        assert_eq!(parse_with("", &[]).unwrap().settings.agent.check_interval, Duration::from_secs(5));
        assert_eq!(
            parse_with("--listen [::1]:9000", &[]).unwrap().settings.listen,
            Some("[::1]:9000".parse().unwrap())
        );
    }

    #[test]
    fn prestop_needs_the_endpoint_it_tells() {
        assert_eq!(error_of("prestop", &[]), "prestop needs --listen (or OPSTATUS_LISTEN): where `run` listens");
        let inv = parse_with("prestop --listen :8090", &[]).unwrap();
        assert_eq!((inv.command, inv.settings.listen.map(|a| a.port())), (Command::PreStop, Some(8090)));
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
        let probed: Vec<String> = s.probes.specs.iter().map(|p| p.display_name()).collect();
        assert_eq!(probed, ["foos.example.com", "bars.example.com"]);
        assert_eq!(
            (s.probes.namespaces, s.probes.crds),
            (vec!["apps".into(), "web".into()], vec!["foos.example.com".into()])
        );
        let co = s.cluster_operator.unwrap();
        assert_eq!(co.name, "demo");
        assert_eq!(co.operand_versions, [Version::new("engine", "2.0.0")]);
        assert_eq!(co.version_file.as_deref(), Some(std::path::Path::new("/run/v")));
        assert_eq!(co.related_objects, [RelatedObject::new("", "configmaps", "ops", "settings")]);
        assert_eq!(co.degraded_inertia, crate::inertia::Windows::default());
        let inertia =
            |cmdline| parse_with(cmdline, &[]).unwrap().settings.cluster_operator.map(|co| co.degraded_inertia);
        let worse = |d| crate::inertia::Windows { worse: d, better: Duration::ZERO };
        assert_eq!(inertia("--cluster-operator demo"), Some(worse(Duration::from_secs(120))));
        // Alone, --degraded-inertia is validated and has nothing to act on.
        assert_eq!(inertia("--degraded-inertia 5m"), None);
        // The operator's watched namespaces are the default scope; empty means all.
        let watched = |v| parse_with("", &[("WATCH_NAMESPACE", v)]).map(|i| i.settings.probes.namespaces);
        assert_eq!(watched("apps, web"), Ok(vec!["apps".to_string(), "web".to_string()]));
        assert_eq!(watched(""), Ok(vec![]));
        assert_eq!(
            parse_with("--probe-namespace ops", &[("WATCH_NAMESPACE", "apps")]).unwrap().settings.probes.namespaces,
            ["ops"]
        );
        // At most 32 collections: 32 namespaces of one probe is the most.
        let namespaces = |n: usize| (0..n).map(|i| format!("ns-{i}")).collect::<Vec<_>>().join(",");
        let probe = "--probe example.com/v1/foos:Upgradeable=!Migrating";
        assert!(parse_with(probe, &[("WATCH_NAMESPACE", &namespaces(32))]).is_ok());
        assert!(error_of(probe, &[("WATCH_NAMESPACE", &namespaces(33))]).starts_with("the probes would watch 33"));
        assert!(parse_with("", &[("WATCH_NAMESPACE", &namespaces(200))]).is_ok(), "no probe, nothing watched");
        let get = format!("get {probe}");
        assert!(parse_with(&get, &[("WATCH_NAMESPACE", &namespaces(33))]).is_ok(), "get probes nothing");
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
        assert!(parse_with("", &[("KUBECONFIG", "")]).unwrap().settings.kubeconfig.is_empty());
    }

    #[test]
    fn the_leader_service_follows_the_lease_and_names_its_ports() {
        let lease = "--follow-leader-lease op-lock --leader-service op-leader";
        let inv = parse_with(&format!("{lease} --leader-service-port http:8080/TCP"), &[]).unwrap();
        assert_eq!(inv.settings.leader_service.as_deref(), Some("op-leader"));
        let port = crate::sinks::leader_endpoints::ServicePort { name: "http".into(), port: 8080, protocol: "TCP" };
        assert_eq!(inv.settings.leader_service_ports, vec![port]);
        let from_env = parse_with(lease, &[("OPSTATUS_LEADER_SERVICE_PORTS", "http:8080,dns:53/UDP")]).unwrap();
        assert_eq!(from_env.settings.leader_service_ports.len(), 2);
        let cases: &[Case<'_>] = &[
            (
                "--leader-service op-leader --leader-service-port 80",
                &[],
                "--leader-service points its Service at the operator's leader: give --follow-leader-lease (the \
                 operator's leader-election Lease) too",
            ),
            (
                lease,
                &[],
                "--leader-service needs the Service's ports: give --leader-service-port [name:]port[/protocol] (e.g. http:8080/TCP), as the Service names them",
            ),
            (
                "--leader-service-port 80",
                &[],
                "--leader-service-port is for --leader-service: give --leader-service too",
            ),
            (
                "--leader-service-port http:80/icmp",
                &[],
                "--leader-service-port: \"http:80/icmp\" is not [name:]port[/TCP|UDP|SCTP] (e.g. http:8080/TCP, 8443)",
            ),
            ("--leader-service Op_Leader", &[], "--leader-service: \"Op_Leader\" is not a valid Service name"),
            (
                &format!("{lease} --leader-service-port a:80 --leader-service-port a:81"),
                &[],
                "--leader-service-port: the port name a is given twice (a Service's ports have distinct names)",
            ),
        ];
        for (cmdline, vars, error) in cases {
            let got = error_of(cmdline, vars);
            assert!(got.starts_with(error), "{cmdline}: {got}");
        }
    }
}
