//! tollgate's extensions decided through the service (the harness: an
//! in-memory store on a clock each step sets), every expectation worked out
//! by hand from the algorithms' definitions: the sliding log (a hit at `t`
//! counts while `now - W < t`), the token bucket (`burst` tokens, `limit / W`
//! per second), a fixed window of any length (aligned to the epoch);
//! `Retry-After` and the IETF fields; and the bounded Prometheus series.

use std::collections::BTreeSet;

use serde_json::{Value, json};
use tollgate_rls::harness::run;
use tollgate_rls::server::prometheus_page;
use tollgate_rls::{Extensions, LoaderOptions, ServiceSettings};

const EXTENSIONS: LoaderOptions = LoaderOptions {
    merge_domains: false,
    extensions: true,
};

const CONFIG: &str = "domain: d
descriptors:
  - key: sl
    rate_limit: {algorithm: sliding_log, requests_per_unit: 3, window: 10s}
  - key: tb
    rate_limit: {algorithm: token_bucket, requests_per_unit: 10, window: 30s, burst: 5}
  - key: fw
    rate_limit: {requests_per_unit: 2, window: 5m}
";

fn headers() -> ServiceSettings {
    ServiceSettings {
        extensions: Extensions {
            retry_after_header: true,
            ietf_headers: true,
            ..Extensions::default()
        },
        ..ServiceSettings::default()
    }
}

fn steps(settings: ServiceSettings, yaml: &str, steps: &[Value]) -> Vec<Value> {
    let input = serde_json::to_vec(&steps).unwrap();
    let output = run(
        vec![("d.yaml".to_owned(), yaml.to_owned())],
        settings,
        EXTENSIONS,
        &input,
    )
    .unwrap();
    serde_json::from_slice(&output).unwrap()
}

/// A request at `now` for one descriptor `key: value` with `hits`.
fn at(now: u64, key: &str, hits: u64) -> Value {
    json!({"now": now, "request": {"domain": "d", "descriptors": [
        {"entries": [{"key": key, "value": "x"}], "hitsAddend": hits.to_string()}
    ]}})
}

/// (overall code, remaining, seconds until reset, headers as `name: value`).
fn summary(out: &Value) -> (String, u64, String, Vec<String>) {
    let response = &out["response"];
    let status = &response["statuses"][0];
    let headers = response["responseHeadersToAdd"]
        .as_array()
        .map(|headers| {
            headers
                .iter()
                .map(|h| {
                    format!(
                        "{}: {}",
                        h["key"].as_str().unwrap(),
                        h["value"].as_str().unwrap()
                    )
                })
                .collect()
        })
        .unwrap_or_default();
    (
        response["overallCode"].as_str().unwrap().to_owned(),
        status["limitRemaining"].as_u64().unwrap_or(0),
        status["durationUntilReset"]
            .as_str()
            .unwrap_or("")
            .to_owned(),
        headers,
    )
}

fn s(text: &str) -> String {
    text.to_owned()
}

#[test]
fn sliding_log_three_per_ten_seconds() {
    let out = steps(
        headers(),
        CONFIG,
        &[
            at(1000, "sl", 1),
            at(1001, "sl", 1),
            at(1002, "sl", 1),
            at(1003, "sl", 1),
            at(1010, "sl", 1),
            at(1010, "sl", 1),
            at(1011, "sl", 1),
        ],
    );
    let policy = s("RateLimit-Policy: \"d.sl\";q=3;w=10");
    // t=1000..1002: allowed, 2, 1, 0 left; the newest hit counts for 10 s.
    assert_eq!(
        summary(&out[0]),
        (
            s("OK"),
            2,
            s("10s"),
            vec![policy.clone(), s("RateLimit: \"d.sl\";r=2;t=10")]
        )
    );
    assert_eq!(summary(&out[1]).1, 1);
    assert_eq!(
        summary(&out[2]),
        (
            s("OK"),
            0,
            s("10s"),
            vec![policy.clone(), s("RateLimit: \"d.sl\";r=0;t=10")]
        )
    );
    // t=1003: three hits counted; the oldest (1000) leaves at 1010: retry in
    // 7 s; the newest (1002) at 1012: reset in 9 s.
    assert_eq!(
        summary(&out[3]),
        (
            s("OVER_LIMIT"),
            0,
            s("9s"),
            vec![
                s("Retry-After: 7"),
                policy.clone(),
                s("RateLimit: \"d.sl\";r=0;t=9")
            ]
        )
    );
    // t=1010: the hit at 1000 no longer counts (1010 - 10 < 1000 is false).
    assert_eq!(summary(&out[4]).0, "OK");
    // Again at 1010: 1001, 1002, 1010 counted; 1001 leaves in 1 s.
    assert_eq!(summary(&out[5]).0, "OVER_LIMIT");
    assert_eq!(summary(&out[5]).3[0], "Retry-After: 1");
    assert_eq!(summary(&out[6]).0, "OK");
    // The refused hits were not counted (no Go counter for this algorithm):
    // 7 requests, 2 over.
    let stats = &out[6]["stats"];
    assert_eq!(stats["ratelimit.service.rate_limit.d.sl.total_hits"], 7);
    assert_eq!(stats["ratelimit.service.rate_limit.d.sl.over_limit"], 2);
    assert_eq!(stats["ratelimit.service.rate_limit.d.sl.within_limit"], 5);
}

#[test]
fn token_bucket_ten_per_thirty_seconds_burst_five() {
    let out = steps(
        headers(),
        CONFIG,
        &[
            at(1000, "tb", 5),
            at(1000, "tb", 1),
            at(1002, "tb", 1),
            at(1003, "tb", 1),
            at(1009, "tb", 2),
            at(1009, "tb", 1),
        ],
    );
    // The bucket advertises its burst over its fill time: 5 tokens at one
    // every 3 s, 15 s (core's rule, the same in every adapter).
    let policy = s("RateLimit-Policy: \"d.tb\";q=5;w=15");
    // Full bucket: 5 taken, none left; one token every 3 s, full again in 15 s.
    assert_eq!(
        summary(&out[0]),
        (
            s("OK"),
            0,
            s("15s"),
            vec![policy.clone(), s("RateLimit: \"d.tb\";r=0;t=15")]
        )
    );
    // The next token comes at 1003.
    assert_eq!(
        summary(&out[1]),
        (
            s("OVER_LIMIT"),
            0,
            s("15s"),
            vec![
                s("Retry-After: 3"),
                policy,
                s("RateLimit: \"d.tb\";r=0;t=15")
            ]
        )
    );
    // At 1002 two thirds of a token: 1 s to wait; full in 13 s.
    let refused = summary(&out[2]);
    assert_eq!(
        (refused.0.as_str(), refused.2.as_str()),
        ("OVER_LIMIT", "13s")
    );
    assert_eq!(refused.3[0], "Retry-After: 1");
    // 1003: one token, taken.
    assert_eq!(summary(&out[3]).0, "OK");
    // 1009: two tokens (1006, 1009), both taken; then none.
    assert_eq!(summary(&out[4]).0, "OK");
    assert_eq!(summary(&out[5]).0, "OVER_LIMIT");
    assert_eq!(summary(&out[5]).3[0], "Retry-After: 3");
}

#[test]
fn fixed_window_of_five_minutes() {
    let out = steps(
        headers(),
        CONFIG,
        &[
            at(1000, "fw", 1),
            at(1100, "fw", 1),
            at(1199, "fw", 1),
            at(1200, "fw", 1),
        ],
    );
    // Windows start at multiples of 300 s: [900, 1200).
    assert_eq!(
        summary(&out[0]),
        (
            s("OK"),
            1,
            s("200s"),
            vec![
                s("RateLimit-Policy: \"d.fw\";q=2;w=300"),
                s("RateLimit: \"d.fw\";r=1;t=200")
            ]
        )
    );
    assert_eq!(summary(&out[1]).1, 0);
    assert_eq!(
        summary(&out[2]).3,
        vec![
            s("Retry-After: 1"),
            s("RateLimit-Policy: \"d.fw\";q=2;w=300"),
            s("RateLimit: \"d.fw\";r=0;t=1")
        ]
    );
    assert_eq!(summary(&out[2]).0, "OVER_LIMIT");
    // A new window.
    assert_eq!((summary(&out[3]).0.as_str(), summary(&out[3]).1), ("OK", 1));
}

#[test]
fn all_or_nothing_leaves_the_other_descriptor_unchanged() {
    let settings = ServiceSettings {
        extensions: Extensions {
            all_or_nothing: true,
            ..Extensions::default()
        },
        ..ServiceSettings::default()
    };
    let two = |now: u64| {
        json!({"now": now, "request": {"domain": "d", "descriptors": [
            {"entries": [{"key": "fw", "value": "x"}]},
            {"entries": [{"key": "sl", "value": "x"}]}
        ]}})
    };
    let out = steps(
        settings,
        CONFIG,
        &[
            at(1000, "fw", 2),
            at(1000, "sl", 1),
            two(1001),
            at(1002, "sl", 0),
        ],
    );
    // fw is used up; sl has 2 left.
    assert_eq!(summary(&out[1]).1, 2);
    let refused = &out[2]["response"];
    assert_eq!(refused["overallCode"], "OVER_LIMIT");
    assert_eq!(refused["statuses"][0]["code"], "OVER_LIMIT");
    assert_eq!(refused["statuses"][1]["code"], "OK");
    // A look at sl (0 hits) at 1002: still 2 left, the refused request took
    // nothing (else 1 left and a reset 10 s after 1001: 9 s); the hit at 1000
    // counts 8 s more.
    assert_eq!(summary(&out[3]), (s("OK"), 2, s("8s"), vec![]));
}

/// The Prometheus series of `out`'s stats: every sample line's name and labels.
fn series(out: &Value) -> BTreeSet<String> {
    let stats = serde_json::from_value(out["stats"].clone()).unwrap();
    prometheus_page(&stats)
        .lines()
        .filter(|line| !line.starts_with('#'))
        .map(|line| line.rsplit_once(' ').unwrap().0.to_owned())
        .collect()
}

#[test]
fn descriptor_values_reach_metrics_only_with_detailed_metric() {
    let yaml = "domain: d
descriptors:
  - key: user
    rate_limit: {unit: second, requests_per_unit: 1000000}
  - key: detailed
    detailed_metric: true
    rate_limit: {unit: second, requests_per_unit: 1000000}
";
    let request = |key: &str, from: usize| {
        let descriptors: Vec<Value> = (from..from + 1000)
            .map(|i| json!({"entries": [{"key": key, "value": format!("v{i}")}]}))
            .collect();
        json!({"now": 10, "request": {"domain": "d", "descriptors": descriptors}})
    };
    let out = steps(
        ServiceSettings::default(),
        yaml,
        &[
            at(10, "user", 1),
            request("user", 0),
            request("detailed", 0),
        ],
    );
    let before = series(&out[0]);
    assert!(
        before.contains("ratelimit_service_rate_limit_total_hits{domain=\"d\",key1=\"user\"}"),
        "{before:?}"
    );
    // 1,000 distinct values without detailed_metric: not one new series.
    assert_eq!(series(&out[1]), before);
    // With detailed_metric, each value is a series of its own (total_hits
    // and within_limit each).
    let detailed = series(&out[2]);
    assert_eq!(detailed.len(), before.len() + 2 * 1000);
    assert!(
        detailed.contains(
            "ratelimit_service_rate_limit_total_hits{domain=\"d\",key1=\"detailed_v999\"}"
        )
    );
}
