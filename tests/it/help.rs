//! What a user sees asking for help: each command its own (usage, the
//! flags it reads, an example), exit 0, on stdout; the global help lists
//! every command and flag.

use crate::support;

use std::time::Duration;
use support::{opstatus_bin, run_to_end};

fn help(args: &[&str]) -> String {
    let out = run_to_end(&opstatus_bin(), args, &[], Duration::from_secs(10));
    assert_eq!(out.status.code(), Some(0), "{args:?}: {}", String::from_utf8_lossy(&out.stderr));
    assert!(out.stderr.is_empty(), "{args:?}: {}", String::from_utf8_lossy(&out.stderr));
    String::from_utf8(out.stdout).unwrap()
}

#[test]
fn each_command_prints_its_own_help() {
    let run = help(&["run", "--help"]);
    assert!(run.starts_with("Usage: opstatus run [FLAGS]") && run.contains("Example:\n  opstatus run "), "{run}");
    assert!(run.contains("  --follow-leader-lease VALUE") && !run.contains("--extension-namespace"), "{run}");
    let get = help(&["get", "-h"]);
    assert_eq!(get, help(&["help", "get"]));
    assert!(get.contains("-o, --output text|json") && !get.contains("--interval"), "{get}");
    let probe = help(&["probe", "--help"]);
    assert!(probe.contains("--ready-file") && probe.contains("--max-age") && !probe.contains("--namespace"), "{probe}");
    let all = help(&["--help"]);
    assert!(all.contains("`opstatus COMMAND --help`") && all.contains("--extension-namespace"), "{all}");
    assert!(all.len() > run.len() && run.len() > get.len(), "the global help is the longest");
}

/// A reader that is gone before opstatus writes (`opstatus --help | true`,
/// `opstatus get | head`): the write fails with a broken pipe, which ends
/// the output quietly with the command's exit code, not a panic (134).
#[test]
fn a_closed_pipe_ends_the_output_quietly() {
    for args in [&["--help"][..], &["version"], &["run", "--help"]] {
        let (reader, writer) = std::io::pipe().unwrap();
        drop(reader);
        let out = std::process::Command::new(opstatus_bin())
            .args(args)
            .env_clear()
            .stdout(writer)
            .stderr(std::process::Stdio::piped())
            .output()
            .unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(0), "{args:?}: {:?} {stderr}", out.status);
        assert!(stderr.is_empty(), "{args:?}: {stderr}");
    }
}
