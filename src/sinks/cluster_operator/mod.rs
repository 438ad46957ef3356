//! OpenShift's `ClusterOperator` (`config.openshift.io/v1`, cluster-scoped):
//! the versions and the four conditions the cluster-version operator and
//! admins read.
//!
//! The mapping is pure ([`Intent::new`], [`apply`]):
//!
//! | condition | True when | from |
//! |---|---|---|
//! | `Available` | the operator is not down | its watched URL or heartbeat file |
//! | `Degraded` | health is degraded or unhealthy for longer than the inertia | the health rules |
//! | `Progressing` | a version named by the flags is not running yet | the version file |
//! | `Upgradeable` | no probed resource blocks | the probes (else always True) |
//!
//! `Degraded` and `Upgradeable` are under inertia ([`crate::inertia`]):
//! `Degraded` by default, as library-go's operators have it (its message
//! keeps its words: its `lastTransitionTime` is when it was published),
//! `Upgradeable` with `--upgradeable-inertia`, as on the OperatorCondition
//! ([`super::upgradeable`]). The first sync after a start or a takeover
//! reads the object first: the two as it says them hold as published,
//! since when it says, so a window under way outlives the process.
//!
//! Versions: `operator` = `--operator-version`, plus `--operand-version`s.
//! Without a version file they are taken to run as soon as this sidecar
//! does (it ships in the operator's pod). With one, a version is reported
//! only once the file says it runs; until then the version found in the
//! ClusterOperator stays (report what runs, not what is being installed)
//! and `Progressing` says `Working towards <version>`.
//!
//! The write: create the object if it is missing (an empty one), then one
//! `PUT .../clusteroperators/NAME/status` of the whole status on a fresh
//! read, retried on 409; only when something changed. Conditions of types
//! opstatus does not set, versions and related objects it does not name,
//! and the rest of the object (`status.extension`) are kept; only the
//! lists opstatus changes are parsed ([`intent::apply`]).

pub(crate) mod intent;

use super::upgradeable::HeldUpgradeable;
use super::{Sink, Synced, Tick, read_modify_write};
use crate::inertia::{Inertia, PendingChange, Windows};
use crate::kube::{Client, KubeError};
use crate::status::Health;
use crate::util::reported::Reported;
use crate::util::time::format_rfc3339;
use intent::{Intent, RelatedObject, Signals, Version, parse_version_file};
use serde_json::json;
use std::path::PathBuf;
use std::time::Duration;

pub(crate) const API: &str = "/apis/config.openshift.io/v1";

/// Where the permission is granted.
const GRANT: &str = "see manifests/openshift/cluster-operator.yaml";

/// The ClusterOperator to keep current, and everything that feeds it.
pub(crate) struct ClusterOperatorSink {
    pub name: String,
    /// The versions the flags name, `operator` first.
    targets: Vec<Version>,
    /// What the operator writes once a version runs; `None`: the targets
    /// run as soon as the sidecar does.
    version_file: Option<PathBuf>,
    version_file_error: Reported,
    related: Vec<RelatedObject>,
    /// Whether bad health has held long enough to say `Degraded=True`.
    degraded: Inertia<bool>,
    degraded_windows: Windows,
    /// Whether the object was read back since the start or takeover.
    read_back: bool,
    upgradeable: HeldUpgradeable,
    /// What was last written: the same intent again needs no request until
    /// the next drift check. Forgotten on a failure, so the next check retries.
    written: Option<Intent>,
}

impl ClusterOperatorSink {
    /// `targets`: `operator` first, then the operands; `related`: what
    /// `oc adm inspect` follows; `degraded`, `upgradeable`: the two
    /// conditions' inertia.
    pub(crate) fn new(
        name: String,
        targets: Vec<Version>,
        version_file: Option<PathBuf>,
        related: Vec<RelatedObject>,
        degraded: Windows,
        upgradeable: Windows,
    ) -> ClusterOperatorSink {
        ClusterOperatorSink {
            name,
            targets,
            version_file,
            version_file_error: Reported::default(),
            related,
            degraded: Inertia::new(degraded),
            degraded_windows: degraded,
            read_back: false,
            upgradeable: HeldUpgradeable::new(upgradeable),
            written: None,
        }
    }

    /// What the version file says runs (`None` without one); a file that
    /// cannot be read or parsed counts as saying nothing runs yet.
    fn running(&mut self) -> Option<Vec<Version>> {
        let path = self.version_file.as_ref()?;
        let read = crate::util::files::read_bounded(path, crate::util::files::VERSION_FILE_LIMIT, "version file");
        let parsed = match read.map(String::from_utf8) {
            Ok(Ok(text)) => parse_version_file(&text).map_err(|e| format!("Version file {}: {e}", path.display())),
            Ok(Err(_)) => Err(format!("Version file {} is not UTF-8", path.display())),
            Err(e) if e.is_not_found() => Ok(Vec::new()),
            // "Cannot read version file …", "Version file … is a FIFO, …".
            Err(e) => Err(e
                .to_string()
                .char_indices()
                .map(|(i, c)| if i == 0 { c.to_ascii_uppercase() } else { c })
                .collect()),
        };
        let error = parsed.as_ref().err().map(|e| format!("{e}; reporting only the versions known to run"));
        self.version_file_error.update(error, log::Level::Warn, "");
        Some(parsed.unwrap_or_default())
    }

    /// Creates the object when missing, then writes the status when it
    /// differs from `intent`; an update is summarised (`Upgradeable=False,
    /// ...`) for the log line. Errors are sentences for the status's reason.
    fn write(&mut self, client: &mut Client, intent: Intent, now: &str) -> Result<Synced, String> {
        let path = format!("{API}/clusteroperators/{}", self.name);
        let action = format!("clusteroperators {:?}", self.name);
        let mut created = false;
        let result = loop {
            let modify = &mut |body: &[u8]| intent::apply(body, &intent, now);
            match read_modify_write(client, &path, "/status", &action, GRANT, modify) {
                Err(e) if e.is_missing_object() && !created => {
                    self.create(client)?;
                    created = true;
                }
                other => break other,
            }
        };
        let said: Vec<String> = intent.conditions.iter().map(|c| format!("{}={}", c.kind, c.status.as_str())).collect();
        self.written = result.is_ok().then_some(intent);
        let written = result.map_err(|e| explain(&e, &self.describe()))?;
        Ok(if written { Synced::Updated(said.join(", ")) } else { Synced::Unchanged })
    }

    /// Reads the object's conditions back before the first write after a
    /// start or a takeover: its `Degraded` and `Upgradeable` hold as
    /// published, since when it says. A missing object says nothing.
    fn read_back(&mut self, client: &mut Client, tick: &Tick<'_>) -> Result<(), String> {
        let (path, action) =
            (format!("{API}/clusteroperators/{}", self.name), format!("get clusteroperators {:?}", self.name));
        let conditions = super::read_conditions(client, ("ClusterOperator", &path, &action), "status", GRANT)
            .map_err(|e| explain(&e, &self.describe()))?;
        // Without one, `Degraded=False` is published: a bad signal waits
        // for the window.
        let degraded = conditions.iter().find(|c| c.kind == "Degraded");
        let (state, since) = degraded
            .and_then(|c| Some((c.status == crate::conditions::Status::True, super::upgradeable::since(c)?)))
            .unwrap_or((false, tick.wall));
        self.degraded.seed(state, since, tick.now);
        self.upgradeable.read_back(&conditions, tick.now);
        self.read_back = true;
        Ok(())
    }

    /// An empty object: the status goes through the status subresource.
    fn create(&self, client: &mut Client) -> Result<(), String> {
        let body = json!({
            "apiVersion": "config.openshift.io/v1",
            "kind": "ClusterOperator",
            "metadata": {"name": self.name},
            "spec": {},
        });
        let action = format!("create clusteroperators {:?}", self.name);
        match client.create(&format!("{API}/clusteroperators"), body.to_string().as_bytes(), &action) {
            Ok(_) => {
                log::info!("Created {}", self.describe());
                Ok(())
            }
            // Someone else created it meanwhile: just as good.
            Err(e) if e.code() == Some(409) => Ok(()),
            Err(e) => Err(explain(&e.granted_by(GRANT), &self.describe())),
        }
    }
}

impl Sink for ClusterOperatorSink {
    fn name(&self) -> &'static str {
        "cluster_operator"
    }

    fn describe(&self) -> String {
        format!("ClusterOperator {}", self.name)
    }

    fn sync(&mut self, client: &mut Client, tick: &Tick<'_>) -> Result<Synced, String> {
        if !self.read_back && (self.degraded_windows.is_on() || self.upgradeable.needs_reading_back()) {
            self.read_back(client, tick)?;
        }
        let observation = tick.observation;
        let bad = tick.verdict.health != Health::Healthy;
        let degraded = self.degraded.observe(bad, tick.now, tick.wall);
        let running = self.running();
        // No Upgradeable expression: True. One that cannot be evaluated
        // yet (a failed list, an unread CRD): leave what is published.
        let upgradeable = match &observation.probes {
            None => Ok(None),
            Some(p) if !p.declares_upgradeable => Ok(None),
            Some(p) => p.upgradeable.as_ref().map(|u| Some(self.upgradeable.publish(u, tick.now, tick.wall))).ok_or(()),
        };
        let signals = Signals {
            operator_down: observation.operator_down(),
            watched: observation.operator.is_some(),
            verdict: tick.verdict,
            degraded,
            upgradeable,
        };
        // Built on every check (a few small strings per check interval, not
        // per heartbeat) and compared with what was last written: simpler
        // and surer than tracking each input's changes.
        let intent = Intent::new(&signals, self.targets.clone(), running, self.related.clone());
        if self.written.as_ref() == Some(&intent) && !tick.drift_check {
            return Ok(Synced::Skipped);
        }
        self.write(client, intent, &format_rfc3339(tick.wall))
    }

    /// A read that finds the object missing, its creation, then the
    /// read-modify-write.
    fn worst_case(&self) -> Duration {
        crate::kube::call_bound().saturating_mul(2).saturating_add(super::read_modify_write_bound())
    }

    fn pending(&self) -> Vec<PendingChange> {
        let degraded = self.degraded.pending().map(|p| {
            let state = if p.state { "Degraded=True" } else { "Degraded=False" };
            PendingChange::new(self.describe(), state, p)
        });
        degraded.into_iter().chain(self.upgradeable.pending(self.describe())).collect()
    }

    fn stand_by(&mut self) {
        self.written = None;
        self.degraded = Inertia::new(self.degraded_windows);
        self.upgradeable.forget();
        self.read_back = false;
    }

    fn upgradeable(&self) -> Option<&crate::conditions::Desired> {
        self.upgradeable.last()
    }
}

/// An error as the status's reason says it.
fn explain(e: &KubeError, what: &str) -> String {
    match e.code() {
        Some(404) if !e.is_missing_object() => {
            "The ClusterOperator API (config.openshift.io/v1) is not served: is this an OpenShift cluster?".into()
        }
        _ => format!("Failed to update {what}: {e}"),
    }
}
