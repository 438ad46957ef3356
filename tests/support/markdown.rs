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
