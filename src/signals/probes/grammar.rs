//! The probes' grammar: `--probe GROUP/VERSION/RESOURCE:Upgradeable=EXPR[;Important=EXPR]`
//! and the same read from a CRD's `olm.operatorframework.io/condition.*`
//! annotations. Pure.

use crate::expr::{Expr, Grammar};
use crate::kube::names::{check_dns_label, check_dns_subdomain};
use serde::Deserialize;

/// The condition types the probes publish.
pub(crate) const UPGRADEABLE: &str = "Upgradeable";
pub(crate) const IMPORTANT: &str = "Important";

/// The CRD annotations that carry the expressions (OLM's Probe design).
pub(crate) const UPGRADEABLE_ANNOTATION: &str = "olm.operatorframework.io/condition.Upgradeable";
pub(crate) const IMPORTANT_ANNOTATION: &str = "olm.operatorframework.io/condition.Important";

/// One probed resource type and its expressions.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ProbeSpec {
    /// `""` for the core group.
    pub group: String,
    pub version: String,
    /// The plural resource name, e.g. `foos`.
    pub resource: String,
    pub upgradeable: Option<Expr>,
    pub important: Option<Expr>,
    /// How many of its condition types get metrics of their own
    /// (`--condition-metrics-max-types`; 0: none).
    pub condition_types: usize,
}

impl ProbeSpec {
    /// `foos.example.com/v1`-style name for messages: `foos.example.com`.
    pub fn display_name(&self) -> String {
        match self.group.as_str() {
            "" => self.resource.clone(),
            g => format!("{}.{g}", self.resource),
        }
    }

    /// `/apis/GROUP/VERSION` or `/api/v1`.
    pub fn api_path(&self) -> String {
        match self.group.as_str() {
            "" => format!("/api/{}", self.version),
            g => format!("/apis/{g}/{}", self.version),
        }
    }
}

/// Parses `GROUP/VERSION/RESOURCE:Upgradeable=EXPR[;Important=EXPR]`
/// (`VERSION/RESOURCE` for the core group). The error says which part is
/// wrong and, for an expression, the column.
pub fn parse_probe(text: &str) -> Result<ProbeSpec, String> {
    let (target, exprs) =
        text.split_once(':').ok_or("is not GROUP/VERSION/RESOURCE:Upgradeable=EXPR[;Important=EXPR]")?;
    let parts: Vec<&str> = target.split('/').collect();
    let (group, version, resource) = match parts.as_slice() {
        [g, v, r] => (*g, *v, *r),
        // The core group's only version is `v1`: a first part that is no
        // Kubernetes version is a group whose version was left out, not a
        // core-group version (`apps/deployments`, `example.com/foos`).
        [v, r] if is_kube_version(v) => ("", *v, *r),
        [g, r] => return Err(format!("{target:?} has no version: write GROUP/VERSION/RESOURCE, e.g. {g}/v1/{r}")),
        _ => return Err(format!("{target:?} is not GROUP/VERSION/RESOURCE (or VERSION/RESOURCE for the core group)")),
    };
    if !group.is_empty() {
        check_dns_subdomain(group).map_err(|why| format!("group {group:?}: {why}"))?;
    }
    check_dns_label(version).map_err(|why| format!("version {version:?}: {why}"))?;
    check_dns_label(resource).map_err(|why| format!("resource {resource:?}: {why}"))?;
    let mut spec = ProbeSpec {
        group: group.into(),
        version: version.into(),
        resource: resource.into(),
        upgradeable: None,
        important: None,
        condition_types: super::table::ROW_TYPES,
    };
    for part in exprs.split(';') {
        let (key, expr) =
            part.split_once('=').ok_or_else(|| format!("{part:?} is not Upgradeable=EXPR or Important=EXPR"))?;
        let (slot, grammar) = match key.trim() {
            UPGRADEABLE => (&mut spec.upgradeable, Grammar::Full),
            IMPORTANT => (&mut spec.important, Grammar::OrOnly),
            other => return Err(format!("unknown condition {other:?} (Upgradeable or Important)")),
        };
        if slot.is_some() {
            return Err(format!("{} is given twice", key.trim()));
        }
        *slot = Some(Expr::parse(expr, grammar).map_err(|e| format!("{} expression {expr:?}: {e}", key.trim()))?);
    }
    Ok(spec)
}

/// `v1`, `v2beta1`, `v1alpha3`: the form Kubernetes gives its API versions.
fn is_kube_version(text: &str) -> bool {
    let Some(rest) = text.strip_prefix('v') else { return false };
    let digits = rest.bytes().take_while(u8::is_ascii_digit).count();
    let (number, stage) = rest.split_at(digits);
    let stage_ok = match stage.strip_prefix("alpha").or_else(|| stage.strip_prefix("beta")) {
        Some(n) => !n.is_empty() && n.bytes().all(|b| b.is_ascii_digit()),
        None => stage.is_empty(),
    };
    !number.is_empty() && !number.starts_with('0') && stage_ok
}

/// What a CRD says about probing its resources.
#[derive(Deserialize)]
struct Crd {
    metadata: CrdMeta,
    spec: CrdSpec,
}

#[derive(Deserialize)]
struct CrdMeta {
    name: String,
    #[serde(default)]
    annotations: std::collections::BTreeMap<String, String>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct CrdSpec {
    group: String,
    names: CrdNames,
    scope: String,
    versions: Vec<CrdVersion>,
}

#[derive(Deserialize)]
struct CrdNames {
    plural: String,
    kind: String,
}

#[derive(Deserialize)]
struct CrdVersion {
    name: String,
    served: bool,
    storage: bool,
}

/// The probe a CRD declares in its annotations, with the resource type
/// resolved; `Ok(None)` when it declares none.
pub(crate) fn spec_from_crd(body: &[u8]) -> Result<Option<(ProbeSpec, ResourceType)>, String> {
    let crd: Crd = serde_json::from_slice(body).map_err(|e| format!("is not a CustomResourceDefinition: {e}"))?;
    let annotation = |key: &str, grammar| {
        crd.metadata
            .annotations
            .get(key)
            .map(|text| Expr::parse(text, grammar).map_err(|e| format!("annotation {key} {text:?}: {e}")))
            .transpose()
    };
    let upgradeable = annotation(UPGRADEABLE_ANNOTATION, Grammar::Full)?;
    let important = annotation(IMPORTANT_ANNOTATION, Grammar::OrOnly)?;
    if upgradeable.is_none() && important.is_none() {
        return Ok(None);
    }
    // The storage version is served in every valid CRD; fall back to any
    // served one.
    let version = crd
        .spec
        .versions
        .iter()
        .find(|v| v.served && v.storage)
        .or_else(|| crd.spec.versions.iter().find(|v| v.served))
        .ok_or_else(|| format!("{} serves no version", crd.metadata.name))?;
    let spec = ProbeSpec {
        group: crd.spec.group,
        version: version.name.clone(),
        resource: crd.spec.names.plural,
        upgradeable,
        important,
        condition_types: super::table::ROW_TYPES,
    };
    let kind = ResourceType { kind: crd.spec.names.kind, namespaced: crd.spec.scope == "Namespaced" };
    Ok(Some((spec, kind)))
}

/// What discovery says about a resource: its kind (for messages) and scope.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct ResourceType {
    pub kind: String,
    pub namespaced: bool,
}

#[cfg(test)]
mod tests {
    use super::*;

    fn expr(text: &str) -> Expr {
        Expr::parse(text, Grammar::Full).unwrap()
    }

    fn probe(text: &str) -> ProbeSpec {
        parse_probe(text).unwrap_or_else(|e| panic!("{text}: {e}"))
    }

    #[test]
    fn parses_the_probe_flag() {
        let p = probe("example.com/v1/foos:Upgradeable=!Migrating;Important=BadConnectivity || UnhealthyDatabase");
        assert_eq!((p.group.as_str(), p.version.as_str(), p.resource.as_str()), ("example.com", "v1", "foos"));
        assert_eq!(p.upgradeable, Some(expr("!Migrating")));
        assert_eq!(p.important, Some(expr("BadConnectivity || UnhealthyDatabase")));
        let core = probe("v1/configmaps:Important=Broken");
        assert_eq!((core.group.as_str(), core.api_path()), ("", "/api/v1".to_string()));
        assert_eq!(core.display_name(), "configmaps");
        assert_eq!(probe("example.com/v1/foos:Upgradeable=A").display_name(), "foos.example.com");
    }

    #[test]
    fn probe_flag_errors_say_what_and_where() {
        let cases = [
            ("example.com/v1/foos", "is not GROUP/VERSION/RESOURCE:Upgradeable=EXPR[;Important=EXPR]"),
            ("foos:Upgradeable=A", "\"foos\" is not GROUP/VERSION/RESOURCE (or VERSION/RESOURCE for the core group)"),
            ("Example.com/v1/foos:Upgradeable=A", "group \"Example.com\": only lowercase letters"),
            ("example.com/v1/foos:Ready=A", "unknown condition \"Ready\" (Upgradeable or Important)"),
            ("example.com/v1/foos:Upgradeable", "\"Upgradeable\" is not Upgradeable=EXPR or Important=EXPR"),
            ("example.com/v1/foos:Upgradeable=A;Upgradeable=B", "Upgradeable is given twice"),
            (
                "example.com/v1/foos:Upgradeable=!Migrating &&",
                "Upgradeable expression \"!Migrating &&\": column 14: expected a condition name, '!' or '(', found the end",
            ),
            // A group with no version is not read as a core-group version.
            (
                "example.com/foos:Upgradeable=A",
                "\"example.com/foos\" has no version: write GROUP/VERSION/RESOURCE, e.g. example.com/v1/foos",
            ),
            (
                "apps/deployments:Upgradeable=A",
                "\"apps/deployments\" has no version: write GROUP/VERSION/RESOURCE, e.g. apps/v1/deployments",
            ),
            (
                "example.com/v1/foos:Important=A && B",
                "Important expression \"A && B\": column 3: only '||' is allowed in an Important expression",
            ),
        ];
        for (text, want) in cases {
            let got = parse_probe(text).unwrap_err();
            assert!(got.starts_with(want), "{text}: {got}");
        }
    }

    #[test]
    fn reads_the_probe_from_crd_annotations() {
        let crd = serde_json::json!({
            "metadata": {"name": "foos.example.com", "annotations": {
                UPGRADEABLE_ANNOTATION: "!Migrating", IMPORTANT_ANNOTATION: "Broken || Lost"}},
            "spec": {"group": "example.com", "scope": "Namespaced", "names": {"plural": "foos", "kind": "Foo"},
                     "versions": [{"name": "v1alpha1", "served": true, "storage": false},
                                  {"name": "v1", "served": true, "storage": true}]}
        });
        let (spec, kind) = spec_from_crd(crd.to_string().as_bytes()).unwrap().unwrap();
        assert_eq!((spec.version.as_str(), spec.resource.as_str()), ("v1", "foos"));
        assert_eq!(kind, ResourceType { kind: "Foo".into(), namespaced: true });
        assert_eq!(spec.important, Some(expr("Broken || Lost")));

        let mut plain = crd.clone();
        plain["metadata"]["annotations"] = serde_json::json!({"other": "x"});
        assert_eq!(spec_from_crd(plain.to_string().as_bytes()).unwrap(), None);

        let mut bad = crd;
        bad["metadata"]["annotations"][UPGRADEABLE_ANNOTATION] = "!(Migrating".into();
        assert_eq!(
            spec_from_crd(bad.to_string().as_bytes()).unwrap_err(),
            "annotation olm.operatorframework.io/condition.Upgradeable \"!(Migrating\": \
             column 12: expected ')' to close the '(' at column 2, found the end"
        );
        assert!(spec_from_crd(b"{}").unwrap_err().starts_with("is not a CustomResourceDefinition"));
    }
}
