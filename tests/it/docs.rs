//! The repository speaks of the product: README, docs, contributing notes,
//! code comments, scripts and manifests say what opstatus does and how to
//! reproduce a figure, never the history of how it got there (sessions,
//! rounds, issue numbers, commit ids).

use crate::support::TempDir;
use serde_json::Value;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

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
    assert!(out.len() > 100, "found only {} files", out.len());
    out
}

/// What history sounds like, lowercased. The phrases are put together
/// here, so that this file holds none of them and is checked like any other.
fn history_in(line: &str) -> Option<String> {
    let lower = line.to_lowercase();
    let mut phrases = vec![["end of", "session"].join(" "), ["round", "two"].join(" "), ["issue", "#"].join(" ")];
    for when in ["last", "this", "previous", "next"] {
        phrases.extend(["session", "round"].map(|what| format!("{when} {what}")));
    }
    if let Some(phrase) = phrases.into_iter().find(|p| lower.contains(p.as_str())) {
        return Some(phrase);
    }
    let words: Vec<&str> = lower.split(|c: char| !c.is_ascii_alphanumeric() && c != '#').collect();
    for pair in words.windows(2) {
        if pair[0] == "session" && pair[1].chars().all(|c| c.is_ascii_digit()) && !pair[1].is_empty() {
            return Some("session N".into());
        }
    }
    for word in &words {
        // A hash and digits: an issue or pull request number.
        if word.len() > 1 && word.starts_with('#') && word[1..].chars().all(|c| c.is_ascii_digit()) {
            return Some("#N".into());
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
    let (session, round) = ("session", "round");
    let history = [
        format!("Measured at the end of {session} 5"),
        format!("as last {round}'s branch did"),
        format!("(issue {}{})", '#', 18),
        format!("purpose (#{}):", 19),
        format!("See the {session} {} notes", 4),
    ];
    for line in &history {
        assert!(history_in(line).is_some(), "{line}");
    }
    for line in ["A new connection resumes the TLS session", "a debugging session", "round-trips", "around"] {
        assert_eq!(history_in(line), None, "{line}");
    }
    assert_eq!(commit_id_in("the static binary of 8d06236.").as_deref(), Some("8d06236"));
    assert_eq!(commit_id_in("1,570 B before the lock; 2,078,688 bytes"), None);
}

// --- The install guide's snippets and versions --------------------------------
//
// Every kustomize snippet of the README and docs renders, with the variant of
// the opstatus component it names, and every kustomization (shipped or
// documented) stays within the kustomize version docs/install.md states.
// `kubectl kustomize` needs no API server; kubectl turns the YAML into JSON
// offline (`annotate --local`).

/// README.md, CONTRIBUTING.md and docs/*.md: (name, text).
fn markdown() -> Vec<(String, String)> {
    let mut names = vec!["README.md".to_string(), "CONTRIBUTING.md".to_string()];
    for entry in std::fs::read_dir(Path::new(ROOT).join("docs")).unwrap() {
        let name = entry.unwrap().file_name().to_string_lossy().to_string();
        if name.ends_with(".md") {
            names.push(format!("docs/{name}"));
        }
    }
    names.sort();
    names.into_iter().map(|n| (n.clone(), std::fs::read_to_string(Path::new(ROOT).join(&n)).unwrap())).collect()
}

/// The numbers written `1,902,480` (seven digits with thousands
/// separators) in `text`.
fn seven_digit_figures(text: &str) -> Vec<String> {
    let bytes = text.as_bytes();
    let shape =
        |w: &[u8]| w.iter().enumerate().all(|(i, c)| if i == 1 || i == 5 { *c == b',' } else { c.is_ascii_digit() });
    (0..bytes.len().saturating_sub(8))
        .filter(|&i| shape(&bytes[i..i + 9]))
        .filter(|&i| i == 0 || !(bytes[i - 1].is_ascii_digit() || bytes[i - 1] == b','))
        .filter(|&i| bytes.get(i + 9).is_none_or(|c| !(c.is_ascii_digit() || *c == b',')))
        .map(|i| text[i..i + 9].to_string())
        .collect()
}

/// How far a size docs/footprint.md states may be from the binary built:
/// eight 4 KiB pages, so a small change need not restate it.
const SIZE_MARGIN: u64 = 32 * 1024;

/// docs/footprint.md states each static binary's size once, and holds it
/// to the binary `scripts/static-build.sh` built from this tree (within
/// [`SIZE_MARGIN`]); the README, the install guide and the dependency
/// notes link to it and state no size of their own (the only seven-digit
/// figure they may give is the budget, 2,097,152).
#[test]
fn the_footprint_states_each_binary_s_size_as_built_and_the_other_docs_link_to_it() {
    let read = |name: &str| std::fs::read_to_string(Path::new(ROOT).join(name)).unwrap();
    let footprint = read("docs/footprint.md");
    for arch in crate::support::arch::ALL {
        let row = format!("| static binary, {} | ", arch.label);
        let line = footprint.lines().find(|l| l.starts_with(&row)).unwrap_or_else(|| panic!("no row {row:?}"));
        let stated: u64 = seven_digit_figures(line)[0].replace(',', "").parse().unwrap();
        let built = std::fs::metadata(arch.bin()).unwrap().len();
        assert!(
            stated.abs_diff(built) <= SIZE_MARGIN,
            "docs/footprint.md says {stated} bytes for {}; it is {built}: state the size as built",
            arch.label
        );
    }
    for name in ["README.md", "docs/install.md", "docs/dependencies.md"] {
        let text = read(name);
        let sizes: Vec<String> = seven_digit_figures(&text).into_iter().filter(|f| f != "2,097,152").collect();
        assert!(sizes.is_empty(), "{name} states {sizes:?}: link to docs/footprint.md instead");
        assert!(text.contains("footprint.md#current-figures"), "{name} links to the footprint's figures");
    }
    assert_eq!(seven_digit_figures("2,081,576 bytes, 12,345, 1,902,480."), ["2,081,576", "1,902,480"]);
}

/// What the README's quick start has the user set `IMAGE` to.
const IMAGE: &str = "registry.example/team/opstatus";

/// One documented kustomize snippet: where it is, and the files it writes
/// (paths relative to the directory the reader works in).
struct Snippet {
    at: String,
    files: Vec<(String, String)>,
}

/// Every kustomize snippet of the README and docs (what counts as one:
/// [`crate::support::markdown::snippet_files`]).
fn snippets() -> Vec<Snippet> {
    let mut found = Vec::new();
    for (name, text) in markdown() {
        for (n, (info, body)) in crate::support::markdown::fenced_blocks(&text).into_iter().enumerate() {
            let at = format!("{name}, code block {}", n + 1);
            let files = crate::support::markdown::snippet_files(&info, &body, IMAGE);
            if !files.is_empty() {
                found.push(Snippet { at, files });
            }
        }
    }
    found
}

/// Runs a command; stdout, or stderr as the error.
fn run(cmd: &mut Command, stdin: Option<&str>) -> Result<String, String> {
    cmd.stdin(if stdin.is_some() { Stdio::piped() } else { Stdio::null() });
    let mut child = cmd.stdout(Stdio::piped()).stderr(Stdio::piped()).spawn().expect("kubectl (/usr/bin/kubectl)");
    if let Some(input) = stdin {
        use std::io::Write;
        child.stdin.take().unwrap().write_all(input.as_bytes()).unwrap();
    }
    let out = child.wait_with_output().unwrap();
    let text = |b: Vec<u8>| String::from_utf8_lossy(&b).into_owned();
    if out.status.success() { Ok(text(out.stdout)) } else { Err(text(out.stderr)) }
}

/// kubectl with no cluster at all.
fn kubectl(args: &[&str]) -> Command {
    let mut c = Command::new("kubectl");
    c.args(args).env("KUBECONFIG", "/dev/null");
    c
}

/// The rendered objects as JSON, converted offline.
fn objects(yaml: &str) -> Vec<Value> {
    let out = run(&mut kubectl(&["annotate", "--local", "-f", "-", "opstatus-docs-", "-o", "json"]), Some(yaml))
        .unwrap_or_else(|e| panic!("kubectl could not read the render: {e}\n{yaml}"));
    let values: Vec<Value> = serde_json::Deserializer::from_str(&out).into_iter().map(Result::unwrap).collect();
    values
        .into_iter()
        .flat_map(|v| if v["kind"] == "List" { v["items"].as_array().cloned().unwrap_or_default() } else { vec![v] })
        .collect()
}

/// The directory a snippet's reader works in: a copy of this repository's
/// manifests both at `manifests/` (the quick start runs from the checkout)
/// and at `opstatus/manifests/` (an overlay beside the checkout), the
/// operator's own kustomization at `config/default` (tests/fixtures/my-operator:
/// names and labels that are not kubebuilder's), and the snippet's files.
fn workspace(s: &Snippet) -> TempDir {
    let dir = TempDir::new("doc-snippet");
    std::fs::create_dir_all(dir.path().join("opstatus")).unwrap();
    std::fs::create_dir_all(dir.path().join("config")).unwrap();
    for (from, to) in [
        ("manifests", "manifests"),
        ("manifests", "opstatus/manifests"),
        ("tests/fixtures/my-operator", "config/default"),
        ("tests/fixtures", "tests/fixtures"),
    ] {
        std::fs::create_dir_all(dir.path().join(to).parent().unwrap()).unwrap();
        let ok = Command::new("cp").arg("-r").arg(Path::new(ROOT).join(from)).arg(dir.path().join(to)).status();
        assert!(ok.unwrap().success());
    }
    for (path, text) in &s.files {
        let path = dir.path().join(path);
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(path, text).unwrap();
    }
    dir
}

/// The top directories of a snippet: those with a kustomization.yaml that
/// no other of its kustomizations lists, and that is no Component (which
/// only renders from an overlay that lists it).
fn tops(s: &Snippet) -> Vec<String> {
    let dirs: Vec<&str> = s
        .files
        .iter()
        .filter(|(_, t)| !t.lines().any(|l| l.trim() == "kind: Component"))
        .filter_map(|(p, _)| p.strip_suffix("/kustomization.yaml").or((p == "kustomization.yaml").then_some(".")))
        .collect();
    dirs.iter()
        .filter(|d| {
            !dirs.iter().any(|parent| {
                parent != *d
                    && d.strip_prefix(&format!("{parent}/")).is_some_and(|child| {
                        s.files.iter().any(|(p, t)| p == &format!("{parent}/kustomization.yaml") && t.contains(child))
                    })
            })
        })
        .map(|d| d.to_string())
        .collect()
}

/// Every container named `opstatus` of each pod template: (kind/name,
/// list it is in, the container).
fn opstatus_containers(objects: &[Value]) -> Vec<(String, &'static str, Value)> {
    let mut found = Vec::new();
    for o in objects.iter().filter(|o| o["spec"]["template"]["spec"].is_object()) {
        let pod = &o["spec"]["template"]["spec"];
        for list in ["initContainers", "containers"] {
            for c in pod[list].as_array().into_iter().flatten().filter(|c| c["name"] == "opstatus") {
                found.push((format!("{}/{}", o["kind"].as_str().unwrap(), o["metadata"]["name"]), list, c.clone()));
            }
        }
    }
    found
}

/// `Err(why)` unless `ok`.
fn ensure(ok: bool, why: impl FnOnce() -> String) -> Result<(), String> {
    if ok { Ok(()) } else { Err(why()) }
}

/// What a snippet's render must show, beyond rendering at all: the first
/// thing it does not, if any.
fn check_render(s: &Snippet, text: &str, objects: &[Value]) -> Result<(), String> {
    let at = &s.at;
    let containers = opstatus_containers(objects);
    let mut per_pod: Vec<&str> = containers.iter().map(|(pod, ..)| pod.as_str()).collect();
    per_pod.sort();
    for w in per_pod.windows(2) {
        ensure(w[0] != w[1], || format!("{at}: two opstatus containers in {}", w[0]))?;
    }
    // The variant the snippet names is the one rendered.
    let native = text.contains("components/opstatus\n") || text.contains("components/opstatus]");
    let plain = text.contains("components/opstatus-plain");
    ensure(!(native || plain) || !containers.is_empty(), || format!("{at}: the component adds no opstatus container"))?;
    for (pod, list, c) in &containers {
        if plain {
            ensure(*list == "containers", || format!("{at}: {pod}: the plain variant's sidecar is in {list}"))?;
        } else if native {
            let policy = c["restartPolicy"].as_str();
            ensure((*list, policy) == ("initContainers", Some("Always")), || format!("{at}: {pod}: not native"))?;
        }
        let env = c["env"].as_array().cloned().unwrap_or_default();
        let mut names: Vec<&str> = env.iter().map(|e| e["name"].as_str().unwrap()).collect();
        names.sort();
        for w in names.windows(2) {
            ensure(w[0] != w[1], || format!("{at}: {pod}: {} set twice", w[0]))?;
        }
        for e in &env {
            ensure(e["value"].is_null() || e["valueFrom"].is_null(), || {
                format!("{at}: {pod}: value and valueFrom: {e}")
            })?;
        }
        // What the snippet's patch sets reaches the sidecar.
        for line in text.lines().map(str::trim) {
            let name = line.strip_prefix("- name: ").map(|n| n.split_whitespace().next().unwrap_or(""));
            if let Some(name) = name.filter(|n| n.chars().all(|c| c.is_ascii_uppercase() || c == '_')) {
                ensure(names.contains(&name), || format!("{at}: {pod}: the patch's {name} is not in its env"))?;
            }
        }
        // The image the snippet's `images:` names.
        if let Some(name) = text.lines().find_map(|l| l.split("newName: ").nth(1)) {
            let name = name.split(['}', ' ', ',']).next().unwrap();
            let tag = text.lines().find_map(|l| l.split("newTag: ").nth(1)).map(|t| t.split(['}', ' ', ',']).next());
            let image = format!("{name}:{}", tag.flatten().unwrap_or(env!("CARGO_PKG_VERSION")));
            ensure(c["image"].as_str() == Some(image.as_str()), || format!("{at}: {pod}: not the image {image}"))?;
        }
    }
    Ok(())
}

#[test]
fn every_kustomize_snippet_of_the_readme_and_docs_renders_with_the_variant_it_names() {
    let all = snippets();
    let names: Vec<&str> = all.iter().map(|s| s.at.as_str()).collect();
    assert!(all.len() >= 6, "expected the quick start's, the install guide's and monitoring's snippets: {names:?}");
    assert!(names.iter().any(|n| n.starts_with("README.md")), "the quick start's overlay: {names:?}");
    for s in &all {
        let dir = workspace(s);
        let text: String = s.files.iter().map(|(_, t)| t.as_str()).collect();
        for top in tops(s) {
            let path = dir.path().join(&top);
            let rendered = run(&mut kubectl(&["kustomize", path.to_str().unwrap()]), None)
                .unwrap_or_else(|e| panic!("{}: `kubectl kustomize {top}` fails: {e}", s.at));
            check_render(s, &text, &objects(&rendered)).unwrap_or_else(|e| panic!("{e}"));
        }
    }
    println!("rendered {} snippets: {names:?}", all.len());
}

#[test]
fn a_snippet_that_patches_the_other_variant_is_caught() {
    // The native variant's patch over the plain component: a second
    // `opstatus` container, which the check must refuse.
    let docs = std::fs::read_to_string(Path::new(ROOT).join("docs/install.md")).unwrap();
    let native = snippets()
        .into_iter()
        .find(|s| s.at.starts_with("docs/install.md") && s.files[0].1.contains("initContainers:"))
        .expect("the install guide patches the native sidecar");
    assert!(docs.contains("components/opstatus-plain"));
    let swapped = Snippet {
        at: "swapped".into(),
        files: native
            .files
            .iter()
            .map(|(p, t)| (p.clone(), t.replace("components/opstatus\n", "components/opstatus-plain\n")))
            .collect(),
    };
    let dir = workspace(&swapped);
    let rendered = run(&mut kubectl(&["kustomize", dir.path().join("my-overlay").to_str().unwrap()]), None).unwrap();
    let text: String = swapped.files.iter().map(|(_, t)| t.as_str()).collect();
    let objects = objects(&rendered);
    let refused = check_render(&swapped, &text, &objects).expect_err("the native patch over the plain variant");
    assert!(refused.contains("two opstatus containers"), "{refused}");
}

type Version = (u32, u32, u32);

/// The kustomize release that brought each kustomization field (as kubectl
/// 1.20's kustomize v2.0.3 has it, or later); a field missing here fails the
/// test until its version is added.
const FIELDS: &[(&str, Version)] = &[
    ("apiVersion", (2, 0, 3)),
    ("kind", (2, 0, 3)),
    ("resources", (2, 0, 3)),
    ("bases", (2, 0, 3)),
    ("namespace", (2, 0, 3)),
    ("namePrefix", (2, 0, 3)),
    ("nameSuffix", (2, 0, 3)),
    ("commonLabels", (2, 0, 3)),
    ("commonAnnotations", (2, 0, 3)),
    ("images", (2, 0, 3)),
    ("configMapGenerator", (2, 0, 3)),
    ("secretGenerator", (2, 0, 3)),
    ("generatorOptions", (2, 0, 3)),
    ("patchesStrategicMerge", (2, 0, 3)),
    ("patchesJson6902", (2, 0, 3)),
    ("vars", (2, 0, 3)),
    ("crds", (2, 0, 3)),
    ("configurations", (2, 0, 3)),
    // With `target` and inline patches (v2.0.3's `patches` was a list of files).
    ("patches", (3, 1, 0)),
    ("components", (3, 7, 0)),
    ("labels", (4, 1, 0)),
    ("replacements", (4, 1, 0)),
];
/// `kind: Component` files.
const COMPONENT: Version = (3, 7, 0);
/// The kustomize each kubectl minor bundles (1.14 to 1.20: v2.0.3).
const KUBECTL_KUSTOMIZE: &[(u32, Version)] =
    &[(20, (2, 0, 3)), (21, (4, 0, 5)), (22, (4, 2, 0)), (23, (4, 4, 1)), (24, (4, 5, 4))];

/// A feature: what it is, whether a line uses it, the release that has it.
type Feature = (&'static str, fn(&str) -> bool, Version);

/// What a replacement uses beyond the field itself (replacements came in
/// v4.1.0), by line: a key with dots in brackets in a field path, a target
/// selected by label, a wildcard over a list. Each came in a release after
/// v4.1.0; all three are in v4.5.4 (kubectl 1.24's), the release named
/// here (the one each came in is not pinned closer, and releases older
/// than this machine's are not run).
const FEATURES: &[Feature] = &[
    ("a bracketed key in a field path", |l| l.contains(".[") && !l.contains(".[name="), (4, 5, 4)),
    ("a replacement target selected by label", |l| l.contains("select:") && l.contains("labelSelector"), (4, 5, 4)),
    ("a wildcard in a field path", |l| l.contains("fieldPaths") && l.contains(".*."), (4, 5, 4)),
];

fn version(text: &str) -> Version {
    let mut parts = text.trim_start_matches('v').split('.').map(|p| p.parse::<u32>().unwrap_or(0));
    (parts.next().unwrap_or(0), parts.next().unwrap_or(0), parts.next().unwrap_or(0))
}

/// The kustomization fields a file uses (its top-level keys) and whether it
/// is a Component.
fn fields(text: &str) -> (Vec<String>, bool) {
    let keys = text
        .lines()
        .filter(|l| l.starts_with(|c: char| c.is_ascii_alphabetic()))
        .filter_map(|l| l.split_once(':').map(|(k, _)| k.to_string()))
        .collect();
    (keys, text.lines().any(|l| l.trim() == "kind: Component"))
}

/// `**kubectl vX.Y**` and `**kustomize vX.Y.Z**` from the install guide's
/// "Kustomize versions".
fn stated_minimum() -> (String, Version) {
    let install = std::fs::read_to_string(Path::new(ROOT).join("docs/install.md")).unwrap();
    let section = install.split("\n## Kustomize versions\n").nth(1).expect("docs/install.md: ## Kustomize versions");
    let bold = |what: &str| {
        let at = section.find(&format!("**{what} v")).unwrap_or_else(|| panic!("no **{what} vX** stated"));
        section[at + what.len() + 4..].split("**").next().unwrap().to_string()
    };
    (bold("kubectl"), version(&bold("kustomize")))
}

#[test]
fn the_kustomizations_need_no_newer_kustomize_than_the_install_guide_states() {
    let (kubectl_minimum, minimum) = stated_minimum();
    let mut files: Vec<(String, String)> = Vec::new();
    fn walk(dir: &Path, out: &mut Vec<(String, String)>) {
        for entry in std::fs::read_dir(dir).unwrap() {
            let path = entry.unwrap().path();
            if path.is_dir() {
                walk(&path, out);
            } else if path.ends_with("kustomization.yaml") {
                let rel = path.strip_prefix(ROOT).unwrap().display().to_string();
                out.push((rel, std::fs::read_to_string(&path).unwrap()));
            }
        }
    }
    walk(&Path::new(ROOT).join("manifests"), &mut files);
    for s in snippets() {
        for (path, text) in s.files.into_iter().filter(|(p, _)| p.ends_with("kustomization.yaml")) {
            files.push((format!("{}: {path}", s.at), text));
        }
    }
    let mut newest = ((0, 0, 0), String::new());
    for (at, text) in &files {
        let (keys, component) = fields(text);
        for key in keys {
            let since = FIELDS.iter().find(|(f, _)| *f == key).map(|(_, v)| *v);
            let since = since.unwrap_or_else(|| panic!("{at}: `{key}:`: add the kustomize version that brought it"));
            assert!(since <= minimum, "{at}: `{key}:` needs kustomize {since:?}, above the stated {minimum:?}");
            if since > newest.0 {
                newest = (since, format!("{at}: {key}"));
            }
        }
        if component {
            assert!(COMPONENT <= minimum, "{at}: kind: Component needs kustomize {COMPONENT:?}");
        }
        for (what, uses, since) in FEATURES {
            if text.lines().any(uses) {
                assert!(*since <= minimum, "{at}: {what} needs kustomize {since:?}, above the stated {minimum:?}");
                if *since > newest.0 {
                    newest = (*since, format!("{at}: {what}"));
                }
            }
        }
    }
    // Not higher than needed: the newest field used is the stated minimum.
    assert_eq!(newest.0, minimum, "the stated minimum is not the newest field used ({})", newest.1);
    // The kubectl stated is the first whose kustomize has it.
    let first = KUBECTL_KUSTOMIZE.iter().find(|(_, k)| *k >= minimum).expect("a kubectl with that kustomize").0;
    assert_eq!(kubectl_minimum, format!("1.{first}"), "docs/install.md's kubectl minimum");
    let readme = std::fs::read_to_string(Path::new(ROOT).join("README.md")).unwrap();
    assert!(readme.contains(&format!("kubectl v{kubectl_minimum} or later")), "the README states the same kubectl");
    // This machine's kubectl renders them (the snippet test does): it must
    // be at least that minimum, or the rendering proves nothing about it.
    let client = run(&mut kubectl(&["version", "--client"]), None).unwrap();
    let bundled = client.lines().find_map(|l| l.strip_prefix("Kustomize Version: ")).expect("kubectl's kustomize");
    assert!(version(bundled) >= minimum, "kubectl here bundles kustomize {bundled}");
    println!(
        "{} kustomizations within kustomize {minimum:?} (kubectl v{kubectl_minimum}); rendered with {bundled}",
        files.len()
    );
}

#[test]
fn the_version_check_refuses_a_newer_field() {
    let (keys, component) = fields(
        "apiVersion: kustomize.config.k8s.io/v1alpha1\nkind: Component\n# labels: no\nlabels:\n- pairs: {a: b}\nresources: [x]\n",
    );
    assert_eq!(keys, ["apiVersion", "kind", "labels", "resources"]);
    assert!(component);
    let labels = FIELDS.iter().find(|(f, _)| *f == "labels").unwrap().1;
    assert!(labels > KUBECTL_KUSTOMIZE[0].1 && labels > KUBECTL_KUSTOMIZE[1].1, "kubectl 1.20 and 1.21 lack labels");
    assert_eq!(version("v4.2.0"), (4, 2, 0));
    // Each feature is seen where it is used, and not in what v4.1.0 had.
    let seen = |line: &str| FEATURES.iter().filter(|(_, uses, _)| uses(line)).count();
    assert_eq!(seen(r#"    fieldPaths: ["metadata.annotations.[opstatus.kube9.dev/sidecar]"]"#), 1);
    assert_eq!(seen("  - select: {kind: ClusterRole, labelSelector: a=b}"), 1);
    assert_eq!(seen(r#"    fieldPaths: ["spec.groups.0.rules.*.annotations.runbook_url"]"#), 1);
    assert_eq!(seen("    fieldPaths: [spec.template.spec.containers.[name=opstatus].image, subjects.0.name]"), 0);
    assert_eq!(seen("- target: {kind: Deployment, labelSelector: a=b}"), 0);
}

#[test]
fn the_readme_stays_short_and_indexes_the_docs() {
    let readme = std::fs::read_to_string(Path::new(ROOT).join("README.md")).unwrap();
    let lines = readme.lines().count();
    assert!(lines <= 300, "README.md has {lines} lines: at most 300; move detail into docs/");
    let index = readme.split("\n## Documentation\n").nth(1).expect("README.md has ## Documentation");
    for (name, _) in markdown().into_iter().filter(|(n, _)| n.starts_with("docs/")) {
        assert!(index.contains(&format!("]({name})")), "the README's documentation index lacks {name}");
    }
    assert!(index.contains("](CONTRIBUTING.md)"));
}
