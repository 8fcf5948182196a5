//! The calendar extension of `rate_limit` (issue #29): `calendar: month`
//! with `time_zone`, under TOLLGATE_CONFIG_EXTENSIONS; refused without
//! it, and its bad forms refused at load with the setting named; decided
//! through the service on the harness's clock across the end of March in
//! Berlin (2025-03-31T22:00:00Z, 1743458400; April lasts 30 days to
//! 1746050400: GNU `date -u -d`). Expected values by hand.

use serde_json::{Value, json};
use tollgate_core::{Calendar, CalendarPeriod, Policy};
use tollgate_rls::harness::run;
use tollgate_rls::{
    Enforcement, Extensions, LoaderOptions, NoStats, RateLimitConfig, ServiceSettings, Unit,
};

const EXTENSIONS: LoaderOptions = LoaderOptions {
    merge_domains: false,
    extensions: true,
};

const MONTHLY: &str = "domain: d
descriptors:
  - key: plan
    rate_limit: {requests_per_unit: 2, calendar: month, time_zone: Europe/Berlin}
";

fn load(yaml: &str, options: &LoaderOptions) -> Result<RateLimitConfig, String> {
    RateLimitConfig::from_sources(&[("f.yaml", yaml)], options).map_err(|error| error.to_string())
}

#[test]
fn a_calendar_is_an_extension_and_maps_to_a_calendar_policy() {
    assert_eq!(
        load(MONTHLY, &LoaderOptions::default()).unwrap_err(),
        "f.yaml: config error, unknown key 'calendar'"
    );
    let config = load(MONTHLY, &EXTENSIONS).unwrap();
    let found = config
        .get_limit("d", &[("plan", "v")], None, &NoStats)
        .unwrap();
    let month = Calendar::new(CalendarPeriod::Month, "Europe/Berlin", None).unwrap();
    assert_eq!(
        (found.limit.enforcement, found.limit.unit),
        (
            Enforcement::Policy(Policy::calendar(2, month).unwrap()),
            Unit::Month
        )
    );
}

#[test]
fn bad_calendars_are_refused_at_load() {
    for (rate_limit, message) in [
        (
            "{requests_per_unit: 1, calendar: fortnight}",
            "invalid rate limit calendar: 'fortnight' is not day, week, month or year",
        ),
        (
            "{requests_per_unit: 1, calendar: month, unit: month}",
            "invalid rate limit calendar: a calendar takes no unit",
        ),
        (
            "{requests_per_unit: 1, calendar: day, window: 1h}",
            "invalid rate limit calendar: a calendar takes no window",
        ),
        (
            "{requests_per_unit: 1, calendar: day, algorithm: token_bucket}",
            "invalid rate limit calendar: a calendar window is a fixed window (algorithm: fixed_window)",
        ),
        (
            "{requests_per_unit: 1, calendar: day, time_zone: Europe/Atlantis}",
            "invalid rate limit calendar: time_zone \"Europe/Atlantis\" is not an IANA time zone \
             name (such as \"Europe/Berlin\" or \"UTC\")",
        ),
        (
            "{requests_per_unit: 1, unit: day, time_zone: UTC}",
            "invalid rate limit calendar: time_zone and week_starts belong to a calendar \
             (calendar: day, week, month or year)",
        ),
        (
            "{requests_per_unit: 0, calendar: day}",
            "invalid rate limit calendar: a calendar quota needs requests_per_unit of at least 1 \
             (a limit of 0 refuses every hit whatever its window: give it a unit)",
        ),
        (
            "{requests_per_unit: 1, calendar: day, name: a, replaces: [{name: a}]}",
            "replaces should not contain name of same descriptor",
        ),
        (
            "{unlimited: true, calendar: day}",
            "should not specify rate limit calendar when unlimited",
        ),
    ] {
        let yaml = format!("domain: d\ndescriptors:\n  - key: k\n    rate_limit: {rate_limit}\n");
        assert_eq!(
            load(&yaml, &EXTENSIONS).unwrap_err(),
            format!("f.yaml: {message}"),
            "{rate_limit}"
        );
    }
}

/// A request at `now` (s) for `plan: x`, one hit.
fn at(now: u64) -> Value {
    json!({"now": now, "request": {"domain": "d", "descriptors": [
        {"entries": [{"key": "plan", "value": "x"}], "hitsAddend": "1"}
    ]}})
}

#[test]
fn a_monthly_quota_ends_at_berlin_midnight() {
    let settings = ServiceSettings {
        extensions: Extensions {
            retry_after_header: true,
            ..Extensions::default()
        },
        ..ServiceSettings::default()
    };
    let end_of_march = 1_743_458_400;
    let steps = [
        at(end_of_march - 2),
        at(end_of_march - 2),
        at(end_of_march - 1),
        at(end_of_march),
    ];
    let output = run(
        vec![("d.yaml".to_owned(), MONTHLY.to_owned())],
        settings,
        EXTENSIONS,
        &serde_json::to_vec(&steps).unwrap(),
    )
    .unwrap();
    let out: Vec<Value> = serde_json::from_slice(&output).unwrap();
    let seen: Vec<(String, u64, String, Value)> = out
        .iter()
        .map(|step| {
            let response = &step["response"];
            let status = &response["statuses"][0];
            (
                response["overallCode"].as_str().unwrap().to_owned(),
                status["limitRemaining"].as_u64().unwrap_or(0),
                status["durationUntilReset"]
                    .as_str()
                    .unwrap_or("")
                    .to_owned(),
                status["currentLimit"].clone(),
            )
        })
        .collect();
    let limit = json!({"requestsPerUnit": 2, "unit": "MONTH"});
    assert_eq!(
        seen,
        [
            ("OK".into(), 1, "2s".into(), limit.clone()),
            ("OK".into(), 0, "2s".into(), limit.clone()),
            // March is used up: over the limit, a refused hit counts nothing.
            ("OVER_LIMIT".into(), 0, "1s".into(), limit.clone()),
            // April, 30 days long in Berlin.
            ("OK".into(), 1, "2592000s".into(), limit),
        ]
    );
    let retry: Vec<&Value> = out[2]["response"]["responseHeadersToAdd"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|header| header["key"] == "Retry-After")
        .collect();
    assert_eq!(retry, [&json!({"key": "Retry-After", "value": "1"})]);
}
