//! tollgate's opt-in `rate_limit` extensions (`algorithm`, `burst`, `window`)
//! and how limits map to tollgate policies.

use tollgate_core::Policy;
use tollgate_rls::{Enforcement, LimitOverride, LoaderOptions, NoStats, RateLimitConfig, Unit};

const EXTENSIONS: LoaderOptions = LoaderOptions {
    merge_domains: false,
    extensions: true,
};

fn load(yaml: &str, options: &LoaderOptions) -> Result<RateLimitConfig, String> {
    RateLimitConfig::from_sources(&[("f.yaml", yaml)], options).map_err(|error| error.to_string())
}

fn enforcement(config: &RateLimitConfig, key: &str) -> (Enforcement, Unit) {
    let found = config
        .get_limit("d", &[(key, "v")], None, &NoStats)
        .unwrap();
    (found.limit.enforcement, found.limit.unit)
}

const BUCKET: &str = "domain: d\ndescriptors:\n  - key: k\n    rate_limit:\n      algorithm: token_bucket\n      requests_per_unit: 10\n      window: 30s\n      burst: 5\n";

#[test]
fn refused_unless_enabled() {
    assert_eq!(
        load(BUCKET, &LoaderOptions::default()).unwrap_err(),
        "f.yaml: config error, unknown key 'algorithm'"
    );
    // Only inside rate_limit, even when enabled.
    assert_eq!(
        load(
            "domain: d\ndescriptors:\n  - key: k\n    algorithm: sliding_log\n    rate_limit: {unit: second, requests_per_unit: 1}\n",
            &EXTENSIONS
        )
        .unwrap_err(),
        "f.yaml: config error, unknown key 'algorithm'"
    );
}

#[test]
fn map_to_policies() {
    let config = load(BUCKET, &EXTENSIONS).unwrap();
    assert_eq!(
        enforcement(&config, "k"),
        (
            Enforcement::Policy(Policy::token_bucket(10, 30, 5).unwrap()),
            Unit::Unknown
        )
    );
    let config = load(
        "domain: d\ndescriptors:\n  - key: a\n    rate_limit: {algorithm: sliding_log, requests_per_unit: 3, window: 1m}\n  - key: b\n    rate_limit: {unit: month, requests_per_unit: 4}\n  - key: c\n    rate_limit: {unit: year, requests_per_unit: 0}\n",
        &EXTENSIONS,
    )
    .unwrap();
    assert_eq!(
        enforcement(&config, "a"),
        (
            Enforcement::Policy(Policy::sliding_log(3, 60).unwrap()),
            Unit::Minute
        )
    );
    assert_eq!(
        enforcement(&config, "b"),
        (
            Enforcement::Policy(Policy::fixed_window(4, 2_592_000).unwrap()),
            Unit::Month
        )
    );
    assert_eq!(
        enforcement(&config, "c"),
        (
            Enforcement::Deny {
                window_s: 31_536_000
            },
            Unit::Year
        )
    );
}

#[test]
fn invalid_extensions() {
    let cases = [
        (
            "{algorithm: leaky, unit: second, requests_per_unit: 1}",
            "invalid rate limit algorithm 'leaky'",
        ),
        (
            "{burst: 2, unit: second, requests_per_unit: 1}",
            "burst applies to token_bucket only, not to fixed_window",
        ),
        (
            "{algorithm: token_bucket, burst: 0, unit: second, requests_per_unit: 1}",
            "burst must be an integer from 1 to 2^63-1, got 0",
        ),
        (
            "{unit: second, window: 5s, requests_per_unit: 1}",
            "should not specify both rate limit unit and window",
        ),
        (
            "{window: 1.5s, requests_per_unit: 1}",
            "invalid rate limit window '1.5s': not a whole number of seconds",
        ),
        (
            "{unlimited: true, algorithm: token_bucket}",
            "should not specify rate limit algorithm when unlimited",
        ),
    ];
    for (rate_limit, message) in cases {
        let yaml = format!("domain: d\ndescriptors:\n  - key: k\n    rate_limit: {rate_limit}\n");
        assert_eq!(
            load(&yaml, &EXTENSIONS).unwrap_err(),
            format!("f.yaml: {message}"),
            "{rate_limit}"
        );
    }
}

#[test]
fn request_overrides() {
    let config = load("domain: d\ndescriptors: []\n", &LoaderOptions::default()).unwrap();
    let limit = |unit| LimitOverride {
        requests_per_unit: 7,
        unit,
    };
    let found = config
        .get_limit(
            "d",
            &[("a", "1"), ("b", "")],
            Some(limit(Unit::Hour)),
            &NoStats,
        )
        .unwrap();
    assert_eq!(&*found.stats_key, "d.a_1.b");
    assert_eq!(
        found.limit.enforcement,
        Enforcement::Policy(Policy::fixed_window(7, 3600).unwrap())
    );
    let found = config
        .get_limit("d", &[("a", "1")], Some(limit(Unit::Unknown)), &NoStats)
        .unwrap();
    assert_eq!(found.limit.enforcement, Enforcement::NoWindow);
}
