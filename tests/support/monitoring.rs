//! The monitoring kit's PrometheusRule as a Prometheus rule file: its
//! `spec` (the rule groups), without the annotations (promtool would compare
//! them too; a test checks them apart).

pub fn rule_file() -> String {
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/manifests/components/monitoring/prometheusrule.yaml");
    let rule = std::fs::read_to_string(path).unwrap();
    let spec = rule.split_once("\nspec:\n").expect("a spec").1;
    let mut out = String::new();
    let mut skipping: Option<usize> = None;
    for line in spec.lines() {
        let indent = line.len() - line.trim_start().len();
        if let Some(at) = skipping {
            if line.trim().is_empty() || indent > at {
                continue;
            }
            skipping = None;
        }
        if line.trim() == "annotations:" {
            skipping = Some(indent);
            continue;
        }
        out.push_str(line.strip_prefix("  ").unwrap_or(line));
        out.push('\n');
    }
    out
}
