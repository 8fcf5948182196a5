//! The service's behaviour beyond the conformance cases: errors, the
//! extensions, dynamic metadata, and large or malformed input (through the
//! harness, which drives the service on an in-memory store).

use serde_json::{Value, json};
use tollgate_rls::harness::{HarnessError, run};
use tollgate_rls::{Extensions, LoaderOptions, ServiceSettings};

const CONFIG: &str = "domain: d
descriptors:
  - key: a
    rate_limit: {unit: minute, requests_per_unit: 2}
  - key: b
    rate_limit: {unit: hour, requests_per_unit: 5}
    metadata: {team: blue}
";

fn steps(settings: ServiceSettings, files: &[(&str, &str)], steps: Value) -> Vec<Value> {
    let files = files
        .iter()
        .map(|(name, yaml)| ((*name).to_owned(), (*yaml).to_owned()))
        .collect();
    let input = serde_json::to_vec(&steps).unwrap();
    let output = run(files, settings, LoaderOptions::default(), &input).unwrap();
    serde_json::from_slice(&output).unwrap()
}

fn request(descriptors: Value) -> Value {
    json!({"now": 120, "request": {"domain": "d", "descriptors": descriptors}})
}

#[test]
fn errors_are_the_go_services() {
    let out = steps(
        ServiceSettings::default(),
        &[],
        json!([
            request(json!([{"entries": [{"key": "a", "value": "1"}]}])),
            {"now": 120, "add_config": {"name": "d.yaml", "yaml": CONFIG}},
            {"now": 120, "request": {"domain": "d"}},
            request(json!([{"entries": [{"key": "a"}], "limit": {"requestsPerUnit": 1}}])),
            {"now": 120, "add_config": {"name": "e.yaml", "yaml": "domain: d\n"}},
            request(json!([{"entries": [{"key": "a", "value": "1"}]}])),
        ]),
    );
    assert_eq!(out[0]["error"], "no rate limit configuration loaded");
    assert_eq!(out[1]["config"], "loaded");
    assert_eq!(
        out[2]["error"],
        "rate limit descriptor list must not be empty"
    );
    assert_eq!(
        out[3]["error"],
        "descriptor 0: rate limit override has no unit"
    );
    assert_eq!(
        out[4]["config_error"],
        "e.yaml: duplicate domain 'd' in config file"
    );
    // The old configuration is still in force.
    assert_eq!(out[5]["response"]["overallCode"], "OK");
    let stats = &out[5]["stats"];
    assert_eq!(
        stats["ratelimit.service.call.should_rate_limit.service_error"],
        3
    );
    assert_eq!(stats["ratelimit.service.config_load_error"], 1);
    assert_eq!(stats["ratelimit.service.config_load_success"], 1);
}

#[test]
fn refused_hits_are_charged_unless_all_or_nothing() {
    let over_a = json!([
        {"entries": [{"key": "a", "value": "1"}], "hitsAddend": "3"},
        {"entries": [{"key": "b", "value": "1"}]}
    ]);
    let b_only = json!([{"entries": [{"key": "b", "value": "1"}]}]);
    let go = steps(
        ServiceSettings::default(),
        &[("d.yaml", CONFIG)],
        json!([request(over_a.clone()), request(b_only.clone())]),
    );
    assert_eq!(go[0]["response"]["overallCode"], "OVER_LIMIT");
    // b was charged although the request was refused: 5 - 2 = 3 left.
    assert_eq!(go[1]["response"]["statuses"][0]["limitRemaining"], 3);

    let all_or_nothing = ServiceSettings {
        extensions: Extensions {
            all_or_nothing: true,
            retry_after_header: true,
            ietf_headers: true,
            ..Extensions::default()
        },
        ..ServiceSettings::default()
    };
    let out = steps(
        all_or_nothing,
        &[("d.yaml", CONFIG)],
        json!([request(over_a), request(b_only)]),
    );
    let response = &out[0]["response"];
    assert_eq!(response["overallCode"], "OVER_LIMIT");
    assert_eq!(response["statuses"][0]["code"], "OVER_LIMIT");
    // b allowed its hit but was charged nothing.
    assert_eq!(response["statuses"][1]["code"], "OK");
    assert_eq!(out[1]["response"]["statuses"][0]["limitRemaining"], 4);
    assert_eq!(
        response["responseHeadersToAdd"],
        json!([
            {"key": "Retry-After", "value": "60"},
            {"key": "RateLimit-Policy", "value": "\"d.a\";q=2;w=60, \"d.b\";q=5;w=3600"},
            {"key": "RateLimit", "value": "\"d.a\";r=0;t=60, \"d.b\";r=5;t=3480"}
        ])
    );
}

#[test]
fn limit_headers_and_dynamic_metadata() {
    let settings = ServiceSettings {
        limit_response_headers_enabled: true,
        response_dynamic_metadata: true,
        ..ServiceSettings::default()
    };
    let out = steps(
        settings,
        &[("d.yaml", CONFIG)],
        json!([request(json!([
            {"entries": [{"key": "a", "value": "1"}]},
            {"entries": [{"key": "b", "value": "x"}], "limit": {"requests_per_unit": 9, "unit": "SECOND"}, "hitsAddend": "2"}
        ]))]),
    );
    let response = &out[0]["response"];
    assert_eq!(
        response["responseHeadersToAdd"],
        json!([
            {"key": "RateLimit-Limit", "value": "2"},
            {"key": "RateLimit-Remaining", "value": "1"},
            {"key": "RateLimit-Reset", "value": "60"}
        ])
    );
    assert_eq!(
        response["dynamicMetadata"],
        json!({
            "domain": "d",
            "descriptors": [
                {"entries": ["a=1"]},
                {"entries": ["b=x"], "limit": "requests_per_unit:9 unit:SECOND", "hitsAddend": 2}
            ]
        })
    );
    // The override's stats key is the descriptor's own.
    assert_eq!(
        out[0]["stats"]["ratelimit.service.rate_limit.d.b_x.total_hits"],
        2
    );
}

#[test]
fn large_and_malformed_input_is_bounded() {
    let big = "v".repeat(1 << 20);
    let descriptors: Vec<Value> = (0..2_000)
        .map(|i| json!({"entries": [{"key": "a", "value": format!("{i}")}]}))
        .chain([json!({"entries": [{"key": "a", "value": big}]})])
        .collect();
    let out = steps(
        ServiceSettings::default(),
        &[("d.yaml", CONFIG)],
        json!([request(json!(descriptors))]),
    );
    assert_eq!(
        out[0]["response"]["statuses"].as_array().unwrap().len(),
        2_001
    );

    for (input, index) in [
        (&b"{}"[..], None),
        (&br#"[{"now": 1}]"#[..], Some(0)),
        (&br#"[{"now": -1, "request": {}}]"#[..], Some(0)),
        (
            &br#"[{"now": 2, "request": {}}, {"now": 1, "request": {}}]"#[..],
            Some(1),
        ),
        (&br#"[{"now": 1, "request": {"domain": 1}}]"#[..], Some(0)),
        (&br#"[{"now": 99999999999, "request": {}}]"#[..], Some(0)),
    ] {
        match run(
            Vec::new(),
            ServiceSettings::default(),
            LoaderOptions::default(),
            input,
        ) {
            Err(HarnessError::Input(_)) if index.is_none() => {}
            Err(HarnessError::Step { index: at, .. }) if Some(at) == index => {}
            other => panic!("{}: {other:?}", String::from_utf8_lossy(input)),
        }
    }
}
