//! The cheap house rules of `src/`, checked on every run so that
//! docs/architecture.md stays true: every file says what it owns, no file
//! grows past 500 lines before its tests, the rooms' imports point one way
//! (nothing but the composition root imports `cli/`; `kube/` and `util/`
//! import no feature), the rooms form no cycle, and neither do the modules
//! inside one folder (`probes/list` naming `probes/answer`, which names
//! `probes/list` again). Imports are read through `crate::` and any number
//! of `super::` (`super::super::pod::Pod`), groups included; a name a
//! folder's `mod.rs` re-exports counts as the folder's, not the file's
//! that defines it.

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
    let files = sources();
    let modules: BTreeSet<String> = files.iter().map(|(rel, _)| module_of(rel)).collect();
    let mut graph: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    for (rel, text) in &files {
        let from = room(rel);
        let code = code_only(text);
        let mut used = rooms_used(&code);
        // A room reached through `super::super::…` is an import too.
        let reached = modules_used(&module_of(rel), &code, &modules).into_iter();
        used.extend(reached.filter_map(|m| m.split('/').next().filter(|r| !r.is_empty()).map(String::from)));
        let entry = graph.entry(from.clone()).or_default();
        entry.extend(used.into_iter().filter(|to| *to != from));
    }
    graph
}

/// A file's module under `src/`: `kube/client`; a `mod.rs`, its folder's
/// (`signals/probes`); the crate roots (`lib.rs`, `main.rs`), "".
fn module_of(rel: &str) -> String {
    let path = rel.trim_end_matches(".rs");
    match path.rsplit_once('/') {
        Some((folder, "mod")) => folder.to_string(),
        None if path == "lib" || path == "main" => String::new(),
        _ => path.to_string(),
    }
}

fn parent(module: &str) -> &str {
    module.rsplit_once('/').map_or("", |(p, _)| p)
}

/// Every path `code` names through `crate::` or `super::` (any number),
/// as segments; a group (`super::{a::B, c}`) gives one path per item.
fn paths_named(code: &str) -> Vec<(usize, Vec<String>)> {
    let bytes = code.as_bytes();
    let ident = |b: u8| b.is_ascii_alphanumeric() || b == b'_';
    let mut found = Vec::new();
    let mut at = 0;
    while at < bytes.len() {
        let starts = at == 0 || !(ident(bytes[at - 1]) || bytes[at - 1] == b':');
        let rest = &bytes[at..];
        if starts && (rest.starts_with(b"crate::") || rest.starts_with(b"super::")) {
            // `crate` is `usize::MAX` levels up: the root.
            let (mut ups, mut from) = (0, at);
            if rest.starts_with(b"crate::") {
                ups = usize::MAX;
                from += "crate::".len();
            } else {
                while bytes[from..].starts_with(b"super::") {
                    ups += 1;
                    from += "super::".len();
                }
            }
            let mut paths = Vec::new();
            at = path_tree(bytes, from, Vec::new(), &mut paths);
            found.extend(paths.into_iter().map(|p| (ups, p)));
        } else {
            at += 1;
        }
    }
    found
}

/// Reads the path tree at `at` (`a::b::{c, d::e}`) into `out`, each full
/// path after `prefix`; where it ended.
fn path_tree(s: &[u8], mut at: usize, mut prefix: Vec<String>, out: &mut Vec<Vec<String>>) -> usize {
    let skip_space = |mut at: usize| {
        while at < s.len() && s[at].is_ascii_whitespace() {
            at += 1;
        }
        at
    };
    loop {
        at = skip_space(at);
        if at < s.len() && s[at] == b'{' {
            at += 1;
            loop {
                at = skip_space(at);
                if at >= s.len() || s[at] == b'}' {
                    return at + 1;
                }
                at = skip_space(path_tree(s, at, prefix.clone(), out));
                match s.get(at) {
                    Some(b',') => at += 1,
                    Some(b'}') => return at + 1,
                    _ => return at,
                }
            }
        }
        let start = at;
        while at < s.len() && (s[at].is_ascii_alphanumeric() || s[at] == b'_') {
            at += 1;
        }
        if start == at {
            out.push(prefix);
            return at;
        }
        let name = String::from_utf8_lossy(&s[start..at]).into_owned();
        if name != "self" {
            prefix.push(name);
        }
        if s[at..].starts_with(b"::") {
            at += 2;
        } else {
            out.push(prefix);
            return at;
        }
    }
}

/// The modules (of `modules`) the code of `module` names: for each path,
/// the deepest module it goes through (`super::list::Pager` in
/// `signals/probes/answer` is `signals/probes/list`).
fn modules_used(module: &str, code: &str, modules: &BTreeSet<String>) -> BTreeSet<String> {
    let mut used = BTreeSet::new();
    for (ups, path) in paths_named(code) {
        let mut at = module;
        for _ in 0..ups {
            if at.is_empty() {
                break;
            }
            at = parent(at);
        }
        let mut target = at.to_string();
        for segment in path {
            let deeper = if target.is_empty() { segment } else { format!("{target}/{segment}") };
            if !modules.contains(&deeper) {
                break;
            }
            target = deeper;
        }
        used.insert(target);
    }
    used
}

/// Imports between the modules of one folder, as (folder's child that
/// imports, folder's child imported): `signals/probes/list` naming
/// `signals/probes/answer`; `signals/container/pod` naming
/// `signals/probes/store` is `signals/container` → `signals/probes`.
fn module_graph(files: &[(String, String)]) -> BTreeMap<String, BTreeSet<String>> {
    let modules: BTreeSet<String> = files.iter().map(|(rel, _)| module_of(rel)).collect();
    let mut graph: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    for (rel, text) in files {
        let from = module_of(rel);
        for to in modules_used(&from, &code_only(text), &modules) {
            let (a, b): (Vec<&str>, Vec<&str>) = (from.split('/').collect(), to.split('/').collect());
            let common = a.iter().zip(&b).take_while(|(x, y)| x == y).count();
            // Not inside one folder (the rooms' rule), or a parent and its
            // child (a `mod.rs` declares its children).
            if common == 0 || common == a.len() || common == b.len() || from.is_empty() || to.is_empty() {
                continue;
            }
            graph.entry(a[..=common].join("/")).or_default().insert(b[..=common].join("/"));
        }
    }
    graph
}

/// The first cycle in `graph`, as its nodes, the first one again at the end.
fn cycle_in(graph: &BTreeMap<String, BTreeSet<String>>) -> Option<Vec<String>> {
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
    graph.keys().find_map(|node| visit(node, graph, &mut Vec::new(), &mut done))
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
    if let Some(cycle) = cycle_in(&import_graph()) {
        panic!("the rooms import each other in a cycle: {}", cycle.join(" -> "));
    }
}

#[test]
fn the_modules_of_a_folder_form_no_cycle() {
    let graph = module_graph(&sources());
    let list = graph.get("signals/probes/list");
    assert!(list.is_some_and(|to| to.contains("signals/probes/answer")), "reads no import at all: {graph:?}");
    if let Some(cycle) = cycle_in(&graph) {
        panic!("modules of one folder import each other in a cycle: {}", cycle.join(" -> "));
    }
}

#[test]
fn the_module_reader_sees_super_super_groups_and_cycles() {
    let file = |rel: &str, code: &str| (rel.to_string(), format!("//! x\n{code}"));
    let files = [
        file("lib.rs", "mod kube;\nmod signals;"),
        file("kube/mod.rs", "pub use client::Client;"),
        file("kube/client.rs", "use super::watch::Stream;\nconst B: u64 = super::MAX;"),
        file("kube/watch.rs", "pub(super) use super::{client::{self, Client as C}, MAX};"),
        file("signals/mod.rs", "mod container;\nmod probes;"),
        file("signals/container/mod.rs", "mod pod;"),
        file("signals/probes/mod.rs", "use crate::kube::{self, client::Client};"),
        file("signals/probes/list.rs", "use super::super::container::pod::Pod;\nuse super::{store::S, LIMIT};"),
        file("signals/probes/store.rs", "let s = crate::signals::probes::list::f();"),
        file("signals/container/pod.rs", "use crate::kube::Client;\n#[cfg(test)]\nuse super::super::probes::list;"),
    ];
    let graph = module_graph(&files);
    let edges: Vec<String> = graph.iter().flat_map(|(a, to)| to.iter().map(move |b| format!("{a} -> {b}"))).collect();
    assert_eq!(
        edges,
        [
            "kube/client -> kube/watch",
            "kube/watch -> kube/client",
            "signals/probes -> signals/container",
            "signals/probes/list -> signals/probes/store",
            "signals/probes/store -> signals/probes/list",
        ]
    );
    assert_eq!(cycle_in(&graph).unwrap(), ["kube/client", "kube/watch", "kube/client"]);
}

#[test]
fn the_import_reader_sees_grouped_and_plain_paths() {
    let code =
        "use crate::{kube::{Client, names}, util::text, self};\nuse crate::status::Health;\nlet x = crate::lock::f();";
    let used: Vec<String> = rooms_used(code).into_iter().collect();
    assert_eq!(used, ["kube", "lock", "status", "util"]);
    assert_eq!(code_only("let a = 1; // see crate::cli\n//! [`crate::pro`]"), "let a = 1; \n");
}
