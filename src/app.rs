//! The commands behind `main`: `run`, `once`, `get` and `probe`, and the
//! error type that maps every failure to its exit code.

use crate::agent::{self, Agent, AgentConfig};
use crate::cli::{ClusterOperatorSettings, Env, OutputFormat, Pod, Settings};
use crate::endpoint;
use crate::kube::{Client, credentials};
use crate::pro;
use crate::reader;
use crate::ready_file;
use crate::signals::Signal;
use crate::signals::container::ContainerWatch;
use crate::signals::probes::Prober;
use crate::signals::watch::Watches;
use crate::sinks::Sinks;
use crate::sinks::cluster_operator::ClusterOperatorSink;
use crate::sinks::cluster_operator::intent::{OPERATOR, RelatedObject, Version};
use crate::sinks::configmap::{self, DEFAULT_NAMESPACE, StatusConfigMap};
use crate::sinks::events::Recorder;
use crate::sinks::events::event::{InvolvedObject, Reporter};
use crate::sinks::leader_endpoints::{self, LeaderEndpoints};
use crate::sinks::operator_condition::OperatorConditionSink;
use crate::status::MAX_INTERVAL;
use crate::upgrade_hold;
use crate::util::config_error::ConfigError;
use crate::util::shutdown::{Nudge, Shutdown};
use std::fmt;
use std::net::{Ipv4Addr, Ipv6Addr};
use std::time::{Duration, Instant, SystemTime};

/// A failed command.
#[derive(Debug)]
pub enum Failure {
    /// Usage or configuration: exit code 2, before any network traffic.
    Config(String),
    /// Something failed at run time: exit code 1.
    Runtime(String),
    /// `opstatus probe` found the agent not ready: exit code 1, the line on
    /// stdout (where kubelet records an exec probe's output).
    NotReady(String),
}

impl Failure {
    pub fn exit_code(&self) -> i32 {
        match self {
            Failure::Config(_) => 2,
            Failure::Runtime(_) | Failure::NotReady(_) => 1,
        }
    }
}

impl fmt::Display for Failure {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Failure::Config(m) | Failure::Runtime(m) | Failure::NotReady(m) => f.write_str(m),
        }
    }
}

/// A client and the namespace to work in.
struct Connection {
    client: Client,
    namespace: String,
    /// Where the credentials came from (the start line, `/status`).
    source: String,
    /// The kube9 cluster identifier (from the cluster CA).
    cluster_identifier: String,
}

/// Credentials as [`credentials::choose`] picks them (exit code 2 before
/// any request when they are wrong; `lasting` for `run`). A client for a
/// loop that calls at least every `heartbeat` keeps its connection that long.
fn connect(
    settings: &Settings,
    env: Env<'_>,
    heartbeat: Option<Duration>,
    lasting: bool,
) -> Result<Connection, ConfigError> {
    let (kubeconfig, context) = (&settings.kubeconfig, settings.context.as_deref());
    let chosen = credentials::choose(kubeconfig, context, &settings.service_account_dir, env, lasting)?;
    // A path, a context or user name from a file: shown, so sanitised.
    let (creds, source) = (chosen.creds, crate::util::text::sanitize(&chosen.source, 1024));
    let namespace =
        settings.namespace.clone().or_else(|| creds.namespace.clone()).unwrap_or_else(|| DEFAULT_NAMESPACE.to_string());
    if let Err(why) = crate::kube::names::check_dns_label(&namespace) {
        return Err(ConfigError(format!("namespace {namespace:?} from {source} is not valid: {why}")));
    }
    let cluster_identifier = pro::client::cluster_identifier(&creds.ca_pem, &creds.server);
    let client = Client::kept_alive(&creds, heartbeat)?;
    Ok(Connection { client, namespace, source, cluster_identifier })
}

/// The composition root: the agent with the signals and sinks the settings
/// ask for. A new signal or sink is one line here.
/// `nudge` (in `run`): the probes watch their resources and wake the loop
/// through it; without it (`once`) they list. `shared`: what the endpoint
/// serves ([`agent::starting`]).
fn agent_for(
    settings: &Settings,
    env: Env<'_>,
    nudge: Option<Nudge>,
    shared: endpoint::Shared,
) -> Result<Agent, Failure> {
    // kube9-server may ask for any interval up to the maximum.
    let heartbeat = if settings.pro.api_key.is_configured() {
        settings.agent.interval.max(MAX_INTERVAL)
    } else {
        settings.agent.interval
    };
    let config_error = |e: ConfigError| Failure::Config(e.to_string());
    let connection = connect(settings, env, Some(heartbeat), nudge.is_some()).map_err(config_error)?;
    let Connection { client, namespace, source, cluster_identifier } = connection;
    let pod = Pod::read(env).map_err(config_error)?;
    let operator_namespace = settings.operator_namespace.clone().unwrap_or_else(|| namespace.clone());
    let operator_elsewhere = operator_namespace != namespace;
    let target = StatusConfigMap { namespace, name: settings.configmap.clone(), operator_elsewhere };

    let mut signals: Vec<Box<dyn Signal>> = Vec::new();
    let pro = pro::from_settings(
        settings.pro.api_key.clone(),
        &settings.pro.server_url,
        settings.pro.server_ca_file.as_deref(),
        cluster_identifier,
        settings.agent.operator_version.clone(),
    )
    .map_err(Failure::Config)?;
    if let Some(pro) = pro {
        signals.push(Box::new(pro));
    }
    let watch = &settings.watch;
    let file = watch.file.clone().map(|f| (f, watch.max_age));
    let mut watches = Watches::new(watch.urls.clone(), file, watch.critical);
    if let Some(name) = pod.name.clone().filter(|_| !watch.urls.is_empty()) {
        watches = watches.own_pod(operator_namespace.clone(), name);
    }
    if !watches.is_empty() {
        signals.push(Box::new(watches));
    }
    if let Some(container) = &settings.watch.container {
        // Its own Pod: the one the downward API names, where the operator runs.
        let name = pod.name.clone().ok_or_else(|| {
            Failure::Config(
                "--watch-container reads the sidecar's own Pod: give POD_NAME (the downward API's metadata.name)"
                    .into(),
            )
        })?;
        let watch = ContainerWatch::new(
            operator_namespace.clone(),
            name,
            container.clone(),
            settings.watch.clean_run,
            nudge.clone(),
        );
        signals.push(Box::new(watch));
    }
    let probes = &settings.probes;
    let mut prober = Prober::new(probes.specs.clone(), probes.crds.clone(), probes.namespaces.clone())
        .within(settings.agent.interval)
        .condition_metrics(probes.condition_types);
    if let Some(nudge) = nudge {
        prober = prober.watching(nudge);
    }
    let probing = !prober.is_empty();
    if probing {
        signals.push(Box::new(prober));
    }

    let mut sinks = Sinks::default();
    if let Some(name) = &settings.operator_condition {
        if !probing {
            log::warn!(
                "The OperatorCondition is set but no probe is: opstatus leaves its conditions to the operator \
                 (add --probe or --probe-from-crd-annotations)"
            );
        }
        let sink =
            OperatorConditionSink::new(operator_namespace.clone(), name.clone(), settings.agent.upgradeable_inertia);
        sinks.add(Box::new(sink));
    }
    if let Some(co) = &settings.cluster_operator {
        if probing {
            log::warn!(
                "ClusterOperator {}: while a probed resource blocks, it says Upgradeable=False, which holds back the \
                 upgrade of the whole cluster (the cluster-version operator reads every ClusterOperator), not only \
                 this operator's",
                co.name
            );
        }
        sinks.add(Box::new(cluster_operator(settings, co, &target, &operator_namespace)));
    }

    let identity = identity(settings, &pod);
    // The operator's leader Lease names pods: an --identity of its own
    // does not change which pod this instance runs in.
    let pod_name = pod.name.clone().or_else(|| pod.hostname.clone()).unwrap_or_else(|| identity.clone());
    // The leader's Service fronts the operator's pods: in their namespace.
    let leader_endpoints = match &settings.leader_service {
        Some(service) => Some(LeaderEndpoints::new(
            operator_namespace.clone(),
            service.clone(),
            settings.leader_service_ports.clone(),
            pod_name.clone(),
            leader_endpoints::pod_ip(pod.ip.as_deref()).map_err(Failure::Config)?,
        )),
        None => None,
    };
    let mut agent_settings = settings.agent.clone();
    // The operator's Lease is where the operator runs (`NAMESPACE/NAME`),
    // wherever the status goes.
    agent_settings.follow_leader_lease =
        agent_settings.follow_leader_lease.map(|l| format!("{operator_namespace}/{l}"));
    let config = AgentConfig {
        target,
        operator_namespace,
        pod: pod_name,
        identity,
        credentials: source,
        settings: agent_settings,
        leader_endpoints,
    };
    // Once the configuration is known to be good: a bad one is one line.
    if let Some(warning) = reader::placement_warning(&config.target.namespace, &config.target.name) {
        log::warn!("{warning}");
    }
    if config.settings.operator_version == crate::status::UNKNOWN_VERSION {
        log::warn!(
            "No operator version given (--operator-version or OPSTATUS_OPERATOR_VERSION; the components set it from \
             the pod's app.kubernetes.io/version label): the status says version {}, not opstatus's own",
            crate::status::UNKNOWN_VERSION
        );
    }
    // What RBAC allows these credentials is what opstatus can do.
    log::info!("Kubernetes credentials: {}", config.credentials);
    let events = settings.events.then(|| recorder(&config, &pod));
    Ok(Agent::new(client, config, signals, sinks, events, shared))
}

/// The Kubernetes Events' recorder: about the sidecar's own Pod when the
/// downward API gives its name and uid (the pod runs where the operator
/// does), else about the status ConfigMap.
fn recorder(config: &AgentConfig, pod: &Pod) -> Recorder {
    let object = match pod.name.clone().zip(pod.uid.clone()) {
        Some((name, uid)) => InvolvedObject { kind: "Pod", namespace: config.operator_namespace.clone(), name, uid },
        None => InvolvedObject {
            kind: "ConfigMap",
            namespace: config.target.namespace.clone(),
            name: config.target.name.clone(),
            uid: String::new(),
        },
    };
    let recorder = Recorder::new(object, Reporter { instance: config.identity.clone() }, Instant::now());
    log::info!("Kubernetes Events about {}", recorder.describe());
    recorder
}

/// This instance's name in the publisher lock: `--identity`, else the pod's
/// name (`POD_NAME`; `HOSTNAME` is the pod's name in Kubernetes), else the
/// host's name.
fn identity(settings: &Settings, pod: &Pod) -> String {
    settings
        .identity
        .clone()
        .or_else(|| pod.name.clone())
        .or_else(|| pod.hostname.clone().filter(|h| !h.is_empty()))
        .or_else(|| {
            let host = std::fs::read_to_string("/proc/sys/kernel/hostname").ok()?;
            crate::cli::check_identity(host.trim()).ok().filter(|h| !h.is_empty())
        })
        .unwrap_or_else(|| format!("opstatus-{}", std::process::id()))
}

/// The ClusterOperator with its versions and related objects: the
/// operator's namespace, the status ConfigMap, the OperatorCondition (when
/// set), each probed resource type with its CRD, then the
/// `--related-object`s.
fn cluster_operator(
    settings: &Settings,
    co: &ClusterOperatorSettings,
    target: &StatusConfigMap,
    namespace: &str,
) -> ClusterOperatorSink {
    let mut related = vec![
        RelatedObject::new("", "namespaces", "", namespace),
        RelatedObject::new("", "configmaps", &target.namespace, &target.name),
    ];
    if let Some(oc) = &settings.operator_condition {
        related.push(RelatedObject::new("operators.coreos.com", "operatorconditions", namespace, oc));
    }
    related.extend(probed_types(&settings.probes));
    related.extend(co.related_objects.iter().cloned());
    let mut targets = vec![Version::new(OPERATOR, &settings.agent.operator_version)];
    targets.extend(co.operand_versions.iter().cloned());
    let (degraded, upgradeable) = (co.degraded_inertia, settings.agent.upgradeable_inertia);
    ClusterOperatorSink::new(co.name.clone(), targets, co.version_file.clone(), related, degraded, upgradeable)
}

/// What drives `Upgradeable`, for must-gather (`oc adm inspect` collects a
/// related object with an empty name as every object of its type): each
/// probed resource type, in each probed namespace (or cluster-wide), and
/// its CRD.
fn probed_types(probes: &crate::cli::ProbeSettings) -> Vec<RelatedObject> {
    let flags = probes.specs.iter().map(|p| (p.group.clone(), p.resource.clone()));
    let crds = probes.crds.iter().filter_map(|crd| crd.split_once('.')).map(|(r, g)| (g.to_string(), r.to_string()));
    let namespaces: Vec<&str> = match probes.namespaces.as_slice() {
        [] => vec![""],
        list => list.iter().map(String::as_str).collect(),
    };
    let mut related = Vec::new();
    for (group, resource) in flags.chain(crds) {
        for ns in &namespaces {
            related.push(RelatedObject::new(&group, &resource, ns, ""));
        }
        if !group.is_empty() {
            let crd = format!("{resource}.{group}");
            related.push(RelatedObject::new("apiextensions.k8s.io", "customresourcedefinitions", "", &crd));
        }
    }
    related
}

/// `opstatus run`: the agent loop, until SIGTERM or SIGINT.
pub fn run(settings: &Settings, env: Env<'_>) -> Result<(), Failure> {
    // Handlers first: a SIGTERM during start-up must not be lost.
    let ready = settings.agent.ready_file.clone();
    let mut shutdown = Shutdown::install(move || {
        if let Some(path) = ready {
            let _ = ready_file::remove(&path);
        }
    })
    .map_err(|e| Failure::Runtime(format!("cannot install signal handlers: {e}")))?;
    // Then the endpoint, before anything else: a native sidecar's startup
    // probe comes as soon as the process runs, and finds it listening
    // (`/healthz` answers at once; `/readyz` says "Starting" until the
    // first tick).
    let shared = agent::starting(&settings.agent);
    if let Some(addr) = settings.listen {
        let bound = endpoint::spawn(addr, shared.clone(), shutdown.nudge())
            .map_err(|e| Failure::Runtime(format!("cannot listen on {addr} (--listen): {e}")))?;
        log::info!("Serving /healthz, /readyz, /status and /metrics on http://{bound}");
    }
    let mut agent = agent_for(settings, env, Some(shutdown.nudge()), shared)?;
    agent.run(&mut shutdown);
    Ok(())
}

/// `opstatus once`: one write; its failure is the command's failure.
pub fn once(settings: &Settings, env: Env<'_>) -> Result<(), Failure> {
    let mut agent = agent_for(settings, env, None, agent::starting(&settings.agent))?;
    agent.check_once();
    match agent.write_once() {
        Ok(true) => Ok(()),
        Ok(false) => Err(Failure::Runtime(
            "not written: another instance publishes this status, or another writer keeps it (see the log line above)"
                .into(),
        )),
        Err(e) => Err(Failure::Runtime(format!("failed to write status ConfigMap: {e}"))),
    }
}

/// `opstatus get`: read and interpret the published status as the kube9
/// extension does; prints it. Without `--namespace`, it searches where the
/// extension looks (`--extension-namespace`, else kube9-system, then
/// default): the first namespace that has the ConfigMap is the one read.
pub fn get(settings: &Settings, output: OutputFormat, env: Env<'_>) -> Result<String, Failure> {
    let Connection { mut client, namespace, .. } =
        connect(settings, env, None, false).map_err(|e| Failure::Config(e.to_string()))?;
    let (searched, why_there) = match (&settings.namespace, &settings.extension_namespace) {
        (Some(_), _) => (vec![namespace], "--namespace"),
        (None, Some(ns)) => (vec![ns.clone()], "kube9.operatorNamespace, as --extension-namespace mirrors it"),
        (None, None) => (reader::extension_namespaces(None), "where the extension looks: kube9-system, then default"),
    };
    let name = &settings.configmap;
    let mut found = None;
    for ns in &searched {
        let target = StatusConfigMap { namespace: ns.clone(), name: name.clone(), operator_elsewhere: false };
        let read = target.fetch(&mut client);
        let body = read.map_err(|e| Failure::Runtime(format!("cannot read ConfigMap {ns}/{name}: {e}")))?;
        if let Some(body) = body {
            found = Some((ns.as_str(), body));
            break;
        }
    }
    let found_in = found.as_ref().map(|(ns, _)| *ns);
    let place = found_in.map_or_else(|| searched.join(" or "), String::from);
    let body = found.map(|(_, body)| body);
    let status = body.as_deref().map(reader::status_of_configmap).transpose();
    let now = SystemTime::now();
    let reading = status
        .and_then(|s| reader::interpret(s.as_deref(), now))
        .map_err(|e| Failure::Runtime(format!("ConfigMap {place}/{name}: {e}")))?;
    // Who publishes, from the lock beside the status (never inside it).
    let current = body.as_deref().and_then(|b| configmap::seen(b).ok());
    // Anyone who may patch the ConfigMap writes the annotation: the lock
    // record is sanitised and bounded where it is parsed (`Seen::parse`).
    let record = current.as_ref().and_then(|c| c.lock.record());
    // Another manager of the status key (sanitised where it is parsed):
    // opstatus leaves the ConfigMap to it rather than fight.
    let foreign = current.as_ref().and_then(|c| c.foreign.as_ref()).map(|f| &f.writer);
    // Is an upgrade held, by what, since when: the OperatorCondition in the
    // operator's namespace (as the status names it) and the ClusterOperator.
    let operator_namespace = settings
        .operator_namespace
        .clone()
        .or_else(|| reading.status.as_ref().and_then(|s| s.namespace.clone()).or_else(|| found_in.map(String::from)));
    let co = settings.cluster_operator.as_ref().map(|co| co.name.as_str());
    let condition = settings.operator_condition.as_deref();
    let (holds, not_read) = upgrade_hold::read(&mut client, operator_namespace.as_deref(), condition, co, now);
    Ok(match output {
        OutputFormat::Json => {
            let mut json = serde_json::to_value(&reading).expect("plain data serialises");
            json["namespace"] = serde_json::json!(found_in);
            json["searched"] = serde_json::json!(searched);
            // Added only when someone holds the lock: scripts see no change
            // otherwise.
            if let Some(r) = record.filter(|r| !r.holder_identity.is_empty()) {
                json["publisher"] = serde_json::json!({
                    "identity": r.holder_identity, "since": r.acquire_time, "renewed": r.renew_time,
                });
            }
            if let Some(w) = foreign {
                json["otherWriter"] = serde_json::json!({"manager": w.manager, "operation": w.operation});
            }
            if !holds.is_empty() || !not_read.is_empty() {
                json["upgradeable"] = serde_json::json!(holds);
                json["upgradeableNotRead"] = serde_json::json!(not_read);
            }
            json.to_string() + "\n"
        }
        OutputFormat::Text => {
            let mut text = reader::render_text(&reading, name, &place, now);
            text += &reader::render_explanation(&reading, &searched, found_in, why_there);
            match record {
                Some(r) if !r.holder_identity.is_empty() => {
                    text += &format!(
                        "Publisher:   {} (since {}, renewed {})\n",
                        r.holder_identity, r.acquire_time, r.renew_time
                    )
                }
                Some(r) => text += &format!("Publisher:   none (released {})\n", r.renew_time),
                None => {}
            }
            if let Some(w) = foreign {
                text += &format!(
                    "Written by:  {w}, not opstatus: opstatus leaves the status to it while it keeps writing\n"
                );
            }
            text + &upgrade_hold::render_text(&holds, &not_read)
        }
    })
}

/// `opstatus prestop`: `GET /prestop` from `run`'s endpoint in this pod
/// (exec'd by kubelet in opstatus's container, so 127.0.0.1 is the pod's),
/// bounded by [`PRESTOP_TIMEOUT`] per phase; `Ok` when it answered 200.
pub fn prestop(settings: &Settings) -> Result<String, Failure> {
    let mut addr = settings.listen.expect("config requires --listen for prestop");
    if addr.ip().is_unspecified() {
        addr.set_ip(if addr.is_ipv4() { Ipv4Addr::LOCALHOST.into() } else { Ipv6Addr::LOCALHOST.into() });
    }
    let t = PRESTOP_TIMEOUT;
    let config =
        crate::util::http::agent_config(crate::util::http::Timeouts { connect: t, send: t, response: t, body: t });
    let (agent, _) = crate::util::http::agent(config.build(), None);
    match agent.get(&format!("http://{addr}/prestop")).call() {
        Ok(answer) if answer.status() == 200 => Ok(String::new()),
        Ok(answer) => Err(Failure::Runtime(format!("opstatus at {addr} answered {}", answer.status()))),
        Err(e) => Err(Failure::Runtime(format!(
            "cannot tell opstatus at {addr} the pod stops: {}",
            crate::util::text::sanitize(&e.to_string(), 200)
        ))),
    }
}

/// How long `prestop` waits for each of connecting, sending and the answer.
const PRESTOP_TIMEOUT: Duration = Duration::from_secs(2);

/// `opstatus probe`: one line for stdout; `Ok` when ready.
pub fn probe(settings: &Settings) -> Result<String, Failure> {
    let path = settings.agent.ready_file.as_deref().expect("config requires --ready-file for probe");
    let contents = match crate::util::files::read_bounded(path, crate::util::files::SMALL_LIMIT, "readiness file") {
        Ok(raw) => Some(String::from_utf8_lossy(&raw).into_owned()),
        Err(e) if e.is_not_found() => None,
        Err(e) => return Err(Failure::NotReady(format!("not ready: {e}"))),
    };
    ready_file::check(path, contents.as_deref(), SystemTime::now(), settings.max_age)
        .map(|line| line + "\n")
        .map_err(Failure::NotReady)
}
