//! The `overdraft` extension of `rate_limit` (issue #29): usage reported by
//! Envoy's `apply_on_stream_done` call charged past what a sliding log, a
//! token bucket or a fixed window counting only what it allows has left,
//! into a debt of at most `overdraft` units; refused without
//! TOLLGATE_CONFIG_EXTENSIONS, its bad forms refused at load. Decided
//! through the service on the harness's clock; expected values by hand.

use serde_json::{Value, json};
use tollgate_rls::harness::run;
use tollgate_rls::{LoaderOptions, RateLimitConfig, ServiceSettings};

const EXTENSIONS: LoaderOptions = LoaderOptions {
    merge_domains: false,
    extensions: true,
};

/// 10 a minute each, an overdraft of 20: a sliding log, a token bucket
/// (10 deep, a token every 6 s) and a fixed window.
const CHARGED: &str = "domain: d
descriptors:
  - key: log
    rate_limit: {requests_per_unit: 10, unit: minute, algorithm: sliding_log, overdraft: 20}
  - key: bucket
    rate_limit: {requests_per_unit: 10, unit: minute, algorithm: token_bucket, overdraft: 20}
  - key: window
    rate_limit: {requests_per_unit: 10, unit: minute, overdraft: 20}
";

fn load(yaml: &str, options: &LoaderOptions) -> Result<RateLimitConfig, String> {
    RateLimitConfig::from_sources(&[("f.yaml", yaml)], options).map_err(|error| error.to_string())
}

#[test]
fn bad_overdrafts_are_refused_at_load() {
    let yaml = |rate_limit: &str| {
        format!("domain: d\ndescriptors:\n  - key: k\n    rate_limit: {rate_limit}\n")
    };
    assert_eq!(
        load(
            &yaml("{requests_per_unit: 1, unit: second, overdraft: 5}"),
            &LoaderOptions::default()
        )
        .unwrap_err(),
        "f.yaml: config error, unknown key 'overdraft'"
    );
    for (rate_limit, message) in [
        (
            "{requests_per_unit: 1, unit: second, overdraft: 0}",
            "invalid rate limit overdraft: 0 is not 1 to 9007199254740992",
        ),
        (
            "{requests_per_unit: 1, unit: second, overdraft: 9007199254740993}",
            "invalid rate limit overdraft: 9007199254740993 is not 1 to 9007199254740992",
        ),
        (
            "{requests_per_unit: 0, unit: second, overdraft: 5}",
            "invalid rate limit overdraft: a limit of 0 has nothing to overdraw",
        ),
        (
            "{requests_per_unit: 10, unit: day, algorithm: token_bucket, overdraft: 1000000}",
            "invalid rate limit overdraft: an overdraft of 1000000 on this limit passes 2^52, \
             which the Redis store computes exactly (limit + overdraft; for a token bucket \
             (burst + overdraft) x window in microseconds)",
        ),
        (
            "{unlimited: true, overdraft: 5}",
            "should not specify rate limit overdraft when unlimited",
        ),
    ] {
        assert_eq!(
            load(&yaml(rate_limit), &EXTENSIONS).unwrap_err(),
            format!("f.yaml: {message}"),
            "{rate_limit}"
        );
    }
    // A calendar quota takes one.
    load(
        &yaml("{requests_per_unit: 10, calendar: month, overdraft: 5}"),
        &EXTENSIONS,
    )
    .unwrap();
}

/// A request at `now` (s) for `key: x` with `hits`.
fn at(now: u64, key: &str, hits: u64) -> Value {
    json!({"now": now, "request": {"domain": "d", "descriptors": [
        {"entries": [{"key": key, "value": "x"}], "hitsAddend": hits.to_string()}
    ]}})
}

/// The steps' answers: (code, limit_remaining, duration_until_reset).
fn answers(steps: &[Value]) -> Vec<(String, u64, String)> {
    let output = run(
        vec![("d.yaml".to_owned(), CHARGED.to_owned())],
        ServiceSettings::default(),
        EXTENSIONS,
        &serde_json::to_vec(steps).unwrap(),
    )
    .unwrap();
    let out: Vec<Value> = serde_json::from_slice(&output).unwrap();
    out.iter()
        .map(|step| {
            let status = &step["response"]["statuses"][0];
            (
                status["code"].as_str().unwrap_or("OK").to_owned(),
                status["limitRemaining"].as_u64().unwrap_or(0),
                status["durationUntilReset"]
                    .as_str()
                    .unwrap_or("")
                    .to_owned(),
            )
        })
        .collect()
}

fn answer(code: &str, remaining: u64, reset: &str) -> (String, u64, String) {
    (code.to_owned(), remaining, reset.to_owned())
}

#[test]
fn a_sliding_log_is_charged_past_its_limit() {
    assert_eq!(
        answers(&[
            at(600, "log", 0),
            at(600, "log", 4),
            // 4 + 25 = 29 counted, within 10 + 20: a debt of 19.
            at(610, "log", 25),
            at(620, "log", 0),
            // The 4 of 600 gone at 660, the 25 of 610 still count.
            at(665, "log", 0),
            at(670, "log", 0),
        ]),
        [
            answer("OK", 10, "0s"),
            answer("OK", 6, "60s"),
            answer("OVER_LIMIT", 0, "60s"),
            answer("OVER_LIMIT", 0, "50s"),
            answer("OVER_LIMIT", 0, "5s"),
            answer("OK", 10, "0s"),
        ]
    );
}

#[test]
fn a_token_bucket_is_charged_past_its_limit() {
    assert_eq!(
        answers(&[
            at(600, "bucket", 4),
            // 6 - 25: 19 tokens owed, full again after 29 tokens (174 s).
            at(600, "bucket", 25),
            at(600, "bucket", 0),
            // 114 s refill 19 tokens: 0 left, full 60 s later.
            at(714, "bucket", 0),
            at(720, "bucket", 0),
        ]),
        [
            answer("OK", 6, "24s"),
            answer("OVER_LIMIT", 0, "174s"),
            answer("OVER_LIMIT", 0, "174s"),
            answer("OVER_LIMIT", 0, "60s"),
            answer("OK", 1, "54s"),
        ]
    );
}

#[test]
fn a_fixed_window_is_charged_past_its_limit_up_to_the_overdraft() {
    assert_eq!(
        answers(&[
            at(600, "window", 4),
            at(610, "window", 25),
            // 29 + 5 = 34: counted to 30 (10 + 20) only.
            at(620, "window", 5),
            at(659, "window", 0),
            at(660, "window", 0),
            at(660, "window", 10),
        ]),
        [
            answer("OK", 6, "60s"),
            answer("OVER_LIMIT", 0, "50s"),
            answer("OVER_LIMIT", 0, "40s"),
            answer("OVER_LIMIT", 0, "1s"),
            answer("OK", 10, "60s"),
            // Exactly used up: nothing left, answered as over.
            answer("OVER_LIMIT", 0, "60s"),
        ]
    );
}
