//! Every case of the operations contract (`tests/conformance/`, copied from the
//! shared conformance suite, and this project's additions), run end to end
//! through the built `tollgate run` binary and compared with the expected
//! outputs.

use std::io::Write;
use std::path::PathBuf;
use std::process::{Command, Stdio};

use serde_json::Value;

fn conformance_file(name: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("tests/conformance")
        .join(name)
}

/// Runs `tollgate run -` on `operations` and returns the parsed output array.
fn run(operations: &Value) -> Vec<Value> {
    run_text(&serde_json::to_vec(operations).unwrap())
}

/// Runs `tollgate run -` on the JSON text `input` (which may hold what a
/// `serde_json::Value` cannot, such as `1e400` or a field given twice) and
/// returns the parsed output array.
fn run_text(input: &[u8]) -> Vec<Value> {
    run_with(&[], input).0
}

/// Runs `tollgate run ARGUMENTS -` on `input`; returns the parsed output
/// array and what was printed on stderr.
fn run_with(arguments: &[&str], input: &[u8]) -> (Vec<Value>, String) {
    let mut child = Command::new(env!("CARGO_BIN_EXE_tollgate"))
        .arg("run")
        .args(arguments)
        .arg("-")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("tollgate starts");
    child.stdin.take().unwrap().write_all(input).unwrap();
    let output = child.wait_with_output().unwrap();
    assert!(
        output.status.success(),
        "tollgate run failed: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    (
        serde_json::from_slice(&output.stdout).expect("the output is a JSON array"),
        String::from_utf8(output.stderr).unwrap(),
    )
}

/// Exact equality, with the one latitude the contract gives: `error: invalid
/// policy` may be followed by `: ` and a reason.
fn matches(actual: &Value, expected: &Value) -> bool {
    match (actual, expected) {
        (Value::String(actual), Value::String(expected)) if expected == "error: invalid policy" => {
            actual == expected || actual.starts_with("error: invalid policy: ")
        }
        _ => actual == expected,
    }
}

fn check_case(name: &str, case: &Value) -> usize {
    let operations = &case["ops"];
    compare(name, &run(operations), case, |index| {
        operations[index].to_string()
    })
}

/// Compares `actual` with `case["expected"]`, printing each mismatch with the
/// operation `operation(index)` names; returns how many there are.
fn compare(
    name: &str,
    actual: &[Value],
    case: &Value,
    operation: impl Fn(usize) -> String,
) -> usize {
    let expected = case["expected"].as_array().expect("expected outputs");
    assert_eq!(
        actual.len(),
        expected.len(),
        "{name}: one output per operation"
    );
    let mut failures = 0;
    for (index, (actual, expected)) in actual.iter().zip(expected).enumerate() {
        if !matches(actual, expected) {
            failures += 1;
            eprintln!(
                "{name}, operation {index} {}: expected {expected}, got {actual}",
                operation(index)
            );
        }
    }
    failures
}

#[test]
fn seed_examples() {
    let text = std::fs::read_to_string(conformance_file("seed_examples.json")).unwrap();
    let cases: Vec<Value> = serde_json::from_str(&text).unwrap();
    assert_eq!(cases.len(), 10);
    let failures: usize = cases
        .iter()
        .map(|case| check_case(case["name"].as_str().unwrap(), case))
        .sum();
    assert_eq!(failures, 0, "see the mismatches above");
}

#[test]
fn ops_contract() {
    let text = std::fs::read_to_string(conformance_file("ops_contract.jsonl")).unwrap();
    let cases: Vec<Value> = text
        .lines()
        .map(|line| serde_json::from_str(line).unwrap())
        .collect();
    assert_eq!(cases.len(), 80);
    let failures: usize = cases
        .iter()
        .enumerate()
        .map(|(line, case)| check_case(&format!("ops_contract.jsonl line {}", line + 1), case))
        .sum();
    assert_eq!(failures, 0, "see the mismatches above");
}

/// `input_edges.json`: inputs a `serde_json::Value` cannot hold, each
/// `{"name", "input": the JSON text read, "expected"}`: numbers past every
/// range (`1e400`), policy fields given twice, escapes, extra arguments.
#[test]
fn input_edges() {
    let text = std::fs::read_to_string(conformance_file("input_edges.json")).unwrap();
    let cases: Vec<Value> = serde_json::from_str(&text).unwrap();
    assert_eq!(cases.len(), 7);
    let failures: usize = cases
        .iter()
        .map(|case| {
            let name = case["name"].as_str().unwrap();
            let input = case["input"].as_str().unwrap();
            let actual = run_text(input.as_bytes());
            compare(name, &actual, case, |index| format!("#{index}"))
        })
        .sum();
    assert_eq!(failures, 0, "see the mismatches above");
}

/// A timestamp or units of ten million digits, or an exponent of a thousand,
/// is a wrong argument of its operation, however long.
#[test]
fn numbers_of_any_length_are_wrong_arguments() {
    let digits = "9".repeat(10_000_000);
    let exponent = format!("1e{}", "7".repeat(1000));
    let input = format!(
        r#"[["request", "sk_a", {digits}], ["request_batch", "sk_a", 5, {digits}],
            ["request", "sk_a", {exponent}], ["request_batch", "sk_a", 5, -{exponent}],
            ["request", "sk_a", 5]]"#
    );
    assert_eq!(
        run_text(input.as_bytes()),
        [
            Value::from("error: invalid timestamp"),
            Value::from("error: invalid units"),
            Value::from("error: invalid timestamp"),
            Value::from("error: invalid units"),
            serde_json::json!({"allowed": true, "remaining": 4, "retry_after": 0}),
        ]
    );
}

/// An operation with a million arguments is one of the wrong arity.
#[test]
fn an_operation_with_a_million_arguments_has_the_wrong_arity() {
    let input = format!(
        r#"[["request", "sk_a"{}], ["stats", 0]]"#,
        ", 7".repeat(1_000_000)
    );
    assert_eq!(
        run_text(input.as_bytes()),
        [
            Value::from("error: wrong number of arguments: request"),
            serde_json::json!({"tracked_keys": 0, "allowed": 0, "rejected": 0}),
        ]
    );
}

/// The built-in defaults of the contract, written in the gateway's layout.
const BUILTIN_LIMITS: &str = r#"[limits]
exempt_keys = ["sk_internal"]
idle_eviction_s = 3600

[limits.default_policy]
algorithm = "fixed_window"
limit = 5
window_s = 60

[limits.tiers.pro]
algorithm = "sliding_log"
limit = 20
window_s = 60

[limits.tiers.enterprise]
algorithm = "fixed_window"
limit = 1000
window_s = 60
"#;

/// Every seed example gives its expected outputs with the built-in defaults
/// written in a file: in the gateway's `[limits]` layout without a word on
/// stderr, and in the old layout of `tollgate run --config` (the same
/// settings at the top level) with a warning for each of them.
#[test]
fn the_limits_file_has_one_layout_and_the_old_one_is_still_read() {
    let old = BUILTIN_LIMITS
        .replace("[limits]\n", "")
        .replace("[limits.", "[");
    let directory = PathBuf::from(env!("CARGO_TARGET_TMPDIR"));
    let text = std::fs::read_to_string(conformance_file("seed_examples.json")).unwrap();
    let cases: Vec<Value> = serde_json::from_str(&text).unwrap();
    for (layout, toml, warnings) in [("limits", BUILTIN_LIMITS.to_owned(), 0), ("old", old, 4)] {
        let path = directory.join(format!("conformance_{layout}_layout.toml"));
        std::fs::write(&path, toml).unwrap();
        let config = ["--config", path.to_str().unwrap()];
        let mut failures = 0;
        for case in &cases {
            let operations = &case["ops"];
            let (actual, stderr) = run_with(&config, &serde_json::to_vec(operations).unwrap());
            let name = format!("{layout} layout, {}", case["name"]);
            failures += compare(&name, &actual, case, |index| operations[index].to_string());
            assert_eq!(stderr.lines().count(), warnings, "{stderr}");
        }
        assert_eq!(failures, 0, "see the mismatches above");
    }
    let old = directory.join("conformance_old_layout.toml");
    let (_, stderr) = run_with(&["--config", old.to_str().unwrap()], b"[]");
    let expected: String = ["default_policy", "tiers", "exempt_keys", "idle_eviction_s"]
        .iter()
        .map(|name| {
            format!(
                "tollgate: warning: {}: `{name}` at the top level is the old layout of \
                 `tollgate run --config`, read as `limits.{name}`: move it into the `[limits]` \
                 table\n",
                old.display()
            )
        })
        .collect();
    assert_eq!(stderr, expected);
}
