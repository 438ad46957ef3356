//! The leader's Service (`--leader-service`): one EndpointSlice
//! (`discovery.k8s.io/v1`, Kubernetes 1.21 and later) for a Service
//! without a selector, pointing at the pod of the operator's leader, so a
//! client of that Service reaches only the leader. This is how the API
//! server keeps its own `kubernetes` Service, and how Patroni keeps a
//! database's primary Service: tying the pods' readiness to leadership
//! instead would leave standby pods never Ready and deadlock every rollout.
//!
//! Only the sidecar in the leader's pod points the slice at its pod; after a
//! handover the new leader's sidecar rewrites it. A sidecar that pointed the
//! slice at its own pod empties it (`endpoints: []`) once the Lease names
//! no live leader (unrenewed past its duration, released, gone). Emptied
//! rather than marked not ready: an empty slice means "nobody" to every
//! consumer alike (kube-proxy, DNS, ingress controllers, and those that
//! publish not-ready addresses), and the slice keeps no address that a
//! later pod may be given. A handover to another leader is that leader's to
//! write: the old one does not empty it, and its emptying write carries the
//! `resourceVersion` it last saw, so it cannot undo the new leader's (a 409,
//! then one read).
//!
//! Writes are server-side apply of the whole slice: one request creates or
//! updates it, authorized on the slice's name (`create` included). A write
//! happens only when what the slice should say changes: on a handover, when
//! the Lease lapses, when this process starts as the leader; a standby reads
//! the slice once at start (and after a refused write), never per heartbeat.
//! Like every sink, the leader's slice is under a drift check: once per
//! heartbeat interval the leader's sidecar reads it, and a slice deleted,
//! pointed elsewhere, or with its ports, family or Service label edited is
//! written again.
//!
//! What the slice should say ([`wanted`]) is pure; what the Lease means now
//! (the clock) is decided by the caller.

use crate::kube::{Client, Fields, KubeError, ObjectRef, unreadable};
use crate::status::{Problem, Rule};
use crate::util::backoff::{Backoff, Jitter};
use crate::util::reported::Reported;
use serde_json::{Value, json};
use std::net::IpAddr;
use std::time::{Duration, Instant};

const API: &str = "/apis/discovery.k8s.io/v1";

/// The field manager of opstatus's writes, and the slice's `managed-by`.
const MANAGER: &str = "opstatus";

/// Where the permission is granted.
const GRANT: &str = "see manifests/components/leader-service";

/// A failed request is tried again after 1 s, doubling up to a minute (an
/// API server that does not serve the API at all is asked once a minute,
/// not on every check).
const RETRY: (Duration, Duration) = (Duration::from_secs(1), Duration::from_secs(60));

/// The most ports one slice names (the API allows 100; a leader's Service
/// needs a few).
pub(crate) const MAX_PORTS: usize = 16;

/// A port of the Service, as its EndpointSlice names it: the name must be
/// the Service port's name for clients of that port to reach it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ServicePort {
    /// Empty for the Service's one unnamed port.
    pub name: String,
    pub port: u16,
    /// `TCP`, `UDP` or `SCTP`.
    pub protocol: &'static str,
}

/// `[name:]port[/protocol]`: `metrics:8080/TCP`, `8443`, `dns:53/UDP`.
pub(crate) fn parse_port(v: &str) -> Result<ServicePort, String> {
    const FORM: &str = "is not [name:]port[/TCP|UDP|SCTP] (e.g. http:8080/TCP, 8443)";
    let (rest, protocol) = v.split_once('/').unwrap_or((v, "TCP"));
    let Some(protocol) = ["TCP", "UDP", "SCTP"].into_iter().find(|p| *p == protocol) else { return Err(FORM.into()) };
    let (name, digits) = match rest.split_once(':') {
        Some(("", _)) => return Err(FORM.into()),
        Some(split) => split,
        None => ("", rest),
    };
    let port = match digits.parse::<u16>() {
        Ok(port) if port > 0 && digits.bytes().all(|b| b.is_ascii_digit()) => port,
        _ => return Err(FORM.into()),
    };
    if !name.is_empty() {
        crate::kube::names::check_dns_label(name).map_err(|why| format!("has a port name that {why}"))?;
    }
    Ok(ServicePort { name: name.into(), port, protocol })
}

/// This pod's IP, where the slice points: `POD_IP` from the downward API's
/// `status.podIP`.
pub(crate) fn pod_ip(given: Option<&str>) -> Result<IpAddr, String> {
    const HOW: &str = "set it from the downward API: env POD_IP, valueFrom.fieldRef.fieldPath: status.podIP";
    match given {
        None => Err(format!("--leader-service points its Service at this pod's IP: POD_IP is not set ({HOW})")),
        Some(given) => {
            let shown = crate::util::text::sanitize(given, 64);
            let ip: IpAddr = given
                .trim()
                .parse()
                .map_err(|_| format!("--leader-service: POD_IP {shown:?} is not an IP address ({HOW})"))?;
            // Kubernetes gives an IPv4 pod its IPv4 address; the mapped form
            // would be written as an IPv6 address, which it is not.
            if ip.to_canonical() != ip {
                return Err(format!(
                    "--leader-service: POD_IP {shown:?} is an IPv4 address written as IPv6 (IPv4-mapped): give it \
                     as {} ({HOW})",
                    ip.to_canonical()
                ));
            }
            // The API server refuses them in an EndpointSlice (422), and no
            // client elsewhere could reach them.
            if ip.is_loopback() || ip.is_unspecified() || ip.is_multicast() {
                return Err(format!(
                    "--leader-service: POD_IP {shown:?} is no address a client can reach the pod at (loopback, \
                     unspecified or multicast: the API server refuses it in an EndpointSlice)"
                ));
            }
            Ok(ip)
        }
    }
}

/// Who leads the operator now, as the caller judged its Lease.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Leading<'a> {
    /// Not known: the Lease was not read yet, or its reads fail.
    Unknown,
    /// The Lease names no live leader: unrenewed past its duration,
    /// released, or gone.
    Nobody,
    /// The pod the Lease names leads.
    Pod(&'a str),
}

/// What the slice says: the one address it points at, or none.
pub(crate) type Says = Option<IpAddr>;

/// What this pod's sidecar should make the slice say, or `None` to leave
/// it alone. `known`: what the slice says as last read or written (`None`:
/// not read yet). The leader points it at its pod; a sidecar whose pod it
/// points at empties it when nobody leads; everyone else leaves it to the
/// leader.
pub(crate) fn wanted(leading: Leading<'_>, me: &str, ip: IpAddr, known: Option<Says>) -> Option<Says> {
    match leading {
        Leading::Pod(pod) if pod == me => Some(Some(ip)),
        Leading::Nobody if known == Some(Some(ip)) => Some(None),
        _ => None,
    }
}

/// What the slice says as last read or written: where it points, whether
/// the rest (family, ports, the Service's label) is what opstatus writes,
/// and its `resourceVersion`.
#[derive(Clone, Debug, PartialEq, Eq)]
struct Known {
    says: Says,
    intact: bool,
    version: String,
}

/// The EndpointSlice of the leader's Service, and what it last said.
#[derive(Clone, Debug)]
pub(crate) struct LeaderEndpoints {
    namespace: String,
    service: String,
    ports: Vec<ServicePort>,
    pod: String,
    ip: IpAddr,
    /// `None` until read, and after a refused write.
    known: Option<Known>,
    failure: Reported,
    backoff: Backoff,
    jitter: Jitter,
    /// After a failure: not before then.
    retry_at: Option<Instant>,
    /// While this pod leads: when the slice is read again to repair it.
    drift_check_at: Option<Instant>,
}

impl LeaderEndpoints {
    pub(crate) fn new(namespace: String, service: String, ports: Vec<ServicePort>, pod: String, ip: IpAddr) -> Self {
        let (backoff, jitter) = (Backoff::new(RETRY.0, RETRY.1), Jitter::from_os());
        LeaderEndpoints {
            namespace,
            service,
            ports,
            pod,
            ip,
            known: None,
            failure: Reported::default(),
            backoff,
            jitter,
            retry_at: None,
            drift_check_at: None,
        }
    }

    fn object(&self) -> ObjectRef<'_> {
        ObjectRef { api: API, resource: "endpointslices", namespace: Some(&self.namespace), name: &self.service }
    }

    /// Brings the slice to what it should say given `leading`: at most one
    /// read (only when what it says is not known and matters, or, for the
    /// leader, once per `interval`: the drift check) and one write, none
    /// when nothing changed; after a failure, none until the backoff has
    /// passed.
    pub(crate) fn sync(&mut self, client: &mut Client, leading: Leading<'_>, now: Instant, interval: Duration) {
        if self.retry_at.is_some_and(|at| now < at) {
            return;
        }
        let drift_check = match (leading == Leading::Pod(&self.pod), self.drift_check_at) {
            (false, _) => {
                self.drift_check_at = None;
                false
            }
            (true, Some(at)) if now < at => false,
            // The first check as the leader writes without reading.
            (true, at) => {
                self.drift_check_at = Some(now + interval);
                at.is_some()
            }
        };
        let failure = match self.try_sync(client, leading, drift_check) {
            Ok(()) => {
                self.backoff.reset();
                self.retry_at = None;
                None
            }
            Err(e) => {
                let delay = self.backoff.next_delay(self.jitter.next_u64(), e.retry_after());
                self.retry_at = Some(now + delay);
                let why = match e.code() {
                    // An apply creates a missing slice: a 404 is the API not served.
                    Some(404) => "this API server does not serve discovery.k8s.io/v1 EndpointSlices; --leader-service \
                                  needs Kubernetes 1.21 or later"
                        .to_string(),
                    _ => e.granted_by(GRANT).to_string(),
                };
                Some(format!(
                    "Cannot write EndpointSlice {}/{} of the leader's Service: {why}",
                    self.namespace, self.service
                ))
            }
        };
        self.failure.update(failure, log::Level::Warn, "The leader's EndpointSlice can be written again");
    }

    fn try_sync(&mut self, client: &mut Client, leading: Leading<'_>, drift_check: bool) -> Result<(), KubeError> {
        // Another pod leads: the slice is its sidecar's to rewrite, so what
        // this one knows of it is stale; read again if it matters again.
        if matches!(leading, Leading::Pod(pod) if pod != self.pod) {
            self.known = None;
        }
        if drift_check || (self.known.is_none() && leading == Leading::Nobody) {
            self.known = None;
            self.read(client)?;
        }
        let known = self.known.as_ref().map(|k| k.says);
        let Some(want) = wanted(leading, &self.pod, self.ip, known) else { return Ok(()) };
        if self.known.as_ref().is_some_and(|k| k.says == want && (k.intact || want.is_none())) {
            return Ok(());
        }
        // Emptying is conditional on the version last seen: a new leader's
        // write since then wins (409), and what it says is read again.
        let version = if want.is_none() { self.known.as_ref().map(|k| k.version.as_str()) } else { None };
        let body = self.body(want, version);
        match client.apply(&self.object(), MANAGER, true, body.to_string().as_bytes()) {
            Ok(stored) => {
                self.known = Some(self.stored(&stored)?);
                let what = match want {
                    Some(_) if drift_check => "is written again: it had been changed or deleted".into(),
                    Some(ip) => format!("points at this pod, {} ({ip})", self.pod),
                    None => "is emptied: the operator's Lease names no live leader".into(),
                };
                log::info!("EndpointSlice {}/{} of the leader's Service {what}", self.namespace, self.service);
                Ok(())
            }
            Err(e) => {
                self.known = None;
                match e.code() {
                    Some(409) => self.read(client),
                    _ => Err(e),
                }
            }
        }
    }

    /// Reads what the slice says (a missing slice says nothing).
    fn read(&mut self, client: &mut Client) -> Result<(), KubeError> {
        let (ns, name) = (&self.namespace, &self.service);
        let action = format!("get endpointslices {name:?} in namespace {ns:?}");
        self.known = Some(match client.get_path(&self.object().path(), &action)? {
            Some(body) => self.stored(&body)?,
            None => Known { says: None, intact: false, version: String::new() },
        });
        Ok(())
    }

    /// What a stored slice (as read, or a write's answer) says: the first
    /// address of its first endpoint (anything else is not opstatus's, and
    /// is written over by the leader), whether the rest is as this pod
    /// writes it, and its version. Only those fields are parsed.
    fn stored(&self, body: &[u8]) -> Result<Known, KubeError> {
        let judged = (|| {
            let slice = Fields::parse(body)?;
            let metadata = slice.object("metadata")?;
            // Small lists, parsed whole.
            let endpoints: Vec<Value> = slice.get("endpoints")?.unwrap_or_default();
            let addresses = endpoints.first().and_then(|e| e["addresses"].as_array()).map_or(&[][..], Vec::as_slice);
            let ports: Vec<Value> = slice.get("ports")?.unwrap_or_default();
            let theirs =
                ports.iter().map(|p| (p["name"].as_str().unwrap_or(""), p["port"].as_u64(), p["protocol"].as_str()));
            let ours = self.ports.iter().map(|p| (p.name.as_str(), Some(u64::from(p.port)), Some(p.protocol)));
            let intact = theirs.eq(ours)
                && endpoints.len() <= 1
                && addresses.len() <= 1
                && slice.get::<String>("addressType")?.as_deref() == Some(family(self.ip))
                && metadata.object("labels")?.get::<String>("kubernetes.io/service-name")?.as_ref()
                    == Some(&self.service);
            // An address that is no IP is someone else's: not this pod.
            let says = addresses
                .first()
                .map(|a| a.as_str().and_then(|a| a.parse().ok()).unwrap_or(IpAddr::from([0, 0, 0, 0])));
            let version = metadata.get::<String>("resourceVersion")?.unwrap_or_default();
            Ok(Known { says, intact, version: crate::util::text::sanitize(&version, 64) })
        })();
        judged.map_err(|e| unreadable(&format!("the EndpointSlice {}/{}", self.namespace, self.service), &e))
    }

    /// The whole slice as opstatus writes it.
    fn body(&self, points_at: Says, version: Option<&str>) -> Value {
        let family = family(self.ip);
        let ports: Vec<Value> =
            self.ports.iter().map(|p| json!({"name": p.name, "port": p.port, "protocol": p.protocol})).collect();
        let endpoints: Vec<Value> = points_at
            .iter()
            .map(|ip| {
                json!({
                    "addresses": [ip.to_string()],
                    "conditions": {"ready": true, "serving": true, "terminating": false},
                    "targetRef": {"kind": "Pod", "namespace": self.namespace, "name": self.pod},
                })
            })
            .collect();
        let mut metadata = json!({
            "name": self.service,
            "namespace": self.namespace,
            "labels": {
                "kubernetes.io/service-name": self.service,
                "endpointslice.kubernetes.io/managed-by": MANAGER,
            },
        });
        if let Some(version) = version.filter(|v| !v.is_empty()) {
            metadata["resourceVersion"] = json!(version);
        }
        json!({
            "apiVersion": "discovery.k8s.io/v1",
            "kind": "EndpointSlice",
            "metadata": metadata,
            "addressType": family,
            "endpoints": endpoints,
            "ports": ports,
        })
    }

    /// Why the slice cannot be kept, while it cannot: a problem of the
    /// status (`degraded`: the status itself is still published).
    pub(crate) fn problem(&self) -> Option<Problem> {
        self.failure.get().map(|why| Problem::degraded(Rule::Publishing, why.to_string()))
    }
}

/// The slice's `addressType` for `ip`.
fn family(ip: IpAddr) -> &'static str {
    if ip.is_ipv4() { "IPv4" } else { "IPv6" }
}

#[cfg(test)]
mod tests {
    use super::*;

    const ME: &str = "op-0";

    fn ip(s: &str) -> IpAddr {
        s.parse().unwrap()
    }

    #[test]
    fn the_leader_points_the_slice_at_its_pod_and_only_its_pod_empties_it_when_nobody_leads() {
        let me = ip("10.0.0.7");
        let other = ip("10.0.0.9");
        // The leader: at its pod, whatever was known (or not yet read).
        for known in [None, Some(None), Some(Some(other)), Some(Some(me))] {
            assert_eq!(wanted(Leading::Pod(ME), ME, me, known), Some(Some(me)), "{known:?}");
        }
        // Another pod leads: its sidecar writes; this one leaves it.
        for known in [None, Some(None), Some(Some(other)), Some(Some(me))] {
            assert_eq!(wanted(Leading::Pod("op-1"), ME, me, known), None, "{known:?}");
        }
        // Nobody leads: emptied by the sidecar whose pod it points at.
        assert_eq!(wanted(Leading::Nobody, ME, me, Some(Some(me))), Some(None));
        assert_eq!(wanted(Leading::Nobody, ME, me, Some(Some(other))), None);
        assert_eq!(wanted(Leading::Nobody, ME, me, Some(None)), None);
        // Unknown (not read, failing reads): nobody touches it.
        assert_eq!(wanted(Leading::Unknown, ME, me, Some(Some(me))), None);
    }

    #[test]
    fn the_pod_ip_is_required_and_checked() {
        assert_eq!(pod_ip(Some("10.1.2.3")), Ok(ip("10.1.2.3")));
        assert_eq!(pod_ip(Some("fd00::1")), Ok(ip("fd00::1")));
        let missing = pod_ip(None).unwrap_err();
        assert!(missing.contains("POD_IP is not set") && missing.contains("status.podIP"), "{missing}");
        let bad = pod_ip(Some("10.1.2")).unwrap_err();
        assert!(bad.starts_with(r#"--leader-service: POD_IP "10.1.2" is not an IP address"#), "{bad}");
        assert!(pod_ip(Some("")).is_err());
        for unreachable in ["127.0.0.1", "::1", "0.0.0.0", "::", "224.0.0.1"] {
            let refused = pod_ip(Some(unreachable)).unwrap_err();
            assert!(refused.contains("the API server refuses it in an EndpointSlice"), "{refused}");
        }
    }

    #[test]
    fn ports_are_name_port_protocol_and_bad_ones_are_refused() {
        let port = |name: &str, port, protocol| ServicePort { name: name.into(), port, protocol };
        assert_eq!(parse_port("http:8080/TCP"), Ok(port("http", 8080, "TCP")));
        assert_eq!(parse_port("8443"), Ok(port("", 8443, "TCP")));
        assert_eq!(parse_port("dns:53/UDP"), Ok(port("dns", 53, "UDP")));
        assert_eq!(parse_port("s:9/SCTP"), Ok(port("s", 9, "SCTP")));
        for bad in
            ["", "0", "65536", "http:", ":80", "http:80/tcp", "http:80/ICMP", "Http:80", "a b:80", "+80", "8080x"]
        {
            assert!(parse_port(bad).is_err(), "{bad:?}");
        }
    }

    #[test]
    fn the_slice_names_its_service_and_family_and_empties_only_on_the_version_seen() {
        let mut slice = slice("fd00::7");
        let body = slice.body(Some(ip("fd00::7")), Some("41"));
        assert_eq!(body["metadata"]["labels"]["kubernetes.io/service-name"], "op-leader");
        assert_eq!(body["metadata"]["labels"]["endpointslice.kubernetes.io/managed-by"], "opstatus");
        assert_eq!(body["addressType"], "IPv6");
        assert_eq!(body["endpoints"][0]["addresses"], json!(["fd00::7"]));
        assert_eq!(body["endpoints"][0]["targetRef"], json!({"kind": "Pod", "namespace": "ops", "name": ME}));
        assert_eq!(body["ports"], json!([{"name": "http", "port": 8080, "protocol": "TCP"}]));
        let empty = slice.body(None, Some("41"));
        assert_eq!(
            (empty["endpoints"].clone(), empty["metadata"]["resourceVersion"].clone()),
            (json!([]), json!("41"))
        );
        slice.ip = ip("10.1.2.3");
        assert_eq!(slice.body(None, None)["addressType"], "IPv4");
        assert!(slice.body(None, None)["metadata"].get("resourceVersion").is_none());
    }

    fn slice(ip: &str) -> LeaderEndpoints {
        let port = ServicePort { name: "http".into(), port: 8080, protocol: "TCP" };
        LeaderEndpoints::new("ops".into(), "op-leader".into(), vec![port], ME.into(), ip.parse().unwrap())
    }

    #[test]
    fn a_stored_slice_says_its_first_address_and_version_and_whether_the_rest_is_ours() {
        let ours = slice("10.0.0.7");
        let judge = |json: &str| ours.stored(json.as_bytes()).unwrap();
        let labels = r#""labels":{"kubernetes.io/service-name":"op-leader","other":"x"}"#;
        let port = r#""ports":[{"name":"http","port":8080,"protocol":"TCP"}]"#;
        let stored = format!(
            r#"{{"metadata":{{"resourceVersion":"9",{labels}}},"addressType":"IPv4",{port},"endpoints":[{{"addresses":["10.0.0.7"]}}]}}"#
        );
        assert_eq!(judge(&stored), Known { says: Some(ip("10.0.0.7")), intact: true, version: "9".into() });
        // The API writes an empty list as null.
        let empty = format!(
            r#"{{"metadata":{{"resourceVersion":"10",{labels}}},"addressType":"IPv4",{port},"endpoints":null}}"#
        );
        assert_eq!((judge(&empty).says, judge(&empty).intact), (None, true));
        let foreign = stored.replace("10.0.0.7", "not-an-ip");
        assert_eq!(judge(&foreign).says, Some(ip("0.0.0.0")), "someone else's: not this pod");
        // Edited: each is written again by the leader.
        for edited in [
            stored.replace("8080", "9090"),
            stored.replace(r#""http""#, r#""metrics""#),
            stored.replace(port, r#""ports":[]"#),
            stored.replace("IPv4", "IPv6"),
            stored.replace(r#""kubernetes.io/service-name":"op-leader","#, ""),
            stored.replace(r#"["10.0.0.7"]"#, r#"["10.0.0.7","10.0.0.8"]"#),
        ] {
            assert!(!judge(&edited).intact, "{edited}");
        }
        assert!(ours.stored(b"{").is_err());
    }

    #[test]
    fn an_ipv4_mapped_pod_ip_is_refused_naming_its_ipv4_form() {
        let mapped = pod_ip(Some("::ffff:10.0.0.5")).unwrap_err();
        assert!(mapped.contains("is an IPv4 address written as IPv6 (IPv4-mapped): give it as 10.0.0.5"), "{mapped}");
    }
}
