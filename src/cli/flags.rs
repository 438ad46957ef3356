//! Every flag, defined once in [`FLAGS`]: its name, its variable, its
//! documented default, its help line and what it does to the settings;
//! and the settings when nothing is given ([`defaults`]), which those
//! defaults make.
//! The shape of a flag and the raw-value rules all flags share are in
//! [`super::flag`].

use super::ConfigError;
pub(crate) use super::flag::{Default, Flag, Kind};
use super::settings::{Settings, cluster_operator};
use super::values::{parse_duration, parse_interval, parse_listen};
use crate::inertia::Windows;
use crate::kube::names::{check_dns_label, check_dns_subdomain};
use crate::status::{MAX_INTERVAL, MIN_INTERVAL};
use std::time::Duration;

/// The operator's watched namespaces (OLM sets it from the
/// `olm.targetNamespaces` annotation): the probes' default scope.
pub(super) const WATCH_NAMESPACE_ENV: &str = "WATCH_NAMESPACE";

/// The API key's variable. Never a flag: command lines are visible to
/// every process on the node.
pub(super) const API_KEY_ENV: &str = "KUBE9_API_KEY";

const DAY: Duration = Duration::from_secs(86_400);

/// A lock holder's name: a pod name in practice; printable and bounded,
/// since it is written into the ConfigMap and shown to readers. It must
/// read back as it was written: the lock record is sanitised where it is
/// read ([`crate::lock::Seen::parse`]), so an identity that sanitising
/// changes (a bidirectional control such as U+202E, a control character,
/// more than 253 bytes) would not know its own lock after a restart.
pub fn check_identity(v: &str) -> Result<String, String> {
    let reads_back = crate::util::text::sanitize(v, crate::lock::MAX_IDENTITY) == v;
    if !reads_back || v.chars().any(char::is_whitespace) {
        return Err("is not a usable identity (at most 253 bytes; no spaces, control or bidirectional-control \
                    characters)"
            .into());
    }
    Ok(v.to_string())
}

/// Stores a flag's checked value.
fn set<T>(slot: &mut T, value: Result<T, ConfigError>) -> Result<(), ConfigError> {
    *slot = value?;
    Ok(())
}

pub(crate) const FLAGS: &[Flag] = &[
    Flag {
        name: "--namespace",
        env: "POD_NAMESPACE",
        default: Default::Prose("the service-account namespace, else kube9-system"),
        help: "Namespace of the status ConfigMap (the operator's namespace).",
        kind: Kind::Value(|s, v| {
            set(&mut s.namespace, v.name(check_dns_label, "is not a valid namespace name").map(Some))
        }),
    },
    Flag {
        name: "--operator-namespace",
        env: "OPSTATUS_OPERATOR_NAMESPACE",
        default: Default::Prose("the status ConfigMap's namespace"),
        help: "Where the operator runs, when --namespace writes the status elsewhere (e.g. kube9-system): \
               the status's namespace field and the OperatorCondition's namespace.",
        kind: Kind::Value(|s, v| {
            set(&mut s.operator_namespace, v.name(check_dns_label, "is not a valid namespace name").map(Some))
        }),
    },
    Flag {
        name: "--extension-namespace",
        env: "OPSTATUS_EXTENSION_NAMESPACE",
        default: Default::Prose("none: where the extension looks, kube9-system then default"),
        help: "`get` without --namespace: the kube9 extension's kube9.operatorNamespace setting, to read \
               where it reads.",
        kind: Kind::Value(|s, v| {
            set(&mut s.extension_namespace, v.name(check_dns_label, "is not a valid namespace name").map(Some))
        }),
    },
    Flag {
        name: "--configmap",
        env: "OPSTATUS_CONFIGMAP",
        default: Default::Value(crate::sinks::configmap::DEFAULT_CONFIGMAP),
        help: "Name of the status ConfigMap.",
        kind: Kind::Value(|s, v| set(&mut s.configmap, v.name(check_dns_subdomain, "is not a valid ConfigMap name"))),
    },
    Flag {
        name: "--interval",
        env: "OPSTATUS_INTERVAL",
        default: Default::Value("60s"),
        help: "Heartbeat: how often the status is written (1s to 4m; 90, 90s, 2m).",
        kind: Kind::Value(|s, v| set(&mut s.agent.interval, v.parse(parse_interval))),
    },
    Flag {
        name: "--operator-version",
        env: "OPSTATUS_OPERATOR_VERSION",
        default: Default::Prose(
            "none: the status says 0.0.0-unknown, with a warning (the components set it from the pod's app.kubernetes.io/version label)",
        ),
        help: "Semantic version of the operator this sidecar reports for (empty variable: none, as the downward API \
               gives for a missing label).",
        kind: Kind::Value(|s, v| {
            if !crate::status::is_semver(&v.value) {
                return Err(v.blame("is not a semantic version (MAJOR.MINOR.PATCH, e.g. 1.4.2; no leading v)"));
            }
            s.agent.operator_version = v.value;
            Ok(())
        }),
    },
    Flag {
        name: "--service-account-dir",
        env: "OPSTATUS_SERVICE_ACCOUNT_DIR",
        default: Default::Value("/var/run/secrets/kubernetes.io/serviceaccount"),
        help: "Where the in-cluster token, ca.crt and namespace files are.",
        kind: Kind::Path(|s, path, _| s.service_account_dir = path),
    },
    Flag {
        name: "--kubeconfig",
        env: "KUBECONFIG",
        default: Default::Prose("in-cluster credentials, else ~/.kube/config"),
        help: "Kubeconfig file to use instead of in-cluster credentials (the variable: files separated by `:`, \
               merged as kubectl merges them).",
        kind: Kind::Path(|s, path, from_variable| {
            s.kubeconfig = if from_variable { std::env::split_paths(&path).collect() } else { vec![path] }
        }),
    },
    Flag {
        name: "--context",
        env: "OPSTATUS_CONTEXT",
        default: Default::Prose("the kubeconfig's current-context"),
        help: "The kubeconfig context to use.",
        kind: Kind::Value(|s, v| set(&mut s.context, Ok(Some(v.value)))),
    },
    Flag {
        name: "--check-interval",
        env: "OPSTATUS_CHECK_INTERVAL",
        default: Default::ValueThen("5s", "(at most --interval)"),
        help: "How often the watched signals are checked; worse health is published at once, better once three \
               checks in a row see it.",
        kind: Kind::Value(|s, v| set(&mut s.agent.check_interval, v.duration(MIN_INTERVAL..=MAX_INTERVAL))),
    },
    Flag {
        name: "--listen",
        env: "OPSTATUS_LISTEN",
        default: Default::Prose("off"),
        help: "Serve /healthz, /readyz, /status, /metrics on IP:PORT or :PORT (suggested :8090).",
        kind: Kind::Value(|s, v| set(&mut s.listen, v.parse(parse_listen).map(Some))),
    },
    Flag {
        name: "--ready-file",
        env: "OPSTATUS_READY_FILE",
        default: Default::Prose("off"),
        help: "Keep this file fresh while ready (for `opstatus probe` in images without a shell).",
        kind: Kind::Path(|s, path, _| s.agent.ready_file = Some(path)),
    },
    Flag {
        name: "--max-age",
        env: "OPSTATUS_PROBE_MAX_AGE",
        // Several check intervals, so one slow tick does not fail the probe.
        default: Default::Value("30s"),
        help: "`opstatus probe`: the oldest readiness file that still counts as ready.",
        kind: Kind::Value(|s, v| set(&mut s.max_age, v.duration(MIN_INTERVAL..=DAY))),
    },
    Flag {
        name: "--watch-url",
        env: "OPSTATUS_WATCH_URLS",
        default: Default::Prose("none"),
        help: "The operator's own health endpoint, e.g. http://127.0.0.1:8081/healthz (repeatable; env: comma-separated).",
        kind: Kind::List(|s, v| {
            crate::util::url::check_url(&v.value).map_err(|why| ConfigError(format!("{}: {why}", v.source)))?;
            v.parse(crate::signals::watch::check_url)?;
            s.watch.urls.push(v.value);
            Ok(())
        }),
    },
    Flag {
        name: "--watch-critical",
        env: "OPSTATUS_WATCH_CRITICAL",
        default: Default::Value("false"),
        help: "A failing watch makes the status unhealthy instead of degraded.",
        kind: Kind::Switch(|s, on| s.watch.critical = on),
    },
    Flag {
        name: "--watch-file",
        env: "OPSTATUS_WATCH_FILE",
        default: Default::Prose("none"),
        help: "A heartbeat file the operator touches; stale or missing means the operator is not well.",
        kind: Kind::Path(|s, path, _| s.watch.file = Some(path)),
    },
    Flag {
        name: "--watch-max-age",
        env: "OPSTATUS_WATCH_MAX_AGE",
        default: Default::Value("60s"),
        help: "The oldest --watch-file that still counts as fresh.",
        kind: Kind::Value(|s, v| set(&mut s.watch.max_age, v.duration(MIN_INTERVAL..=DAY))),
    },
    Flag {
        name: "--startup-allowance",
        env: "OPSTATUS_STARTUP_ALLOWANCE",
        // A minute: what kubelet's startup probes commonly give an operator (a controller-runtime manager
        // syncing its caches on a busy node takes tens of seconds), and what a reader already waits between
        // two heartbeats at the default interval.
        default: Default::Value("60s"),
        help: "How long a starting opstatus publishes nothing while the watched operator has not answered yet \
               (0s to 4m); then it publishes the operator as degraded.",
        kind: Kind::Value(|s, v| {
            set(&mut s.agent.startup_allowance, v.duration(Duration::ZERO..=crate::agent::MAX_STARTUP_ALLOWANCE))
        }),
    },
    Flag {
        name: "--watch-container",
        env: "OPSTATUS_WATCH_CONTAINER",
        default: Default::Prose("none"),
        help: "The operator's container in this pod: its restarts, OOM kills and crash loops make the status \
               degraded (reads the pod named by POD_NAME; see manifests/components/opstatus-watch-container).",
        kind: Kind::Value(|s, v| {
            set(&mut s.watch.container, v.name(check_dns_label, "is not a valid container name").map(Some))
        }),
    },
    Flag {
        name: "--watch-container-clean-run",
        env: "OPSTATUS_WATCH_CONTAINER_CLEAN_RUN",
        default: Default::Value("10m"),
        help: "How long the --watch-container container must run after a restart before the restart no longer \
               makes the status degraded.",
        kind: Kind::Value(|s, v| set(&mut s.watch.clean_run, v.duration(MIN_INTERVAL..=DAY))),
    },
    Flag {
        name: "--no-final-status",
        env: "OPSTATUS_NO_FINAL_STATUS",
        default: Default::Value("false"),
        help: "On SIGTERM, SIGINT or SIGHUP, do not publish the final unhealthy \"Shutting down\" status.",
        kind: Kind::Switch(|s, on| s.agent.final_status = !on),
    },
    Flag {
        name: "--strict-readiness",
        env: "OPSTATUS_STRICT_READINESS",
        default: Default::Value("false"),
        help: "/readyz and the readiness file answer for opstatus's own publishing too (API server, RBAC, \
               kube9-server, sinks), not only for the operator.",
        kind: Kind::Switch(|s, on| s.agent.strict_readiness = on),
    },
    Flag {
        name: "--identity",
        env: "OPSTATUS_IDENTITY",
        default: Default::Prose("POD_NAME, else HOSTNAME"),
        help: "This instance's name in the publisher lock (instances sharing a status ConfigMap elect one publisher).",
        kind: Kind::Value(|s, v| set(&mut s.identity, v.parse(check_identity).map(Some))),
    },
    Flag {
        name: "--follow-leader-lease",
        env: "OPSTATUS_FOLLOW_LEADER_LEASE",
        default: Default::Prose("off"),
        help: "The operator's leader-election Lease (in the operator's namespace): the sidecar beside its leader \
               publishes.",
        kind: Kind::Value(|s, v| {
            set(&mut s.agent.follow_leader_lease, v.name(check_dns_subdomain, "is not a valid Lease name").map(Some))
        }),
    },
    Flag {
        name: "--leader-service",
        env: "OPSTATUS_LEADER_SERVICE",
        default: Default::Prose("off"),
        help: "A Service without a selector (in the operator's namespace) whose EndpointSlice points at the operator's leader's \
               pod (POD_IP), kept by the leader's sidecar; needs --follow-leader-lease.",
        kind: Kind::Value(|s, v| {
            set(&mut s.leader_service, v.name(check_dns_label, "is not a valid Service name").map(Some))
        }),
    },
    Flag {
        name: "--leader-service-port",
        env: "OPSTATUS_LEADER_SERVICE_PORTS",
        default: Default::Prose("none"),
        help: "A port of --leader-service as the Service names it: [name:]port[/TCP|UDP|SCTP] (repeatable; env: \
               comma-separated).",
        kind: Kind::List(|s, v| {
            v.parse(crate::sinks::leader_endpoints::parse_port).map(|port| s.leader_service_ports.push(port))
        }),
    },
    Flag {
        name: "--events",
        env: "OPSTATUS_EVENTS",
        default: Default::Value("true"),
        help: "Kubernetes Events on each published health change, Upgradeable flip and publisher takeover \
               (--events=false: none).",
        kind: Kind::Switch(|s, on| s.events = on),
    },
    Flag {
        name: "--api-key-file",
        env: "OPSTATUS_API_KEY_FILE",
        default: Default::Prose("none (then KUBE9_API_KEY)"),
        help: "The kube9 API key, e.g. a mounted Secret; re-read on every check, so adding or removing it needs no restart.",
        kind: Kind::Path(|s, path, _| s.pro.api_key.file = Some(path)),
    },
    Flag {
        name: "--server-url",
        env: "KUBE9_SERVER_URL",
        default: Default::Value(crate::pro::client::DEFAULT_SERVER_URL),
        help: "kube9-server, for registration (pro tier); https:// (http:// only with --allow-insecure-server-url).",
        kind: Kind::Value(|s, v| {
            crate::util::url::check_url(&v.value).map_err(|why| ConfigError(format!("{}: {why}", v.source)))?;
            if !v.value.starts_with("https://") && !v.value.starts_with("http://") {
                return Err(v.blame("must start with https:// (or http:// with --allow-insecure-server-url)"));
            }
            s.pro.server_url = v.value;
            Ok(())
        }),
    },
    Flag {
        name: "--allow-insecure-server-url",
        env: "OPSTATUS_ALLOW_INSECURE_SERVER_URL",
        default: Default::Value("false"),
        help: "Allow an http:// --server-url: the API key then travels unencrypted (a warning is logged at start).",
        kind: Kind::Switch(|s, on| s.pro.allow_insecure_server_url = on),
    },
    Flag {
        name: "--server-ca-file",
        env: "OPSTATUS_SERVER_CA_FILE",
        default: Default::Prose("the system CA bundle"),
        help: "CA bundle that kube9-server's certificate must chain to.",
        kind: Kind::Path(|s, path, _| s.pro.server_ca_file = Some(path)),
    },
    Flag {
        name: "--operator-condition",
        env: "OPERATOR_CONDITION_NAME",
        default: Default::Prose("off (OLM sets the variable for operators it installs)"),
        help: "OLM OperatorCondition (in the namespace) to publish the probes' Upgradeable and Important on.",
        kind: Kind::Value(|s, v| {
            set(&mut s.operator_condition, v.name(check_dns_subdomain, "is not a valid name").map(Some))
        }),
    },
    Flag {
        name: "--probe",
        env: "OPSTATUS_PROBES",
        default: Default::Prose("none"),
        help: "Conditions from the operator's resources: GROUP/VERSION/RESOURCE:Upgradeable=EXPR[;Important=EXPR], \
               e.g. example.com/v1/foos:Upgradeable=!Migrating (repeatable; env: comma-separated).",
        kind: Kind::List(|s, v| {
            let spec = crate::signals::probes::grammar::parse_probe(&v.value);
            spec.map(|spec| s.probes.specs.push(spec))
                .map_err(|why| ConfigError(format!("{}: {:?}: {why}", v.source, v.value)))
        }),
    },
    Flag {
        name: "--probe-from-crd-annotations",
        env: "OPSTATUS_PROBE_CRDS",
        default: Default::Prose("none"),
        help: "CRD names whose olm.operatorframework.io/condition.Upgradeable/.Important annotations give probes \
               (repeatable; env: comma-separated).",
        kind: Kind::List(|s, v| {
            let crd = v.name(check_dns_subdomain, "is not a CRD name")?;
            if !crd.contains('.') {
                return Err(v.blame("is not a CRD name (PLURAL.GROUP, e.g. foos.example.com)"));
            }
            s.probes.crds.push(crd);
            Ok(())
        }),
    },
    Flag {
        name: "--probe-namespace",
        env: "OPSTATUS_PROBE_NAMESPACES",
        default: Default::Env(
            WATCH_NAMESPACE_ENV,
            "WATCH_NAMESPACE (the operator's target namespaces, when its author passes them to the sidecar), else all namespaces",
        ),
        help: "Namespaces whose resources the probes list (repeatable; env: comma-separated).",
        kind: Kind::List(|s, v| {
            v.name(check_dns_label, "is not a valid namespace name").map(|ns| s.probes.namespaces.push(ns))
        }),
    },
    Flag {
        name: "--cluster-operator",
        env: "OPSTATUS_CLUSTER_OPERATOR",
        default: Default::Prose("off"),
        help: "OpenShift ClusterOperator to create and keep current (versions, Available, Degraded, ...).",
        kind: Kind::Value(|s, v| {
            set(&mut cluster_operator(s).name, v.name(check_dns_subdomain, "is not a valid name"))
        }),
    },
    Flag {
        name: "--operand-version",
        env: "OPSTATUS_OPERAND_VERSIONS",
        default: Default::Prose("none"),
        help: "ClusterOperator: an operand's version, NAME=VERSION (repeatable; env: comma-separated).",
        kind: Kind::List(|s, v| {
            let version = v.parse(crate::sinks::cluster_operator::intent::parse_operand_version)?;
            let versions = &mut cluster_operator(s).operand_versions;
            if versions.iter().any(|o| o.name == version.name) {
                return Err(v.blame(format!("names {:?} twice", version.name)));
            }
            versions.push(version);
            Ok(())
        }),
    },
    Flag {
        name: "--version-file",
        env: "OPSTATUS_VERSION_FILE",
        default: Default::Prose("none (the flags' versions count as running)"),
        help: "ClusterOperator: a file the operator writes once a version runs (VERSION or NAME=VERSION lines); \
               until then the old version is reported and Progressing is True.",
        kind: Kind::Path(|s, path, _| cluster_operator(s).version_file = Some(path)),
    },
    Flag {
        name: "--related-object",
        env: "OPSTATUS_RELATED_OBJECTS",
        default: Default::Prose("the namespace, the status ConfigMap, the OperatorCondition"),
        help: "ClusterOperator: another related object, GROUP/RESOURCE/NAMESPACE/NAME (repeatable).",
        kind: Kind::List(|s, v| {
            v.parse(crate::sinks::cluster_operator::intent::parse_related_object)
                .map(|object| cluster_operator(s).related_objects.push(object))
        }),
    },
    Flag {
        name: "--degraded-inertia",
        env: "OPSTATUS_DEGRADED_INERTIA",
        // OpenShift's library waits this long before a bad signal turns into Degraded=True.
        default: Default::Value("2m"),
        help: "ClusterOperator: how long bad health must last before Degraded turns True \
               (WORSE[,BETTER]: BETTER, how long good health must last before it turns False again; 0 to 1h each).",
        kind: Kind::Value(|s, v| {
            set(&mut cluster_operator(s).degraded_inertia, v.parse(|t| Windows::parse(t, parse_duration)))
        }),
    },
    Flag {
        name: "--health-inertia",
        env: "OPSTATUS_HEALTH_INERTIA",
        default: Default::Value("0s"),
        help: "Status ConfigMap: how long worse health must last before it is published (WORSE[,BETTER]: \
               BETTER, how long better health must last; 0 to 1h each; the error then says since when).",
        kind: Kind::Value(|s, v| set(&mut s.agent.health_inertia, v.parse(|t| Windows::parse(t, parse_duration)))),
    },
    Flag {
        name: "--upgradeable-inertia",
        env: "OPSTATUS_UPGRADEABLE_INERTIA",
        default: Default::Value("0s"),
        help: "OperatorCondition and ClusterOperator: how long a block must last before Upgradeable=False is \
               published (WORSE[,BETTER]: BETTER, how long the blocking resources must be clear before \
               Upgradeable=True; 0 to 1h each; the message then says since when).",
        kind: Kind::Value(|s, v| set(&mut s.agent.upgradeable_inertia, v.parse(|t| Windows::parse(t, parse_duration)))),
    },
    Flag {
        name: "--condition-metrics-max-types",
        env: "OPSTATUS_CONDITION_METRICS_MAX_TYPES",
        default: Default::Value("8"),
        help: "Probes: how many condition types per probed resource type get metrics of their own (0 to 8; \
               0: none); resources with other types are counted in one series.",
        kind: Kind::Value(|s, v| {
            let most = crate::signals::probes::census::DEFAULT_TYPES;
            let n = v.value.parse().ok().filter(|&n| n <= most);
            set(
                &mut s.probes.condition_types,
                n.ok_or_else(|| v.blame(format!("must be a whole number from 0 to {most}"))),
            )
        }),
    },
];

/// The settings when nothing is given: each flag's documented default,
/// applied through the flag itself (a ClusterOperator's, to one without a
/// name yet, which [`finish`](super::settings::finish) drops when none is given).
pub(super) fn defaults() -> Settings {
    let mut s = Settings::default();
    s.agent.operator_version = crate::status::UNKNOWN_VERSION.into();
    for flag in FLAGS {
        if let Some(value) = flag.default.value() {
            flag.apply(&mut s, &[value.into()], &|_| None).expect("a documented default is a valid value");
        }
    }
    s
}

#[cfg(test)]
mod tests {
    use super::super::{Settings, help_text, parse};
    use super::*;

    fn parse_args(args: &[&str], vars: &[(&str, &str)]) -> Settings {
        let args: Vec<std::ffi::OsString> = args.iter().map(|a| a.into()).collect();
        let lookup = |k: &str| vars.iter().find(|(n, _)| *n == k).map(|(_, v)| v.into());
        parse(&args, &lookup).unwrap_or_else(|e| panic!("{args:?}: {e}")).settings
    }

    #[test]
    fn help_lists_every_flag_with_env_and_default() {
        let help = help_text(None);
        for f in FLAGS {
            assert!(help.contains(f.name) && help.contains(f.env) && help.contains(&f.default.text()), "{}", f.name);
        }
    }

    #[test]
    fn names_and_variables_are_unique() {
        for (i, f) in FLAGS.iter().enumerate() {
            assert!(f.name.starts_with("--"), "{}", f.name);
            assert!(FLAGS[..i].iter().all(|g| g.name != f.name && g.env != f.env), "{} twice", f.name);
        }
    }

    /// The default --help and the README document is the one the code uses.
    #[test]
    fn documented_defaults_are_the_defaults() {
        // With a ClusterOperator, so that its flags' defaults have an effect.
        let base = ["--cluster-operator", "demo"];
        let baseline = parse_args(&base, &[]);
        for f in FLAGS {
            let Some(value) = f.default.value() else { continue };
            let explicit = format!("{}={value}", f.name);
            assert_eq!(parse_args(&[&base[..], &[&explicit]].concat(), &[]), baseline, "{explicit}");
            let from_env = parse_args(&base, &[(f.env, value)]);
            assert_eq!(from_env, baseline, "{}={value}", f.env);
        }
    }

    /// Flags whose default is words leave their setting unset (or at a value
    /// stated here), whatever the words say.
    #[test]
    fn prose_defaults_leave_the_setting_unset() {
        let s = parse_args(&[], &[]);
        let co = parse_args(&["--cluster-operator", "demo"], &[]).cluster_operator.unwrap();
        for f in FLAGS {
            if let Default::Env(var, words) = f.default {
                assert!(words.starts_with(var), "{}: the default names {var}", f.name);
            }
            if f.default.value().is_some() {
                continue;
            }
            let unset = match f.name {
                "--namespace" => s.namespace.is_none(),
                "--extension-namespace" => s.extension_namespace.is_none(),
                "--operator-namespace" => s.operator_namespace.is_none(),
                "--operator-version" => s.agent.operator_version == crate::status::UNKNOWN_VERSION,
                "--kubeconfig" => s.kubeconfig.is_empty(),
                "--context" => s.context.is_none(),
                "--listen" => s.listen.is_none(),
                "--ready-file" => s.agent.ready_file.is_none(),
                "--watch-url" => s.watch.urls.is_empty(),
                "--watch-file" => s.watch.file.is_none(),
                "--watch-container" => s.watch.container.is_none(),
                "--api-key-file" => s.pro.api_key.file.is_none(),
                "--server-ca-file" => s.pro.server_ca_file.is_none(),
                "--operator-condition" => s.operator_condition.is_none(),
                "--probe" => s.probes.specs.is_empty(),
                "--probe-from-crd-annotations" => s.probes.crds.is_empty(),
                "--probe-namespace" => s.probes.namespaces.is_empty(),
                "--cluster-operator" => s.cluster_operator.is_none(),
                "--identity" => s.identity.is_none(),
                "--follow-leader-lease" => s.agent.follow_leader_lease.is_none(),
                "--leader-service" => s.leader_service.is_none(),
                "--leader-service-port" => s.leader_service_ports.is_empty(),
                "--operand-version" => co.operand_versions.is_empty(),
                "--version-file" => co.version_file.is_none(),
                "--related-object" => co.related_objects.is_empty(),
                other => panic!("{other}: a default in words needs its check here"),
            };
            assert!(unset, "{}", f.name);
        }
    }

    /// One row of the flag table in docs/configuration.md: the flag cell, the variable
    /// cell, the default cell.
    fn readme_rows() -> Vec<(String, String, String)> {
        let path = concat!(env!("CARGO_MANIFEST_DIR"), "/docs/configuration.md");
        let readme = std::fs::read_to_string(path).unwrap();
        let section = readme.split("\n## Flags\n").nth(1).expect("docs/configuration.md has ## Flags");
        let section = section.split("\n## ").next().unwrap();
        let rows = section.lines().filter(|l| l.starts_with('|')).skip(2);
        rows.map(|row| {
            let cells: Vec<&str> = row.trim_matches('|').split('|').map(str::trim).collect();
            (cells[0].to_string(), cells[1].to_string(), cells[2].to_string())
        })
        .collect()
    }

    fn first_code(cell: &str) -> &str {
        cell.split('`').nth(1).unwrap_or("")
    }

    #[test]
    fn the_readme_table_matches_the_flags() {
        let rows = readme_rows();
        for f in FLAGS {
            let row = rows.iter().find(|(flag, ..)| first_code(flag) == f.name);
            let (flag, env, default) = row.unwrap_or_else(|| panic!("docs/configuration.md lacks {}", f.name));
            assert_eq!(first_code(env), f.env, "{}", f.name);
            let repeatable = matches!(f.kind, Kind::List(_));
            assert_eq!(flag.contains("(repeatable)"), repeatable, "{}: docs/configuration.md says repeatable?", f.name);
            if let Some(value) = f.default.value() {
                assert!(default.contains(value), "{}: documented default {default:?} lacks {value}", f.name);
            }
        }
        for (flag, env, _) in &rows {
            match first_code(flag) {
                // The `get` command's own option, not a setting.
                "-o" => assert!(flag.contains("`--output`")),
                // The environment-only API key.
                "" => assert_eq!(first_code(env), API_KEY_ENV),
                name => assert!(FLAGS.iter().any(|f| f.name == name), "docs/configuration.md documents unknown {name}"),
            }
        }
    }

    /// Each inertia flag fills its own output's windows, `WORSE[,BETTER]`.
    #[test]
    fn inertia_flags_fill_their_outputs_windows() {
        let windows =
            |worse, better| Windows { worse: Duration::from_secs(worse), better: Duration::from_secs(better) };
        let s = parse_args(&["--health-inertia", "30s,10s", "--cluster-operator", "demo"], &[]);
        assert_eq!(s.agent.health_inertia, windows(30, 10));
        assert_eq!(s.cluster_operator.unwrap().degraded_inertia, windows(120, 0), "its default kept");
        let s = parse_args(&["--degraded-inertia", "1m,5s", "--cluster-operator", "demo"], &[]);
        assert_eq!(s.cluster_operator.unwrap().degraded_inertia, windows(60, 5));
        let s = parse_args(&[], &[("OPSTATUS_UPGRADEABLE_INERTIA", "0,5m")]);
        assert_eq!((s.agent.upgradeable_inertia, s.agent.health_inertia), (windows(0, 300), Windows::default()));
    }
}
