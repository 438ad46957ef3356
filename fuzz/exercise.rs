//! What each fuzz target feeds its input to. Shared by the libFuzzer targets
//! (fuzz/fuzz_targets) and by `tests/fuzz_corpus.rs`, which replays every
//! committed corpus file in a normal `cargo test`. Each function also checks
//! properties that must hold for any input, beyond "does not panic".

use std::time::{Duration, SystemTime, UNIX_EPOCH};

fn now() -> SystemTime {
    UNIX_EPOCH + Duration::from_secs(1_762_788_600)
}

/// The reader: a ConfigMap body, then its `status` value.
pub fn reader(data: &[u8]) {
    if let Ok(status) = opstatus::testing::status_of_configmap(data) {
        let _ = opstatus::testing::interpret(Some(&status), now());
    }
    if let Ok(text) = std::str::from_utf8(data)
        && let Ok(reading) = opstatus::testing::interpret(Some(text), now())
    {
        // Whatever was read, what is shown is one of the known values.
        let status = reading.status.as_ref().expect("a parsed status");
        assert!(matches!(status.mode.as_str(), "operated" | "enabled"));
        assert!(matches!(status.tier.as_str(), "free" | "pro"));
        assert!(matches!(status.health.as_str(), "healthy" | "degraded" | "unhealthy"));
        let _ = opstatus::testing::render_text(&reading, "cm", "ns", now());
        serde_json::to_string(&reading).expect("a reading serialises");
    }
}

/// The kubeconfig YAML subset and its interpretation.
pub fn kubeconfig(data: &[u8]) {
    let Ok(text) = std::str::from_utf8(data) else { return };
    if let Ok(doc) = opstatus::testing::parse_yaml(text) {
        let _ = opstatus::testing::kubeconfig_credentials(&[("/nonexistent".into(), doc)], None);
    }
}

/// The probe endpoint's request parser and router.
pub fn http_request(data: &[u8]) {
    use opstatus::testing::{Parsed, parse_request};
    let parsed = parse_request(data);
    if let Parsed::Request { method, path } = &parsed {
        assert!(path.starts_with('/') && !path.contains('?'));
        assert!(!method.is_empty() && method.bytes().all(|b| b.is_ascii_uppercase()));
    }
    if data.len() >= opstatus::testing::MAX_HEAD
        && !data.windows(2).any(|w| w == b"\n\n")
        && !data.windows(4).any(|w| w == b"\r\n\r\n")
    {
        assert_eq!(parsed, Parsed::TooLarge);
    }
}

/// `Retry-After` values and RFC 3339 timestamps.
pub fn retry_after(data: &[u8]) {
    let Ok(text) = std::str::from_utf8(data) else { return };
    let _ = opstatus::testing::parse_retry_after(text, now());
    if let Some(t) = opstatus::testing::parse_rfc3339(text) {
        // Anything parsed formats back to a time that parses to the same second.
        let again =
            opstatus::testing::parse_rfc3339(&opstatus::testing::format_rfc3339(t)).expect("formatted time parses");
        let secs = |t: SystemTime| t.duration_since(UNIX_EPOCH).unwrap().as_secs();
        assert_eq!(secs(again), secs(t));
    }
}

/// kube9-server's answers to registration.
pub fn registration_answer(data: &[u8]) {
    let (code, body) = match data.split_first() {
        Some((c, rest)) => (100 + u16::from(*c) * 2, rest),
        None => (200, data),
    };
    let _ = opstatus::testing::classify(code, body, None);
}

/// The condition expressions (`!A && (B || C)`) and the `--probe` syntax.
pub fn expr(data: &[u8]) {
    use opstatus::testing::{Expr, Grammar, Truth};
    let Ok(text) = std::str::from_utf8(data) else { return };
    let _ = opstatus::testing::parse_probe(text);
    let full = Expr::parse(text, Grammar::Full);
    if let Ok(or_only) = Expr::parse(text, Grammar::OrOnly) {
        // The Important grammar is a subset of the full one.
        assert_eq!(full.as_ref(), Ok(&or_only));
    }
    let Ok(expr) = full else { return };
    // Some conditions true, some false, some unknown; `!` flips the result
    // and keeps its explanation.
    let lookup = |name: &str| match name.len() % 3 {
        0 => Truth::True,
        1 => Truth::False,
        _ => Truth::Unknown,
    };
    let (truth, terms) = expr.evaluate(&lookup);
    let (negated, negated_terms) = Expr::Not(Box::new(expr.clone())).evaluate(&lookup);
    let flipped = match truth {
        Truth::True => Truth::False,
        Truth::False => Truth::True,
        Truth::Unknown => Truth::Unknown,
    };
    assert_eq!((negated, negated_terms), (flipped, terms.clone()));
    assert!(!terms.is_empty() && terms.len() <= expr.conditions().len());
}

/// Text from the cluster as it may reach a log, a terminal or a published
/// object: printable, and within `max` bytes.
fn assert_shown_safely(text: &str, max: usize) {
    assert!(text.len() <= max, "{} bytes, over {max}", text.len());
    assert!(!text.chars().any(char::is_control), "a control character in {text:?}");
}

/// The status ConfigMap as a read or a write's answer gives it: the lock's
/// holder and another writer of the status key, sanitised and bounded.
pub fn status_configmap(data: &[u8]) {
    if let Some((holder, other)) = opstatus::testing::status_configmap_parties(data) {
        holder.iter().for_each(|h| assert_shown_safely(h, 253));
        // The manager and its operation, each at most 128 bytes.
        other.iter().for_each(|w| assert_shown_safely(w, 2 * 128 + 3));
    }
}

/// Watch lines of a probed collection, one per input line: whatever the
/// stream says, what is reported is printable and bounded.
pub fn watch_event(data: &[u8]) {
    let lines: Vec<&[u8]> = data.split(|b| *b == b'\n').take(64).collect();
    let probe = "example.com/v1/foos:Upgradeable=!Migrating;Important=Degraded";
    let (outcomes, problem) = opstatus::testing::apply_watch_lines(probe, &lines);
    for why in outcomes.iter().filter_map(|o| o.as_ref().err()) {
        assert_shown_safely(why, 4096);
    }
    problem.iter().for_each(|p| assert_shown_safely(p, 4096));
}

/// A Pod's status as `--watch-container` judges it: kubelet's words
/// reach the status printable and bounded.
pub fn pod_status(data: &[u8]) {
    if let Some(verdict) = opstatus::testing::judge_container(data, "manager", now()) {
        match verdict {
            Ok(Some(why)) | Err(why) => assert_shown_safely(&why, 1024),
            Ok(None) => {}
        }
    }
}
