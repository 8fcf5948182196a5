//! The metric names a Grafana dashboard's queries use, so a test can check
//! each against a real `/metrics` page (a renamed metric fails it).

use std::collections::BTreeSet;
use std::path::Path;

/// Every identifier of the PromQL expressions (`panels[].targets[].expr`) of
/// the dashboard at `path` that starts with one of `prefixes`.
pub fn dashboard_metrics(path: &Path, prefixes: &[&str]) -> BTreeSet<String> {
    let text =
        std::fs::read_to_string(path).unwrap_or_else(|error| panic!("{}: {error}", path.display()));
    let dashboard: serde_json::Value = serde_json::from_str(&text).unwrap();
    let mut names = BTreeSet::new();
    for panel in dashboard["panels"].as_array().unwrap() {
        for target in panel["targets"].as_array().unwrap() {
            let expression = target["expr"].as_str().unwrap();
            for word in expression.split(|c: char| !(c.is_ascii_alphanumeric() || c == '_')) {
                if prefixes.iter().any(|prefix| word.starts_with(prefix)) {
                    names.insert(word.to_owned());
                }
            }
        }
    }
    names
}
