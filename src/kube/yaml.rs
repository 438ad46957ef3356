//! The subset of YAML that kubeconfig files use, read into `serde_json::Value`.
//!
//! Kubeconfig is the only YAML opstatus reads, and every tool that writes one
//! (kubectl, kind, minikube, cloud CLIs) emits the same plain shape: block
//! mappings and sequences, plain or quoted scalars, one-line flow collections
//! (`{}`, `[]`, `{cluster: a, user: b}`), comments, and sometimes JSON; and,
//! in an exec plugin's `installHint`, block scalars (`|`, `>-`, `|2`: what
//! the Azure CLI and the Kubernetes docs write) and plain scalars folded
//! onto the next lines (what gcloud writes). That is what this module
//! accepts; anything else (anchors, tags, multi-line quoted strings or
//! flow) is refused with the line number, never guessed at.
//!
//! An error says where (line and column) and what was expected, and never
//! quotes the input: a kubeconfig holds tokens and keys, and a parse error
//! ends up in logs.

use serde_json::{Map, Value};

/// Nesting deeper than this is refused: kubeconfig needs five levels, and
/// the bound keeps a hostile file from exhausting the stack.
const MAX_DEPTH: usize = 64;

#[derive(Clone, Debug)]
struct Line<'a> {
    number: usize,
    indent: usize,
    text: &'a str,
    /// The text of the block scalar this line's value opens (`key: |`).
    block: Option<String>,
}

/// Parses one YAML document (or a JSON one) into a JSON value.
pub fn parse(input: &str) -> Result<Value, String> {
    let input = input.strip_prefix('\u{feff}').unwrap_or(input);
    if input.trim_start().starts_with('{')
        && let Ok(v) = serde_json::from_str(input)
    {
        return Ok(v);
    }
    let raw: Vec<&str> = input.lines().collect();
    let mut lines = Vec::new();
    let mut i = 0;
    while i < raw.len() {
        let number = i + 1;
        let content = raw[i].trim_end();
        i += 1;
        let trimmed = content.trim_start();
        if trimmed.is_empty() || trimmed.starts_with('#') {
            continue;
        }
        let indent = content.len() - trimmed.len();
        if let Some(tab) = content[..indent].find('\t') {
            return Err(err(number, tab + 1, "tabs are not allowed in indentation"));
        }
        if indent == 0 && (trimmed == "---" || trimmed.starts_with("--- ")) {
            if lines.is_empty() {
                continue;
            }
            return Err(err(number, 1, "only one YAML document is supported"));
        }
        if indent == 0 && trimmed == "..." {
            break;
        }
        if indent == 0 && trimmed.starts_with('%') {
            return Err(err(number, 1, "YAML directives are not supported"));
        }
        let block = block_indicator(trimmed).map(|indicator| {
            let (text, end) = block_scalar(&raw[i..], indent, indicator);
            i += end;
            text
        });
        lines.push(Line { number, indent, text: trimmed, block });
    }
    if lines.is_empty() {
        return Ok(Value::Null);
    }
    let mut parser = Parser { lines, pos: 0 };
    let indent = parser.lines[0].indent;
    let value = parser.block(indent, 0)?;
    if let Some(extra) = parser.lines.get(parser.pos) {
        return Err(at_line(extra, "unexpected indentation"));
    }
    Ok(value)
}

/// Why a document could not be read, with its 1-based line and column (in
/// characters). The message never holds text from the document.
fn err(line: usize, column: usize, message: impl std::fmt::Display) -> String {
    format!("line {line}, column {column}: {message}")
}

/// An error about a whole line: its column is where the line's text starts.
fn at_line(line: &Line<'_>, message: impl std::fmt::Display) -> String {
    err(line.number, line.indent + 1, message)
}

/// The 1-based column of `part`, a suffix of `line.text`.
fn column_of(line: &Line<'_>, part: &str) -> usize {
    line.indent + 1 + line.text[..line.text.len() - part.len()].chars().count()
}

/// The block scalar indicator (`|`, `>`, with chomping and indentation:
/// `|-`, `>+`, `|2`) that ends a `key: |` or `- |` line, if any.
fn block_indicator(text: &str) -> Option<&str> {
    let text = text.split(" #").next().unwrap_or(text).trim_end();
    let (before, token) = text.rsplit_once(' ')?;
    let before = before.trim_end();
    let indicator = token.starts_with(['|', '>']) && token[1..].bytes().all(|b| matches!(b, b'+' | b'-' | b'1'..=b'9'));
    (indicator && (before.ends_with(':') || before == "-" || before.ends_with(" -"))).then_some(token)
}

/// A block scalar's text from the lines after its indicator (those more
/// indented than `parent`, and blank ones), and how many lines it took.
fn block_scalar(lines: &[&str], parent: usize, indicator: &str) -> (String, usize) {
    let taken = lines.iter().take_while(|l| l.trim().is_empty() || l.len() - l.trim_start().len() > parent).count();
    let body = &lines[..taken];
    let indent = match indicator.bytes().find(u8::is_ascii_digit) {
        Some(d) => parent + usize::from(d - b'0'),
        None => body.iter().find(|l| !l.trim().is_empty()).map_or(0, |l| l.len() - l.trim_start().len()),
    };
    let mut kept: Vec<&str> = body.iter().map(|l| l.get(indent..).unwrap_or_else(|| l.trim_start())).collect();
    let trailing = kept.iter().rev().take_while(|l| l.trim().is_empty()).count();
    kept.truncate(kept.len() - trailing);
    let mut text = if indicator.starts_with('>') {
        // Folded: lines joined by spaces, an empty line a line break.
        kept.join("\n").replace("\n\n", "\u{0}").replace('\n', " ").replace('\u{0}', "\n")
    } else {
        kept.join("\n")
    };
    if indicator.contains('+') {
        text += &"\n".repeat(trailing + 1);
    } else if !indicator.contains('-') && !text.is_empty() {
        text.push('\n');
    }
    (text, taken)
}

struct Parser<'a> {
    lines: Vec<Line<'a>>,
    pos: usize,
}

fn is_sequence_item(text: &str) -> bool {
    text == "-" || text.starts_with("- ")
}

impl<'a> Parser<'a> {
    fn block(&mut self, indent: usize, depth: usize) -> Result<Value, String> {
        let line = &self.lines[self.pos];
        if depth > MAX_DEPTH {
            return Err(at_line(line, "nesting is too deep"));
        }
        if is_sequence_item(line.text) {
            self.sequence(indent, depth)
        } else if split_key(line.text).is_some() {
            self.mapping(indent, depth)
        } else {
            let line = line.clone();
            self.pos += 1;
            scalar_or_flow(line.text, line.number, line.indent + 1)
        }
    }

    /// The value of a key or item whose inline part was empty: a nested
    /// block on the following lines, or null.
    fn nested(&mut self, parent_indent: usize, allow_same_indent_seq: bool, depth: usize) -> Result<Value, String> {
        match self.lines.get(self.pos) {
            Some(next) if next.indent > parent_indent => self.block(next.indent, depth + 1),
            // `key:\n- item` at the key's own indentation is a sequence value.
            Some(next) if allow_same_indent_seq && next.indent == parent_indent && is_sequence_item(next.text) => {
                self.sequence(parent_indent, depth + 1)
            }
            _ => Ok(Value::Null),
        }
    }

    /// The value that follows a key or a `- ` on its line: a block scalar,
    /// or a scalar or flow collection, a plain scalar continued on the more
    /// indented lines below that are not `key: value` (folded with spaces).
    fn inline(&mut self, line: &Line<'_>, rest: &str) -> Result<Value, String> {
        if let Some(block) = &line.block {
            return Ok(Value::String(block.clone()));
        }
        let mut value = scalar_or_flow(rest, line.number, column_of(line, rest))?;
        if let Value::String(text) = &mut value
            && !rest.starts_with(['"', '\'', '[', '{'])
        {
            while let Some(next) =
                self.lines.get(self.pos).filter(|n| n.indent > line.indent && split_key(n.text).is_none())
            {
                text.push(' ');
                text.push_str(next.text.split(" #").next().unwrap_or_default().trim_end());
                self.pos += 1;
            }
        }
        Ok(value)
    }

    fn mapping(&mut self, indent: usize, depth: usize) -> Result<Value, String> {
        let mut map = Map::new();
        while let Some(line) = self.lines.get(self.pos).cloned() {
            if line.indent < indent || (line.indent == indent && is_sequence_item(line.text)) {
                break;
            }
            if line.indent > indent {
                return Err(at_line(&line, "unexpected indentation"));
            }
            let (key, rest) = split_key(line.text).ok_or_else(|| at_line(&line, "expected `key: value`"))?;
            let key = match scalar_or_flow(key, line.number, line.indent + 1)? {
                Value::String(s) => s,
                Value::Null => String::new(),
                Value::Bool(b) => b.to_string(),
                _ => return Err(at_line(&line, "keys must be scalars")),
            };
            self.pos += 1;
            let value = if rest.is_empty() { self.nested(indent, true, depth)? } else { self.inline(&line, rest)? };
            if map.insert(key, value).is_some() {
                return Err(at_line(&line, "duplicate key: this key is already set in the same mapping"));
            }
        }
        Ok(Value::Object(map))
    }

    fn sequence(&mut self, indent: usize, depth: usize) -> Result<Value, String> {
        let mut items = Vec::new();
        while let Some(line) = self.lines.get(self.pos).cloned() {
            if line.indent != indent || !is_sequence_item(line.text) {
                if line.indent > indent {
                    return Err(at_line(&line, "unexpected indentation"));
                }
                break;
            }
            let rest = line.text[1..].trim_start();
            if rest.is_empty() {
                self.pos += 1;
                items.push(self.nested(indent, false, depth)?);
            } else if is_sequence_item(rest) || split_key(rest).is_some() {
                // `- key: v` / `- - v`: a compact block that starts on this
                // line; its column is where `rest` starts.
                let column = indent + (line.text.len() - rest.len());
                self.lines[self.pos] = Line { number: line.number, indent: column, text: rest, block: line.block };
                items.push(self.block(column, depth + 1)?);
            } else {
                self.pos += 1;
                items.push(self.inline(&line, rest)?);
            }
        }
        Ok(Value::Array(items))
    }
}

/// Splits `key: rest` (or `key:`) outside quotes; `None` when the line is
/// not a mapping entry.
fn split_key(text: &str) -> Option<(&str, &str)> {
    if text.starts_with(['{', '[']) {
        return None;
    }
    let key_end = if let Some(q @ ('"' | '\'')) = text.chars().next() {
        let close = closing_quote(text, q)?;
        let after = &text[close + 1..];
        if !after.starts_with(':') {
            return None;
        }
        close + 1
    } else {
        let bytes = text.as_bytes();
        (0..bytes.len()).find(|&i| bytes[i] == b':' && (i + 1 == bytes.len() || bytes[i + 1] == b' '))?
    };
    let rest = text[key_end + 1..].trim_start();
    let rest = if rest.starts_with('#') { "" } else { rest };
    Some((&text[..key_end], rest))
}

/// The index of the quote that closes the string opened at 0.
fn closing_quote(text: &str, quote: char) -> Option<usize> {
    let mut chars = text.char_indices().skip(1).peekable();
    while let Some((i, c)) = chars.next() {
        if quote == '"' && c == '\\' {
            chars.next();
        } else if c == quote {
            if quote == '\'' && chars.peek().map(|&(_, c)| c) == Some('\'') {
                chars.next();
                continue;
            }
            return Some(i);
        }
    }
    None
}

/// An inline value: a quoted or plain scalar or a one-line flow collection,
/// with an optional trailing comment. `column` is where `text` starts.
fn scalar_or_flow(text: &str, line: usize, column: usize) -> Result<Value, String> {
    let mut flow = Flow { text, pos: 0, line, column };
    let value = flow.value(0, false)?;
    flow.skip_spaces();
    let rest = &text[flow.pos..];
    if !rest.is_empty() && !rest.starts_with('#') {
        return Err(flow.error("expected the end of the line or a `# comment` after the value"));
    }
    Ok(value)
}

struct Flow<'a> {
    text: &'a str,
    pos: usize,
    line: usize,
    /// The column of `text`'s first character.
    column: usize,
}

impl<'a> Flow<'a> {
    /// An error at the current position.
    fn error(&self, message: impl std::fmt::Display) -> String {
        err(self.line, self.column + self.text[..self.pos].chars().count(), message)
    }

    fn unclosed(&self, close: char) -> String {
        self.error(format!("unclosed flow collection: expected `,` or `{close}` on the same line"))
    }

    fn rest(&self) -> &'a str {
        &self.text[self.pos..]
    }

    fn skip_spaces(&mut self) {
        let rest = self.rest();
        self.pos += rest.len() - rest.trim_start().len();
    }

    fn value(&mut self, depth: usize, in_flow: bool) -> Result<Value, String> {
        if depth > MAX_DEPTH {
            return Err(self.error("nesting is too deep"));
        }
        self.skip_spaces();
        match self.rest().chars().next() {
            Some('{') => self.collection('}', depth),
            Some('[') => self.collection(']', depth),
            Some(q @ ('"' | '\'')) => self.quoted(q).map(Value::String),
            Some('|' | '>') => Err(self.error("block scalars (| and >) are not supported")),
            Some('&' | '*' | '!') => Err(self.error("anchors, aliases and tags are not supported")),
            _ => Ok(self.plain(in_flow)),
        }
    }

    fn collection(&mut self, close: char, depth: usize) -> Result<Value, String> {
        self.pos += 1;
        let mut map = Map::new();
        let mut items = Vec::new();
        loop {
            self.skip_spaces();
            if self.rest().starts_with(close) {
                self.pos += 1;
                break;
            }
            if self.rest().is_empty() {
                return Err(self.unclosed(close));
            }
            let item = self.value(depth + 1, true)?;
            self.skip_spaces();
            if close == '}' {
                let key = match item {
                    Value::String(s) => s,
                    _ => return Err(self.error("flow mapping keys must be strings")),
                };
                let value = if self.rest().starts_with(':') {
                    self.pos += 1;
                    self.value(depth + 1, true)?
                } else {
                    Value::Null
                };
                map.insert(key, value);
            } else {
                items.push(item);
            }
            self.skip_spaces();
            if self.rest().starts_with(',') {
                self.pos += 1;
            } else if self.rest().is_empty() {
                return Err(self.unclosed(close));
            } else if !self.rest().starts_with(close) {
                return Err(self.error(format!("expected `,` or `{close}` in a flow collection")));
            }
        }
        Ok(if close == '}' { Value::Object(map) } else { Value::Array(items) })
    }

    fn quoted(&mut self, quote: char) -> Result<String, String> {
        let rest = self.rest();
        let close = closing_quote(rest, quote).ok_or_else(|| {
            self.error(format!("unterminated quoted string: expected a closing {quote} on the same line"))
        })?;
        if quote == '\'' {
            self.pos += close + 1;
            return Ok(rest[1..close].replace("''", "'"));
        }
        // The escapes kubeconfigs hold (\n, \", \\, \uXXXX) are JSON's too.
        let string = serde_json::from_str(&rest[..=close])
            .map_err(|_| self.error("unsupported escape or control character in this double-quoted string"))?;
        self.pos += close + 1;
        Ok(string)
    }

    fn plain(&mut self, in_flow: bool) -> Value {
        let rest = self.rest();
        let bytes = rest.as_bytes();
        let mut end = bytes.len();
        for i in 0..bytes.len() {
            let at_comment = bytes[i] == b'#' && i > 0 && bytes[i - 1] == b' ';
            let at_flow_end = in_flow
                && (matches!(bytes[i], b',' | b'}' | b']')
                    || (bytes[i] == b':' && bytes.get(i + 1).is_none_or(|&b| b == b' ' || b == b',')));
            if at_comment || at_flow_end {
                end = i;
                break;
            }
        }
        let word = rest[..end].trim_end();
        self.pos += word.len();
        match word {
            "" | "~" | "null" | "Null" | "NULL" => Value::Null,
            "true" | "True" | "TRUE" => Value::Bool(true),
            "false" | "False" | "FALSE" => Value::Bool(false),
            _ => Value::String(word.to_string()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn reads_a_kubectl_written_kubeconfig() {
        let doc = r#"
apiVersion: v1
clusters:
- cluster:
    certificate-authority-data: LS0tLS1CRUdJTg==
    server: https://127.0.0.1:6443
  name: kind-kind
contexts:
- context:
    cluster: kind-kind
    user: kind-kind
    namespace: "team-a"   # a comment
  name: kind-kind
current-context: kind-kind
kind: Config
preferences: {}
users:
- name: kind-kind
  user:
    token: 'abc''def'
"#;
        assert_eq!(
            parse(doc).unwrap(),
            json!({
                "apiVersion": "v1",
                "clusters": [{"cluster": {"certificate-authority-data": "LS0tLS1CRUdJTg==", "server": "https://127.0.0.1:6443"}, "name": "kind-kind"}],
                "contexts": [{"context": {"cluster": "kind-kind", "user": "kind-kind", "namespace": "team-a"}, "name": "kind-kind"}],
                "current-context": "kind-kind",
                "kind": "Config",
                "preferences": {},
                "users": [{"name": "kind-kind", "user": {"token": "abc'def"}}]
            })
        );
    }

    #[test]
    fn reads_indented_sequences_flow_maps_and_scalars() {
        let doc = "---\na:\n  - x\n  - {cluster: local, user: \"ad\\\"min\"}\n  -\n    k: v\nb: [1, two, 'three']\nc: ~\nd: true\ne: http://h:1/p # c\n";
        assert_eq!(
            parse(doc).unwrap(),
            json!({"a": ["x", {"cluster": "local", "user": "ad\"min"}, {"k": "v"}], "b": ["1", "two", "three"], "c": null, "d": true, "e": "http://h:1/p"})
        );
    }

    /// The cluster keys opstatus acts on besides the server and the CA:
    /// `tls-server-name` (verified against) and `proxy-url` (the API
    /// server is reached through it).
    #[test]
    fn reads_a_clusters_tls_server_name_and_proxy_url() {
        let doc = "clusters:\n- cluster:\n    server: https://10.0.0.1:6443\n    tls-server-name: kubernetes.default.svc\n    \
                   proxy-url: http://proxy.example:3128 # egress\n  name: c\n";
        let cluster = &parse(doc).unwrap()["clusters"][0]["cluster"];
        assert_eq!(cluster["tls-server-name"], "kubernetes.default.svc");
        assert_eq!(cluster["proxy-url"], "http://proxy.example:3128");
    }

    /// The exec users the cloud CLIs write: gcloud folds a long plain
    /// `installHint` onto the next line, the Azure CLI writes a block
    /// scalar with an indentation indicator and blank lines, kubelogin's
    /// docs one with `#` lines in it.
    #[test]
    fn reads_the_exec_users_cloud_clis_write() {
        let gke = "users:\n- name: gke_p_z_c\n  user:\n    exec:\n      apiVersion: client.authentication.k8s.io/v1beta1\n      \
                   args: null\n      command: gke-gcloud-auth-plugin\n      env: null\n      installHint: Install \
                   gke-gcloud-auth-plugin for use with kubectl by following\n        https://cloud.google.com/blog # c\n      \
                   interactiveMode: IfAvailable\n      provideClusterInfo: true\n";
        let exec = &parse(gke).unwrap()["users"][0]["user"]["exec"];
        assert_eq!(
            exec["installHint"],
            "Install gke-gcloud-auth-plugin for use with kubectl by following https://cloud.google.com/blog"
        );
        assert_eq!(
            (&exec["args"], &exec["env"], &exec["provideClusterInfo"]),
            (&Value::Null, &Value::Null, &json!(true))
        );
        let aks = "exec:\n  args:\n  - get-token\n  - --login\n  - devicecode\n  command: kubelogin\n  env: null\n  \
                   installHint: |2\n\n    kubelogin is not installed.\n\n    # see https://aka.ms/aks/kubelogin\n  \
                   provideClusterInfo: false\n";
        let exec = &parse(aks).unwrap()["exec"];
        assert_eq!(exec["installHint"], "\nkubelogin is not installed.\n\n# see https://aka.ms/aks/kubelogin\n");
        assert_eq!(exec["args"], json!(["get-token", "--login", "devicecode"]));
        assert_eq!(exec["provideClusterInfo"], false);
        let chomped = "a: |-\n  one\n   two\n\nb: >\n  folded\n  text\n\n  para\nc: |+\n  kept\n\nd:\n- >-\n  x\n  y\n";
        assert_eq!(
            parse(chomped).unwrap(),
            json!({"a": "one\n two", "b": "folded text\npara\n", "c": "kept\n\n", "d": ["x y"]})
        );
    }

    #[test]
    fn reads_json_kubeconfigs() {
        let doc = "{\n \"current-context\": \"x\",\n \"contexts\": []\n}";
        assert_eq!(parse(doc).unwrap(), json!({"current-context": "x", "contexts": []}));
    }

    #[test]
    fn empty_documents_are_null() {
        assert_eq!(parse("").unwrap(), Value::Null);
        assert_eq!(parse("# only a comment\n---\n").unwrap(), Value::Null);
    }

    #[test]
    fn refuses_what_it_does_not_understand_with_the_line_and_column() {
        let cases = [
            ("a: b\n  c: d\n", 2, 3, "unexpected indentation"),
            ("a: [x, |]\n", 1, 8, "block scalars"),
            ("a: &x b\n", 1, 4, "anchors"),
            ("a: b\n\tc: d\n", 2, 1, "tabs"),
            ("a: {b: c\n", 1, 9, "unclosed flow collection: expected `,` or `}`"),
            ("a: 'open\n", 1, 4, "unterminated quoted string: expected a closing '"),
            ("a: b\na: c\n", 2, 1, "duplicate key"),
            ("a: b\n---\nc: d\n", 2, 1, "one YAML document"),
            ("a: \"x\" y\n", 1, 8, "expected the end of the line or a `# comment` after the value"),
            ("a: \"x\\q\"\n", 1, 4, "unsupported escape or control character"),
            ("a: \"\\u12\"\n", 1, 4, "unsupported escape or control character"),
            ("l:\n  - [1, {a: b} c]\n", 2, 16, "expected `,` or `]`"),
            ("k:\n  é: \"x\" y\n", 2, 10, "after the value"),
        ];
        for (doc, line, column, needle) in cases {
            let e = parse(doc).unwrap_err();
            assert!(e.starts_with(&format!("line {line}, column {column}: ")), "{doc:?}: {e}");
            assert!(e.contains(needle), "{doc:?}: {e}");
        }
    }

    #[test]
    fn errors_never_quote_the_document() {
        // Each puts a secret where a careless message would echo it.
        let docs = [
            "users:\n- name: u\n  user:\n    token: \"SECRET\" SECRET-TAIL\n",
            "users:\n- user: {token: SECRET, \"x\" SECRET-TAIL}\n",
            "token: 'SECRET\n",
            "token: \"SECRET\\qSECRET\"\n",
            "token: \"\\uSECRET\"\n",
            "SECRET: a\nSECRET: b\n",
            "token: [SECRET, {SECRET]\n",
        ];
        for doc in docs {
            let e = parse(doc).unwrap_err();
            assert!(!e.to_string().contains("SECRET") && !e.to_string().contains("SEC"), "{doc:?}: {e}");
        }
    }

    #[test]
    fn deep_nesting_is_refused_not_a_stack_overflow() {
        let doc = "[".repeat(10_000);
        assert!(parse(&format!("a: {doc}")).unwrap_err().contains("too deep"));
        let mut block = String::new();
        for i in 0..200 {
            block.push_str(&format!("{}k{i}:\n", " ".repeat(i)));
        }
        assert!(parse(&block).unwrap_err().contains("too deep"));
    }
}
