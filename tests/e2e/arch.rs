//! End to end, real kube-apiserver, once per platform the images ship: the
//! static x86_64 binary natively, the arm64 and armv7 ones under
//! qemu-user, each "as in a pod" (service-account directory, in-cluster
//! environment, name-restricted RBAC from manifests/base): the first write,
//! heartbeats of one request each, the probe endpoint, `opstatus probe` on
//! the ready file, and SIGTERM publishing the final status. And the x86_64
//! binary's steady RSS as the shipped sidecar runs it, against its budget. And
//! the static build's check of its link order list (`build/text-order.ld`)
//! on each binary's link map.

use crate::support;

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, SystemTime};
use support::arch::{ARM64, ARMV7, Arch, X86_64};
use support::control_plane::{ROOT, shared};
use support::http::{endpoint_from_log, get};
use support::{TempDir, wait_for};

const CM: &str = "kube9-operator-status";

fn as_in_a_pod(arch: &Arch) {
    let size = arch.assert_static_within_budget();
    let cp = shared();
    let pod = cp.deploy(&format!("arch-{}", arch.label.replace('_', "-")));
    let env = cp.pod_env(&pod);
    let run = TempDir::new("arch-run");
    let ready = run.path().join("ready");
    let ready = ready.to_str().unwrap();

    let out = arch.run_to_end(&["--version"], &env, Duration::from_secs(10));
    assert_eq!(String::from_utf8_lossy(&out.stdout).trim(), format!("opstatus {}", env!("CARGO_PKG_VERSION")));

    let started = SystemTime::now();
    let mut agent = arch.start(
        &["run", "--interval", "1s", "--listen", "127.0.0.1:0", "--ready-file", ready, "--operator-version", "4.5.6"],
        &env,
    );
    let addr = wait_for(Duration::from_secs(20), Duration::from_millis(20), || endpoint_from_log(&agent.stderr()))
        .expect("the endpoint address in the log");

    // The first write creates the status; then the heartbeats move it on.
    let first = wait_for(Duration::from_secs(20), Duration::from_millis(50), || cp.status_document(&pod.namespace, CM))
        .expect("the first write");
    assert_eq!((first["version"].as_str(), first["health"].as_str()), (Some("4.5.6"), Some("healthy")));
    let mut seen: Vec<String> = Vec::new();
    let enough = wait_for(Duration::from_secs(30), Duration::from_millis(300), || {
        let doc = cp.status_document(&pod.namespace, CM)?;
        let t = doc["lastUpdate"].as_str()?.to_string();
        if seen.last() != Some(&t) {
            seen.push(t);
        }
        (seen.len() >= 5).then_some(())
    });
    assert!(enough.is_some(), "{}: lastUpdate moved only through {seen:?}", arch.label);

    // Kubelet's view: the endpoint and the exec probe on the ready file.
    let (code, body, took) = get(addr, "/readyz");
    assert_eq!((code, body.trim()), (200, "healthy"), "{}", arch.label);
    assert_eq!(get(addr, "/healthz").0, 200);
    let (code, metrics, _) = get(addr, "/metrics");
    assert_eq!(code, 200);
    assert!(
        metrics.contains(&format!("opstatus_build_info{{version=\"{}\"}} 1", env!("CARGO_PKG_VERSION"))),
        "{metrics}"
    );
    let out = arch.run_to_end(&["probe", "--ready-file", ready], &env, Duration::from_secs(10));
    let line = String::from_utf8_lossy(&out.stdout).to_string();
    assert_eq!(out.status.code(), Some(0), "{}: probe said {line}", arch.label);
    assert!(line.starts_with("ready: health=healthy"), "{line}");

    // Steady memory, for information: under qemu it includes the emulator.
    let rss_kib = std::fs::read_to_string(format!("/proc/{}/status", agent.pid()))
        .unwrap()
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:").map(|v| v.trim().trim_end_matches(" kB").parse::<u64>().unwrap()))
        .unwrap();

    // SIGTERM: exit 0, the final status published, the ready file removed.
    agent.signal("TERM");
    assert_eq!(agent.wait_exit(Duration::from_secs(15)).and_then(|s| s.code()), Some(0), "{}", arch.label);
    let last = cp.status_document(&pod.namespace, CM).unwrap();
    assert_eq!((last["health"].as_str(), last["error"].as_str()), (Some("unhealthy"), Some("Shutting down")));
    assert!(!run.path().join("ready").exists(), "the ready file is removed at exit");
    let out = arch.run_to_end(&["probe", "--ready-file", ready], &env, Duration::from_secs(10));
    assert_eq!(out.status.code(), Some(1), "{}: not ready after exit", arch.label);

    // The first look, then one server-side apply per write (the final
    // status is one of them), on the one name.
    let events = cp.audit_events(&pod.user);
    let writes = agent.stderr().matches("Status updated:").count();
    assert!(writes >= 6, "{writes} writes");
    support::requests::assert_first_look_then_one_write_per_heartbeat(&events, writes, CM);
    let first_write = events[2].received.duration_since(started).unwrap_or_default();
    let how = if arch.qemu.is_some() { "under qemu-user (emulated)" } else { "natively" };
    println!(
        "e2e arch {}: {size} bytes, {how}: first write {:?} after start, {writes} heartbeats, /readyz in {took:?}, \
         steady RSS {rss_kib} KiB{}",
        arch.label,
        first_write,
        if arch.qemu.is_some() { " (emulator included, for information only)" } else { "" }
    );
}

#[test]
fn e2e_arch_x86_64_static_binary_as_in_a_pod() {
    as_in_a_pod(&X86_64);
}

/// Steady RSS of the shipped binary as the shipped sidecar runs it
/// (manifests/components/opstatus: the 60 s default, the operator's health
/// URL checked every 5 s, the probe endpoint, the ready file; no probes),
/// against the 2 MiB budget. Most of it is the binary's own pages, which
/// the kernel maps 64 KiB (or a large folio) at a time around each fault:
/// it holds only while the code a steady agent runs comes first in the
/// binary (`build/text-order.ld`; without it, over 2 MiB). When this fails
/// after a change, `python3 bench/text_order.py` writes that list again.
/// Every page is mapped within a check cycle of the first write (later
/// heartbeats and checks run the same code), so 15 s after it is steady.
const STEADY_RSS_KIB: u64 = 2_048;

#[test]
fn e2e_arch_x86_64_steady_rss_as_shipped_within_2_mib() {
    X86_64.assert_static_within_budget();
    let cp = shared();
    let pod = cp.deploy("arch-rss");
    let operator = support::operator_endpoint::OperatorEndpoint::start(Default::default());
    let run = TempDir::new("arch-rss");
    let ready = run.path().join("ready");
    let args = ["run", "--no-final-status", "--listen", "127.0.0.1:0", "--ready-file", ready.to_str().unwrap()];
    let url = operator.url();
    let mut agent = X86_64.start(&[&args[..], &["--watch-url", &url]].concat(), &cp.pod_env(&pod));
    wait_for(Duration::from_secs(20), Duration::from_millis(50), || cp.status_document(&pod.namespace, CM))
        .expect("the first write");
    std::thread::sleep(Duration::from_secs(15));
    let status = std::fs::read_to_string(format!("/proc/{}/status", agent.pid())).unwrap();
    let kib = |field: &str| {
        let line = status.lines().find_map(|l| l.strip_prefix(field)).unwrap_or_else(|| panic!("{field} in {status}"));
        line.trim().trim_end_matches(" kB").parse::<u64>().unwrap()
    };
    let (rss, file, anon) = (kib("VmRSS:"), kib("RssFile:"), kib("RssAnon:"));
    agent.signal("TERM");
    assert_eq!(agent.wait_exit(Duration::from_secs(15)).and_then(|s| s.code()), Some(0));
    assert!(operator.seen().len() >= 3, "the health URL was checked: {:?}", operator.seen().len());
    println!(
        "e2e arch x86_64 steady RSS as shipped: {rss} KiB ({file} KiB of the binary's pages, {anon} KiB anonymous)"
    );
    assert!(
        rss <= STEADY_RSS_KIB,
        "steady RSS {rss} KiB ({file} KiB file-backed, {anon} KiB anonymous), over {STEADY_RSS_KIB} KiB"
    );
}

#[test]
fn e2e_arch_arm64_under_qemu_as_in_a_pod() {
    as_in_a_pod(&ARM64);
}

#[test]
fn e2e_arch_armv7_under_qemu_as_in_a_pod() {
    as_in_a_pod(&ARMV7);
}

/// `bench/text_order.py --check MAP [LIST]` as `scripts/static-build.sh`
/// runs it: (passed, what it said).
fn text_order_check(map: &Path, list: Option<&Path>) -> (bool, String) {
    let mut check = Command::new("python3");
    check.current_dir(ROOT).arg("bench/text_order.py").arg("--check").arg(map);
    if let Some(list) = list {
        check.arg("--out").arg(list);
    }
    let out = check.output().expect("python3 runs");
    let said = String::from_utf8_lossy(&out.stderr).to_string();
    assert!(matches!(out.status.code(), Some(0 | 1)), "the check crashed: {said}");
    (out.status.success(), said)
}

/// The link map build.rs has the linker write beside `arch`'s binary
/// (after the binary is checked fresh: the map is of the same link).
fn link_map(arch: &Arch) -> PathBuf {
    let map = arch.bin().with_file_name("opstatus.map");
    assert!(map.is_file(), "no link map at {}: build.rs writes it where the list applies", map.display());
    map
}

/// The shipped list names enough of each linked function to pass, and the
/// check counts what it names (so it passes for the list, not for any).
fn assert_text_order_holds(arch: &Arch) {
    let (passed, said) = text_order_check(&link_map(arch), None);
    assert!(passed, "{}: {said}", arch.label);
    assert!(said.contains("entries") && !said.contains(" 0 of "), "{}: {said}", arch.label);
    println!("e2e arch {}: {}", arch.label, said.trim());
}

#[test]
fn e2e_arch_x86_64_text_order_check_fails_on_a_stale_list_or_an_unplaced_one() {
    let map = link_map(&X86_64);
    assert_text_order_holds(&X86_64);
    let dir = support::TempDir::new("text-order");

    // A list of names no function has, as a list goes stale: fails, and
    // says how to write it again.
    let made_up = dir.path().join("made-up.ld");
    let entries: String = (0..200)
        .map(|i| format!("    *(.text._ZN8opstatus9not_a_fn{i}17h* .text.unlikely._ZN8opstatus9not_a_fn{i}17h*)\n"))
        .collect();
    std::fs::write(&made_up, format!("SECTIONS\n{{\n  .text.steady :\n  {{\n{entries}  }}\n}}\n")).unwrap();
    let (passed, said) = text_order_check(&map, Some(&made_up));
    assert!(!passed, "a list of made-up names passed: {said}");
    assert!(said.contains("0 of 200") && said.contains("python3 bench/text_order.py"), "{said}");

    // The shipped list with a fifth of its entries renamed: under the
    // threshold, fails.
    let shipped = std::fs::read_to_string(Path::new(ROOT).join("build/text-order.ld")).unwrap();
    let mut n = 0;
    let part_stale: String = shipped
        .lines()
        .map(|line| {
            let entry = line.trim_start().starts_with("*(");
            n += usize::from(entry);
            if entry && n % 5 == 0 {
                line.replace("*(.text.", "*(.text.gone_").replace(" .text.", " .text.gone_")
            } else {
                line.to_string()
            }
        })
        .map(|line| line + "\n")
        .collect();
    let stale = dir.path().join("stale.ld");
    std::fs::write(&stale, part_stale).unwrap();
    let (passed, said) = text_order_check(&map, Some(&stale));
    assert!(!passed, "a list a fifth stale passed: {said}");

    // A link that did not apply the list (gold, mold): no `.text.steady`.
    let unplaced = dir.path().join("unplaced.map");
    std::fs::write(&unplaced, std::fs::read_to_string(&map).unwrap().replace(".text.steady", ".text.elsewhere"))
        .unwrap();
    let (passed, said) = text_order_check(&unplaced, None);
    assert!(!passed, "a link without .text.steady passed: {said}");
    assert!(said.contains("GNU ld or lld"), "{said}");
}
