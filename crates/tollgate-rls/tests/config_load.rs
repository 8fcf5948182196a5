//! Every `config_load` case of envoyproxy/ratelimit's conformance data: the
//! files load, or fail with the Go service's exact error.

use serde_json::Value;
use tollgate_test_support::conformance;

#[test]
fn every_config_load_case() {
    let cases = conformance::cases("config_load.jsonl");
    let mut failures = Vec::new();
    for case in &cases {
        let id = case["id"].as_str().unwrap_or("?");
        let outcome = conformance::load_case(case);
        let expect = &case["expect"];
        match (expect.get("error").and_then(Value::as_str), outcome) {
            (None, Ok(_)) => {}
            (None, Err(error)) => failures.push(format!("{id}: expected ok, got error {error:?}")),
            (Some(expected), Ok(_)) => {
                failures.push(format!("{id}: expected error {expected:?}, got ok"));
            }
            (Some(expected), Err(error)) => {
                let actual = error.to_string();
                // README: for load-bad-yaml compare only the text before the
                // YAML parser's own message.
                let matches = if id == "load-bad-yaml" {
                    let prefix = "error loading config file: ";
                    let head =
                        &expected[..expected.find(prefix).expect("the prefix") + prefix.len()];
                    actual.starts_with(head)
                } else {
                    actual == expected
                };
                if !matches {
                    failures.push(format!("{id}: expected error {expected:?}, got {actual:?}"));
                }
            }
        }
    }
    conformance::report("config_load", cases.len(), &failures);
}
