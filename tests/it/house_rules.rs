//! The cheap house rules of `src/`, checked on every run so that
//! docs/architecture.md stays true: every file says what it owns, no file
//! grows past 500 lines before its tests, the rooms' imports point one way
//! (nothing but the composition root imports `cli/`; `kube/` and `util/`
//! import no feature) and the rooms form no cycle.

use std::collections::{BTreeMap, BTreeSet};
use std::fs;
use std::path::{Path, PathBuf};

const SRC: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/src");
const MAX_LINES_BEFORE_TESTS: usize = 500;

/// Every `.rs` file under `src/`, as (path relative to `src/`, text).
fn sources() -> Vec<(String, String)> {
    fn walk(dir: &Path, out: &mut Vec<PathBuf>) {
        for entry in fs::read_dir(dir).unwrap() {
            let path = entry.unwrap().path();
            if path.is_dir() {
                walk(&path, out);
            } else if path.extension().is_some_and(|e| e == "rs") {
                out.push(path);
            }
        }
    }
    let mut files = Vec::new();
    walk(Path::new(SRC), &mut files);
    files.sort();
    let files: Vec<_> = files
        .into_iter()
        .map(|p| {
            let rel = p.strip_prefix(SRC).unwrap().to_string_lossy().into_owned();
            (rel, fs::read_to_string(&p).unwrap())
        })
        .collect();
    assert!(files.len() > 40, "found only {} source files under {SRC}", files.len());
    files
}

/// The text before the file's unit tests.
fn before_tests(text: &str) -> &str {
    match text.find("\n#[cfg(test)]") {
        Some(at) => &text[..at],
        None => text,
    }
}

/// The code without comments (line comments and doc comments), so that a
/// doc link to another room is no import.
fn code_only(text: &str) -> String {
    before_tests(text)
        .lines()
        .map(|line| match line.find("//") {
            Some(at) if !line[..at].contains('"') => &line[..at],
            _ => line,
        })
        .collect::<Vec<_>>()
        .join("\n")
}

/// The room a file belongs to: its top-level module (`agent`, `kube`,
/// `status`, ...).
fn room(rel: &str) -> String {
    rel.split('/').next().unwrap().trim_end_matches(".rs").to_string()
}

/// The rooms a file's code names through `crate::ROOM` (also inside
/// `use crate::{a, b::c}` groups).
fn rooms_used(code: &str) -> BTreeSet<String> {
    let mut used = BTreeSet::new();
    let mut rest = code;
    while let Some(at) = rest.find("crate::") {
        rest = &rest[at + "crate::".len()..];
        if let Some(group) = rest.strip_prefix('{') {
            // The first segment of each item at the group's own depth.
            let (mut depth, mut expect_name) = (0, true);
            let mut name = String::new();
            for c in group.chars() {
                match c {
                    '{' => depth += 1,
                    '}' if depth == 0 => break,
                    '}' => depth -= 1,
                    ',' if depth == 0 => expect_name = true,
                    c if expect_name && (c.is_alphanumeric() || c == '_') => name.push(c),
                    _ if expect_name && !name.is_empty() => {
                        if name != "self" {
                            used.insert(std::mem::take(&mut name));
                        }
                        name.clear();
                        expect_name = false;
                    }
                    _ => {}
                }
            }
            if expect_name && !name.is_empty() && name != "self" {
                used.insert(name);
            }
        } else {
            let name: String = rest.chars().take_while(|c| c.is_alphanumeric() || *c == '_').collect();
            used.insert(name);
        }
    }
    used
}

fn import_graph() -> BTreeMap<String, BTreeSet<String>> {
    let mut graph: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    for (rel, text) in sources() {
        let from = room(&rel);
        let used = rooms_used(&code_only(&text));
        let entry = graph.entry(from.clone()).or_default();
        entry.extend(used.into_iter().filter(|to| *to != from));
    }
    graph
}

#[test]
fn every_file_says_what_it_owns() {
    for (rel, text) in sources() {
        assert!(text.trim_start().starts_with("//!"), "src/{rel} has no module doc (`//!`) saying what it owns");
    }
}

#[test]
fn no_file_over_500_lines_before_its_tests() {
    let too_long: Vec<String> = sources()
        .iter()
        .map(|(rel, text)| (rel, before_tests(text).lines().count()))
        .filter(|(_, lines)| *lines > MAX_LINES_BEFORE_TESTS)
        .map(|(rel, lines)| format!("src/{rel}: {lines} lines"))
        .collect();
    assert!(too_long.is_empty(), "over {MAX_LINES_BEFORE_TESTS} lines before the tests: {too_long:?}");
}

#[test]
fn only_the_composition_root_imports_the_command_line() {
    let graph = import_graph();
    let importers: Vec<&String> = graph.iter().filter(|(_, to)| to.contains("cli")).map(|(from, _)| from).collect();
    assert!(
        importers.iter().all(|from| ["app", "main", "lib"].contains(&from.as_str())),
        "cli/ is imported by {importers:?}"
    );
    assert!(importers.iter().any(|from| *from == "app"), "the rule reads no import at all: {graph:?}");
}

#[test]
fn the_kubernetes_client_and_utilities_import_no_feature() {
    let graph = import_graph();
    assert_eq!(graph["util"], BTreeSet::new(), "util/ imports {:?}", graph["util"]);
    let kube: Vec<&String> = graph["kube"].iter().filter(|to| *to != "util").collect();
    assert!(kube.is_empty(), "kube/ imports {kube:?}");
    assert!(graph["agent"].contains("kube"), "the rule reads no import at all: {graph:?}");
}

#[test]
fn the_rooms_form_no_cycle() {
    let graph = import_graph();
    // Depth-first search for a back edge, reporting the cycle it closes.
    fn visit(
        node: &str,
        graph: &BTreeMap<String, BTreeSet<String>>,
        path: &mut Vec<String>,
        done: &mut BTreeSet<String>,
    ) -> Option<Vec<String>> {
        if let Some(at) = path.iter().position(|n| n == node) {
            let mut cycle = path[at..].to_vec();
            cycle.push(node.to_string());
            return Some(cycle);
        }
        if done.contains(node) {
            return None;
        }
        path.push(node.to_string());
        for next in graph.get(node).into_iter().flatten() {
            if let Some(cycle) = visit(next, graph, path, done) {
                return Some(cycle);
            }
        }
        path.pop();
        done.insert(node.to_string());
        None
    }
    let mut done = BTreeSet::new();
    for node in graph.keys() {
        if let Some(cycle) = visit(node, &graph, &mut Vec::new(), &mut done) {
            panic!("the rooms import each other in a cycle: {}", cycle.join(" -> "));
        }
    }
}

#[test]
fn the_import_reader_sees_grouped_and_plain_paths() {
    let code =
        "use crate::{kube::{Client, names}, util::text, self};\nuse crate::status::Health;\nlet x = crate::lock::f();";
    let used: Vec<String> = rooms_used(code).into_iter().collect();
    assert_eq!(used, ["kube", "lock", "status", "util"]);
    assert_eq!(code_only("let a = 1; // see crate::cli\n//! [`crate::pro`]"), "let a = 1; \n");
}
