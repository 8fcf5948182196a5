//! Arbitrary JSON through the harness: never a panic, always one output per
//! operation, the right error for input that is not an array, and numbers
//! past every range read as any other wrong argument.

use proptest::prelude::*;
use serde_json::{Value, json};
use tollgate_core::{Harness, LimiterConfig};

/// Any JSON value, nested a few levels.
fn any_json() -> impl Strategy<Value = Value> {
    let leaf = prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::Bool),
        any::<i64>().prop_map(Value::from),
        any::<u64>().prop_map(Value::from),
        any::<f64>()
            .prop_filter("finite", |f| f.is_finite())
            .prop_map(Value::from),
        ".{0,12}".prop_map(Value::from),
    ];
    leaf.prop_recursive(4, 32, 6, |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..6).prop_map(Value::Array),
            prop::collection::btree_map(".{0,8}", inner, 0..6)
                .prop_map(|map| Value::Object(map.into_iter().collect())),
        ]
    })
}

/// Values an operation's arguments are likely to hit: edges of every range.
fn interesting_argument() -> impl Strategy<Value = Value> {
    prop_oneof![
        prop::sample::select(vec![
            json!(0),
            json!(1),
            json!(-1),
            json!(9_223_372_036_854_775_807u64),
            json!(9_223_372_036_854_775_808u64),
            json!(u64::MAX),
            json!(1.5),
            json!(true),
            json!(null),
            json!(""),
            json!("Bearer"),
            json!("sk_a"),
            json!("  bearer sk_a "),
            json!("sk_internal"),
            json!("pro"),
            json!("default"),
            json!("gold"),
            json!({"algorithm": "token_bucket", "limit": 9_223_372_036_854_775_807u64,
                   "window_s": 1, "burst": 9_223_372_036_854_775_807u64}),
            json!({"algorithm": "sliding_log", "limit": 3, "window_s": 9_223_372_036_854_775_807u64}),
            json!({"algorithm": "fixed_window", "limit": 1, "window_s": 1}),
        ]),
        (0u64..100_000u64).prop_map(Value::from),
        any_json(),
    ]
}

/// Stands for a number no `serde_json::Value` can hold, put in the text in
/// its place (see [`with_number`]).
const OUT_OF_RANGE: &str = "\u{0}out of range";

/// `document`'s text with every [`OUT_OF_RANGE`] string replaced by `number`.
fn with_number(document: &Value, number: &str) -> String {
    serde_json::to_string(document)
        .unwrap()
        .replace(r#""\u0000out of range""#, number)
}

/// [`interesting_argument`], or now and then a number out of range.
fn argument_or_out_of_range() -> impl Strategy<Value = Value> {
    prop_oneof![4 => interesting_argument(), 1 => Just(Value::from(OUT_OF_RANGE))]
}

/// Operation-shaped arrays, with numbers out of range among the arguments, as
/// a name, or as a whole element.
fn operation_or_out_of_range() -> impl Strategy<Value = Value> {
    let name = prop::sample::select(vec![
        "request",
        "request_batch",
        "configure",
        "reset",
        "stats",
        "assign_tier",
        "ping",
        OUT_OF_RANGE,
    ]);
    prop_oneof![
        8 => (name, prop::collection::vec(argument_or_out_of_range(), 0..5)).prop_map(|(name, arguments)| {
            let mut operation = vec![Value::from(name)];
            operation.extend(arguments);
            Value::Array(operation)
        }),
        1 => Just(Value::from(OUT_OF_RANGE)),
    ]
}

/// Operation-shaped arrays: a known or unknown name and 0 to 4 arguments.
fn operation() -> impl Strategy<Value = Value> {
    let name = prop::sample::select(vec![
        "request",
        "request_batch",
        "configure",
        "reset",
        "stats",
        "assign_tier",
        "ping",
    ]);
    prop_oneof![
        4 => (name, prop::collection::vec(interesting_argument(), 0..5)).prop_map(|(name, arguments)| {
            let mut operation = vec![Value::from(name)];
            operation.extend(arguments);
            Value::Array(operation)
        }),
        1 => any_json(),
    ]
}

fn run(input: &[u8]) -> Result<Vec<Value>, String> {
    let mut harness = Harness::new(&LimiterConfig::default()).unwrap();
    let mut out = Vec::new();
    harness
        .run(input, &mut out)
        .map_err(|error| error.to_string())?;
    Ok(serde_json::from_slice(&out).expect("the output is JSON"))
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(500))]

    #[test]
    fn any_array_of_operations_gives_one_output_each(operations in prop::collection::vec(operation(), 0..40)) {
        let input = serde_json::to_vec(&operations).unwrap();
        let outputs = run(&input).unwrap();
        prop_assert_eq!(outputs.len(), operations.len());
    }

    #[test]
    fn any_json_document_is_an_array_or_an_error(document in any_json()) {
        let input = serde_json::to_vec(&document).unwrap();
        match (&document, run(&input)) {
            (Value::Array(operations), Ok(outputs)) => prop_assert_eq!(outputs.len(), operations.len()),
            (Value::Array(_), Err(error)) => prop_assert!(false, "an array was refused: {}", error),
            (_, result) => prop_assert!(result.is_err()),
        }
    }

    /// A number past every range is a wrong argument like any other number
    /// that is not an integer: the outputs are those of `1.5` in its place.
    #[test]
    fn a_number_out_of_range_is_read_as_any_non_integer(operations in prop::collection::vec(operation_or_out_of_range(), 0..30)) {
        let document = Value::Array(operations);
        let expected = run(with_number(&document, "1.5").as_bytes()).unwrap();
        for number in ["1e400", "-1e400", &"9".repeat(400), &format!("1e{}", "9".repeat(400))] {
            prop_assert_eq!(&run(with_number(&document, number).as_bytes()).unwrap(), &expected);
        }
    }

    /// After a number out of range, the rest of the document is read from
    /// each operation's text: the outputs are the same as read as values.
    #[test]
    fn operations_after_a_number_out_of_range_read_the_same(operations in prop::collection::vec(operation(), 0..40)) {
        let text = serde_json::to_string(&operations).unwrap();
        let expected = run(text.as_bytes()).unwrap();
        let poisoned = format!(r#"[["request", "k", 1e400]{}{}"#, if operations.is_empty() { "" } else { "," }, &text[1..]);
        let outputs = run(poisoned.as_bytes()).unwrap();
        prop_assert_eq!(&outputs[0], &Value::from("error: invalid timestamp"));
        prop_assert_eq!(&outputs[1..], &expected[..]);
    }

    #[test]
    fn any_bytes_never_panic(input in prop::collection::vec(any::<u8>(), 0..200)) {
        let _ = run(&input);
    }
}

#[test]
fn input_that_is_not_an_array_is_refused() {
    for input in [
        &b"{}"[..],
        b"",
        b"[1,",
        b"[] []",
        b"\"request\"",
        b"[[\"stats\", 1]",
    ] {
        let error = run(input).unwrap_err();
        assert!(
            error.starts_with("input is not a JSON array of operations"),
            "{error}"
        );
    }
    assert_eq!(run(b" [ ] ").unwrap(), Vec::<Value>::new());
}

#[test]
fn any_depth_is_an_array_and_a_deep_argument_is_just_a_wrong_one() {
    let deep = |depth: usize| format!("{}{}", "[".repeat(depth), "]".repeat(depth));
    // An element nested 100,000 deep is not an operation.
    let outputs = run(format!("[{}]", deep(100_000)).as_bytes()).unwrap();
    assert_eq!(outputs, vec![Value::from("error: malformed operation")]);
    // A timestamp or a policy field nested that deep is a wrong argument.
    let input = format!(
        r#"[["request", "k", {deep}], ["configure", {{"algorithm": "fixed_window", "limit": {deep}, "window_s": 1}}], ["request", "k", 1]]"#,
        deep = deep(100_000)
    );
    let outputs = run(input.as_bytes()).unwrap();
    assert_eq!(outputs[0], "error: invalid timestamp");
    assert!(
        outputs[1]
            .as_str()
            .unwrap()
            .starts_with("error: invalid policy")
    );
    assert_eq!(
        outputs[2],
        json!({"allowed": true, "remaining": 4, "retry_after": 0})
    );
}

#[test]
fn input_that_is_not_utf8_is_refused_with_its_place() {
    let error = run(b"[[\"request\", \"sk_\xff\", 1]]").unwrap_err();
    assert_eq!(
        error,
        "input is not a JSON array of operations: invalid UTF-8 at line 1 column 18"
    );
    let error = run(b"[\n[\"stats\", 1],\n\xc3]").unwrap_err();
    assert_eq!(
        error,
        "input is not a JSON array of operations: invalid UTF-8 at line 3 column 1"
    );
}
