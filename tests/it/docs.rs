//! The repository speaks of the product: README, docs, contributing notes,
//! code comments, scripts and manifests say what opstatus does and how to
//! reproduce a figure, never the history of how it got there (sessions,
//! rounds, issue numbers, commit ids).

use std::path::{Path, PathBuf};

const ROOT: &str = env!("CARGO_MANIFEST_DIR");

/// Every text file of the product, but the fetched fixtures (their source
/// commit is their provenance) and this test.
fn files() -> Vec<PathBuf> {
    fn walk(dir: &Path, out: &mut Vec<PathBuf>) {
        for entry in std::fs::read_dir(dir).unwrap() {
            let path = entry.unwrap().path();
            let name = path.file_name().unwrap().to_string_lossy().to_string();
            if path.is_dir() {
                if !["target", ".git", "fixtures", "corpus", "artifacts"].contains(&name.as_str()) {
                    walk(&path, out);
                }
            } else if ["md", "rs", "sh", "py", "yaml", "yml", "toml"].iter().any(|e| name.ends_with(&format!(".{e}")))
                || name == "Containerfile"
            {
                out.push(path);
            }
        }
    }
    let mut out = Vec::new();
    walk(Path::new(ROOT), &mut out);
    out.retain(|p| !p.ends_with("tests/it/docs.rs"));
    assert!(out.len() > 100, "found only {} files", out.len());
    out
}

/// What history sounds like, lowercased.
fn history_in(line: &str) -> Option<&'static str> {
    let lower = line.to_lowercase();
    for phrase in [
        "last session",
        "this session",
        "previous session",
        "next session",
        "end of session",
        "last round",
        "this round",
        "previous round",
        "next round",
        "round two",
        "issue #",
    ] {
        if lower.contains(phrase) {
            return Some(phrase);
        }
    }
    let words: Vec<&str> = lower.split(|c: char| !c.is_ascii_alphanumeric() && c != '#').collect();
    for pair in words.windows(2) {
        if pair[0] == "session" && pair[1].chars().all(|c| c.is_ascii_digit()) && !pair[1].is_empty() {
            return Some("session N");
        }
    }
    for word in &words {
        // `#19`: an issue or pull request number.
        if word.len() > 1 && word.starts_with('#') && word[1..].chars().all(|c| c.is_ascii_digit()) {
            return Some("#N");
        }
    }
    None
}

/// A word that looks like an abbreviated commit id: 7 to 12 hex digits,
/// letters and digits both (prose only: code has hex constants).
fn commit_id_in(line: &str) -> Option<String> {
    line.split(|c: char| !c.is_ascii_alphanumeric())
        .find(|w| {
            (7..=12).contains(&w.len())
                && w.chars().all(|c| c.is_ascii_digit() || ('a'..='f').contains(&c))
                && w.chars().any(|c| c.is_ascii_digit())
                && w.chars().any(|c| c.is_ascii_alphabetic())
        })
        .map(String::from)
}

#[test]
fn nothing_speaks_of_sessions_rounds_issue_numbers_or_commit_ids() {
    let mut found = Vec::new();
    for path in files() {
        let text = std::fs::read_to_string(&path).unwrap_or_default();
        let rel = path.strip_prefix(ROOT).unwrap().display().to_string();
        for (n, line) in text.lines().enumerate() {
            if let Some(what) = history_in(line) {
                found.push(format!("{rel}:{}: {what}: {}", n + 1, line.trim()));
            }
            if rel.ends_with(".md")
                && let Some(id) = commit_id_in(line)
            {
                found.push(format!("{rel}:{}: commit id {id}: {}", n + 1, line.trim()));
            }
        }
    }
    assert!(found.is_empty(), "history, not product:\n{}", found.join("\n"));
}

#[test]
fn the_checks_see_what_they_look_for() {
    for line in ["Measured at the end of session 5", "as last round's branch did", "(issue #18)", "purpose (#19):"] {
        assert!(history_in(line).is_some(), "{line}");
    }
    for line in ["A new connection resumes the TLS session", "a debugging session", "round-trips", "around"] {
        assert_eq!(history_in(line), None, "{line}");
    }
    assert_eq!(commit_id_in("the static binary of 8d06236.").as_deref(), Some("8d06236"));
    assert_eq!(commit_id_in("1,570 B before the lock; 2,078,688 bytes"), None);
}
