//! opstatus's probe as a Rust user would write it with kube-rs: a
//! `reflector` over a `watcher` of the Foos in one namespace (the store
//! holds the objects, as kube-rs users have them; the watcher's defaults:
//! paged quorum lists of 500, bookmarks, the default backoff), evaluating
//! `Upgradeable=!Migrating` over the store once the first list is done and
//! on every change after, and writing the OperatorCondition (a GET, then an
//! `update` of its `spec.conditions`) when the answer flips. Arguments: the
//! Foos' namespace and the OperatorCondition's name (in the service
//! account's namespace). In-cluster style, as kube_writer.rs. Prints one
//! line when the first list is done (the benchmark reads the rest from the
//! audit log). Tokio's current-thread runtime.
use futures::StreamExt;
use kube::api::{Api, ApiResource, DynamicObject, GroupVersionKind, PostParams};
use kube::config::{AuthInfo, Config};
use kube::runtime::reflector::{self, store::Writer};
use kube::runtime::watcher::{self, Event};
use kube::runtime::WatchStreamExt;
use rustls::pki_types::CertificateDer;
use rustls::pki_types::pem::PemObject;
use std::time::{Instant, SystemTime, UNIX_EPOCH};

/// `Upgradeable=!Migrating`: `Some(false)` when a Foo's `Migrating` is
/// "True" (blocking), unknown never blocks.
fn blocking(foo: &DynamicObject) -> bool {
    let conditions = foo.data.get("status").and_then(|s| s.get("conditions")).and_then(|c| c.as_array());
    conditions.is_some_and(|list| list.iter().any(|c| c["type"] == "Migrating" && c["status"] == "True"))
}

fn rfc3339_now() -> String {
    let secs = SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |d| d.as_secs()) as i64;
    let (days, rem) = (secs.div_euclid(86_400), secs.rem_euclid(86_400));
    // Howard Hinnant's civil-from-days.
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    let y = yoe + era * 400 + i64::from(m <= 2);
    format!("{y:04}-{m:02}-{d:02}T{:02}:{:02}:{:02}Z", rem / 3600, rem % 3600 / 60, rem % 60)
}

#[tokio::main(flavor = "current_thread")]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let sa = std::env::var("OPSTATUS_SERVICE_ACCOUNT_DIR")?;
    let mut args = std::env::args().skip(1);
    let (foo_ns, oc_name) = (args.next().ok_or("FOO_NAMESPACE")?, args.next().ok_or("OPERATOR_CONDITION")?);
    let host = std::env::var("KUBERNETES_SERVICE_HOST")?;
    let port = std::env::var("KUBERNETES_SERVICE_PORT")?;
    let mut config = Config::new(format!("https://{host}:{port}").parse()?);
    let pem = std::fs::read(format!("{sa}/ca.crt"))?;
    let roots: Result<Vec<_>, _> = CertificateDer::pem_slice_iter(&pem).map(|c| c.map(|c| c.to_vec())).collect();
    config.root_cert = Some(roots?);
    config.auth_info = AuthInfo { token_file: Some(format!("{sa}/token")), ..Default::default() };
    let namespace = std::fs::read_to_string(format!("{sa}/namespace"))?.trim().to_string();
    config.default_namespace = namespace.clone();
    let client = kube::Client::try_from(config)?;

    let foos = ApiResource::from_gvk_with_plural(&GroupVersionKind::gvk("example.com", "v1", "Foo"), "foos");
    let ocs = ApiResource::from_gvk_with_plural(
        &GroupVersionKind::gvk("operators.coreos.com", "v2", "OperatorCondition"),
        "operatorconditions",
    );
    let foo_api: Api<DynamicObject> = Api::namespaced_with(client.clone(), &foo_ns, &foos);
    let oc_api: Api<DynamicObject> = Api::namespaced_with(client, &namespace, &ocs);
    let writer = Writer::new(foos.clone());
    let store = writer.as_reader();
    let events = reflector::reflector(writer, watcher::watcher(foo_api, watcher::Config::default())).default_backoff();
    let mut events = std::pin::pin!(events);
    let (started, mut ready, mut written): (Instant, bool, Option<bool>) = (Instant::now(), false, None);
    while let Some(event) = events.next().await {
        match event {
            Ok(Event::InitDone) => {
                if !ready {
                    eprintln!("listed {} Foos in {:.2} s", store.state().len(), started.elapsed().as_secs_f64());
                }
                ready = true;
            }
            Ok(Event::Apply(_) | Event::Delete(_)) if ready => {}
            Ok(_) => continue,
            Err(e) => {
                eprintln!("watch: {e}");
                continue;
            }
        }
        let blockers = store.state().iter().filter(|foo| blocking(foo)).count();
        let upgradeable = blockers == 0;
        if written == Some(upgradeable) {
            continue;
        }
        let (status, reason, message) = if upgradeable {
            ("True", "AsExpected", format!("No resource blocks an upgrade ({} checked)", store.state().len()))
        } else {
            ("False", "NotUpgradeable", format!("Upgrade blocked by {blockers} resources"))
        };
        let mut oc = oc_api.get(&oc_name).await?;
        let condition = serde_json::json!({"type": "Upgradeable", "status": status, "reason": reason,
            "message": message, "lastTransitionTime": rfc3339_now()});
        let spec = oc.data.get_mut("spec").and_then(|s| s.as_object_mut()).ok_or("an OperatorCondition without spec")?;
        let mut conditions: Vec<serde_json::Value> =
            spec.get("conditions").and_then(|c| c.as_array()).cloned().unwrap_or_default();
        conditions.retain(|c| c["type"] != "Upgradeable");
        conditions.push(condition);
        spec.insert("conditions".into(), conditions.into());
        oc_api.replace(&oc_name, &PostParams::default(), &oc).await?;
        written = Some(upgradeable);
    }
    Ok(())
}
