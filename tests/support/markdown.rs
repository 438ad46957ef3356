//! Markdown as the docs tests read it: the fenced code blocks of a text.

/// The fenced blocks of a Markdown text, each dedented by its fence's
/// indentation: (info string, body).
pub fn fenced_blocks(text: &str) -> Vec<(String, String)> {
    let mut blocks = Vec::new();
    let mut lines = text.lines();
    while let Some(line) = lines.next() {
        let indent = line.len() - line.trim_start().len();
        let Some(info) = line.trim_start().strip_prefix("```") else { continue };
        let mut body = String::new();
        for line in lines.by_ref() {
            if line.trim_start().starts_with("```") {
                break;
            }
            body.push_str(line.get(indent..).unwrap_or(line.trim_start()));
            body.push('\n');
        }
        blocks.push((info.trim().to_string(), body));
    }
    blocks
}

/// The files a documented kustomize snippet writes (paths relative to the
/// directory the reader works in), or none. A `yaml` block holding
/// `kind: Kustomization`: its files start at each `# my-overlay/…` line
/// (one file without such a line is `my-overlay/kustomization.yaml`). A
/// `sh` block: each `cat > FILE <<EOF`, with `$IMAGE` as `image`, kept when
/// one of them is a kustomization.
pub fn snippet_files(info: &str, body: &str, image: &str) -> Vec<(String, String)> {
    let mut files: Vec<(String, String)> = Vec::new();
    if info == "yaml" && body.contains("kind: Kustomization") {
        for line in body.lines() {
            if let Some(path) = line.strip_prefix("# my-overlay/") {
                let path = path.split([' ', ':']).next().unwrap();
                files.push((format!("my-overlay/{path}"), String::new()));
            } else if files.is_empty() {
                files.push(("my-overlay/kustomization.yaml".into(), String::new()));
            }
            let file = &mut files.last_mut().unwrap().1;
            file.push_str(line);
            file.push('\n');
        }
    } else if info == "sh" {
        let mut lines = body.lines();
        while let Some(line) = lines.next() {
            let Some(rest) = line.strip_prefix("cat > ") else { continue };
            let (path, marker) = rest.split_once(" <<").expect("cat > FILE <<MARKER");
            let mut file = String::new();
            for line in lines.by_ref().take_while(|l| *l != marker) {
                file.push_str(&line.replace("$IMAGE", image));
                file.push('\n');
            }
            files.push((path.to_string(), file));
        }
        if !files.iter().any(|(p, _)| p.ends_with("kustomization.yaml")) {
            files.clear();
        }
    }
    files
}

/// The snippets of `doc` (a path under the repository) whose text holds
/// `marker`, as their files, in the order they appear.
pub fn snippets_with(doc: &str, marker: &str, image: &str) -> Vec<Vec<(String, String)>> {
    let text = std::fs::read_to_string(std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join(doc)).unwrap();
    fenced_blocks(&text)
        .into_iter()
        .filter(|(_, body)| body.contains(marker))
        .map(|(info, body)| snippet_files(&info, &body, image))
        .filter(|files| !files.is_empty())
        .collect()
}

/// The install guide's `opstatus-target` component, naming `deployment`
/// and its pod's ServiceAccount (here of the same name) instead of its
/// example's `my-operator`: the kustomization.yaml text.
pub fn opstatus_target(deployment: &str) -> String {
    opstatus_target_for(deployment, deployment)
}

/// The install guide's `opstatus-target`, naming `deployment` and its
/// pod's ServiceAccount `account`.
pub fn opstatus_target_for(deployment: &str, account: &str) -> String {
    let marker = "# my-overlay/opstatus-target/kustomization.yaml: the one place";
    let snippet =
        snippets_with("docs/install.md", marker, "").into_iter().next().expect("docs/install.md: opstatus-target");
    let (_, text) = snippet.into_iter().find(|(p, _)| p == "my-overlay/opstatus-target/kustomization.yaml").unwrap();
    assert!(text.contains("name: my-operator ") && text.contains("# its pod's ServiceAccount"), "{text}");
    let named = |line: &str| match line.contains("# its pod's ServiceAccount") {
        true => line.replace("my-operator", account),
        false => line.replace("name: my-operator", &format!("name: {deployment}")),
    };
    text.lines().map(|l| named(l) + "\n").collect()
}
