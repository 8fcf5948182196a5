//! The envoyproxy/ratelimit conformance cases copied into
//! `tests/conformance/envoy-rls/` at the workspace root: each `.jsonl` file's
//! cases, their count pinned, and their configuration files.

use std::path::PathBuf;

use serde_json::Value;
use tollgate_rls::{ConfigError, LoaderOptions, RateLimitConfig};

/// The conformance folder.
pub fn conformance_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../tests/conformance/envoy-rls")
}

/// How many cases each `.jsonl` file read here holds (`aggregate.jsonl`'s
/// 12 are pinned where `tollgate-rls`'s unit test reads them,
/// `src/service/aggregate_cases.rs`): a lost or cut file fails its runner
/// instead of passing with fewer cases.
const CASE_COUNTS: [(&str, usize); 4] = [
    ("config_load.jsonl", 22),
    ("counter.jsonl", 7),
    ("lookup.jsonl", 48),
    ("rls.jsonl", 12),
];

/// Every case of a `.jsonl` file, checked to be as many as
/// [`CASE_COUNTS`] pins.
pub fn cases(file: &str) -> Vec<Value> {
    let cases = read_cases(file);
    let pinned = CASE_COUNTS
        .iter()
        .find(|(name, _)| *name == file)
        .map(|(_, count)| *count);
    assert_eq!(Some(cases.len()), pinned, "the cases of {file}");
    cases
}

/// Every case of a `.jsonl` file.
fn read_cases(file: &str) -> Vec<Value> {
    let path = conformance_dir().join(file);
    let text = std::fs::read_to_string(&path)
        .unwrap_or_else(|error| panic!("cannot read {}: {error}", path.display()));
    text.lines()
        .filter(|line| !line.trim().is_empty())
        .map(|line| serde_json::from_str(line).expect("a JSON case"))
        .collect()
}

/// Loads a case's `files` (paths under `configs/`, each named by its base name
/// as the Go unit tests do) with its `merge_domains`.
pub fn load_case(case: &Value) -> Result<RateLimitConfig, ConfigError> {
    let options = LoaderOptions {
        merge_domains: case["merge_domains"].as_bool().unwrap_or(false),
        extensions: false,
    };
    let files: Vec<(String, String)> = case["files"]
        .as_array()
        .expect("files")
        .iter()
        .map(|file| {
            let relative = file.as_str().expect("a file path");
            let content = config_file(relative).unwrap_or_else(|error| panic!("{error}"));
            let name = relative.rsplit('/').next().unwrap_or(relative).to_owned();
            (name, content)
        })
        .collect();
    RateLimitConfig::from_sources(&files, &options)
}

/// The text of `relative`, a path under `configs/`.
///
/// # Errors
///
/// The file cannot be read: its path and why.
pub fn config_file(relative: &str) -> Result<String, String> {
    let path = conformance_dir().join("configs").join(relative);
    std::fs::read_to_string(&path)
        .map_err(|error| format!("cannot read {}: {error}", path.display()))
}

/// Panics listing every failure, if any.
pub fn report(kind: &str, total: usize, failures: &[String]) {
    assert!(total > 0, "no {kind} case ran");
    assert!(
        failures.is_empty(),
        "{} of {total} {kind} cases failed:\n{}",
        failures.len(),
        failures.join("\n")
    );
}
