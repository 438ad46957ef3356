//! Replays every committed fuzz corpus file (fuzz/corpus/TARGET/*) through
//! the same code the fuzzers exercise, so a normal `cargo test` keeps every
//! input the fuzzers ever found interesting from regressing.

use crate::exercise;

use std::path::Path;

/// A fuzz target's name and the function its inputs go through.
type Target = (&'static str, fn(&[u8]));

const TARGETS: [Target; 9] = [
    ("reader", exercise::reader),
    ("kubeconfig", exercise::kubeconfig),
    ("http_request", exercise::http_request),
    ("retry_after", exercise::retry_after),
    ("registration_answer", exercise::registration_answer),
    ("expr", exercise::expr),
    ("status_configmap", exercise::status_configmap),
    ("watch_event", exercise::watch_event),
    ("pod_status", exercise::pod_status),
];

#[test]
fn every_committed_fuzz_input_replays_cleanly() {
    for (target, exercise) in TARGETS {
        let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("fuzz/corpus").join(target);
        let mut count = 0;
        for entry in std::fs::read_dir(&dir).unwrap_or_else(|e| panic!("{}: {e}", dir.display())) {
            let path = entry.unwrap().path();
            let data = std::fs::read(&path).unwrap();
            // A panic names the input that caused it.
            let result = std::panic::catch_unwind(|| exercise(&data));
            assert!(result.is_ok(), "{target}: {} panics", path.display());
            count += 1;
        }
        assert!(count >= 5, "{target}: only {count} corpus files");
        println!("{target}: {count} inputs replayed");
    }
}
