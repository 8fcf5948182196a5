//! gopkg.in/yaml.v2 behaviours envoyproxy/ratelimit inherits, beyond the
//! conformance rows; each expected value is worked out from yaml.v2 2.4 and
//! config_impl.go, not from this crate.

use tollgate_rls::{LoaderOptions, NoStats, RateLimitConfig};

fn load(yaml: &str) -> Result<RateLimitConfig, String> {
    RateLimitConfig::from_sources(&[("f.yaml", yaml)], &LoaderOptions::default())
        .map_err(|error| error.to_string())
}

fn error(yaml: &str) -> String {
    load(yaml).expect_err("the file should be refused")
}

fn limit_of(config: &RateLimitConfig, entries: &[(&str, &str)]) -> Option<u32> {
    config
        .get_limit("d", entries, None, &NoStats)
        .map(|found| found.limit.requests_per_unit)
}

#[test]
fn type_errors_name_the_line_and_go_type() {
    let yaml = "domain: d\ndescriptors:\n  - key: k\n    rate_limit:\n      unit: second\n      requests_per_unit: abc\n";
    assert_eq!(
        error(yaml),
        "f.yaml: error loading config file: yaml: unmarshal errors:\n  line 6: cannot unmarshal !!str `abc` into uint32"
    );
    let yaml = "domain: d\ndescriptors:\n  - key: k\n    shadow_mode: \"true\"\n    rate_limit: {unit: second, requests_per_unit: -1}\n";
    assert_eq!(
        error(yaml),
        "f.yaml: error loading config file: yaml: unmarshal errors:\n  line 4: cannot unmarshal !!str `true` into bool\n  line 5: cannot unmarshal !!int `-1` into uint32"
    );
    let yaml = "domain: d\ndescriptors:\n  - key: k\n    rate_limit: {unit: second, requests_per_unit: abcdefghijkl}\n";
    assert_eq!(
        error(yaml),
        "f.yaml: error loading config file: yaml: unmarshal errors:\n  line 4: cannot unmarshal !!str `abcdefg...` into uint32"
    );
    assert_eq!(
        error("- a\n"),
        "f.yaml: error loading config file: yaml: unmarshal errors:\n  line 1: cannot unmarshal !!seq into map[interface {}]interface {}"
    );
    assert_eq!(
        error("domain: d\ndescriptors: {}\n"),
        "f.yaml: error loading config file: yaml: unmarshal errors:\n  line 2: cannot unmarshal !!map into []config.YamlDescriptor"
    );
}

#[test]
fn key_check_faults() {
    assert_eq!(
        error(
            "domain: d\ndescriptors:\n  - key: k\n    rate_limit: {unit: second, requests_per_unit: 1.5}\n"
        ),
        "f.yaml: error checking config"
    );
    assert_eq!(
        error("domain: d\ndescriptors:\n  - [a, 1]\n"),
        "f.yaml: config error, yaml file contains list of type other than map: [a 1]"
    );
    assert_eq!(
        error("domain: d\non: x\n"),
        "f.yaml: config error, key is not of type string: true"
    );
    assert_eq!(
        error("domain: d\n'on': x\n"),
        "f.yaml: config error, unknown key 'on'"
    );
    assert_eq!(error(""), "f.yaml: config file cannot have empty domain");
}

#[test]
fn yaml_1_1_scalars() {
    let config = load(
        "domain: d\ndescriptors:\n  - key: k\n    value: 0x10\n    shadow_mode: yes\n    rate_limit: {unit: Second, requests_per_unit: 010}\n  - key: on\n    rate_limit: {unit: second, requests_per_unit: 1_000}\n",
    )
    .unwrap();
    let found = config
        .get_limit("d", &[("k", "0x10")], None, &NoStats)
        .unwrap();
    assert_eq!(found.limit.requests_per_unit, 8);
    assert!(found.limit.shadow_mode);
    assert_eq!(limit_of(&config, &[("k", "16")]), None);
    assert_eq!(limit_of(&config, &[("on", "x")]), Some(1000));
}

#[test]
fn duplicates_and_merge_keys() {
    let config = load(
        "domain: x\ndomain: d\nbase: &base {unit: minute, requests_per_unit: 5}\ndescriptors:\n  - key: a\n    rate_limit:\n      <<: *base\n      requests_per_unit: 7\n  - key: b\n    rate_limit: *base\n",
    );
    // `base` is not a known key: the Go service refuses the file.
    assert_eq!(
        config.err().unwrap(),
        "f.yaml: config error, unknown key 'base'"
    );
    let config = load(
        "domain: x\ndomain: d\ndescriptors:\n  - key: a\n    rate_limit: &base {unit: minute, requests_per_unit: 5}\n  - key: b\n    rate_limit:\n      <<: *base\n      requests_per_unit: 7\n",
    )
    .unwrap();
    assert_eq!(limit_of(&config, &[("a", "1")]), Some(5));
    assert_eq!(limit_of(&config, &[("b", "1")]), Some(7));
}

#[test]
fn unit_rules() {
    assert_eq!(
        error("domain: d\ndescriptors:\n  - key: k\n    rate_limit: {}\n"),
        "f.yaml: invalid rate limit unit ''"
    );
    assert_eq!(
        error(
            "domain: d\ndescriptors:\n  - key: k\n    rate_limit: {unit: unknown, requests_per_unit: 1}\n"
        ),
        "f.yaml: invalid rate limit unit 'unknown'"
    );
    // Unlimited with a unit the Go service does not know is accepted.
    let config =
        load("domain: d\ndescriptors:\n  - key: k\n    rate_limit: {unlimited: true, unit: foo}\n")
            .unwrap();
    let found = config
        .get_limit("d", &[("k", "v")], None, &NoStats)
        .unwrap();
    assert!(found.limit.unlimited);
    assert_eq!(
        error("domain: d\ndescriptors:\n  - key: k\n    share_threshold: true\n"),
        "f.yaml: share_threshold can only be used with wildcard values (containing '*'), but found key 'k'"
    );
}

#[test]
fn detailed_metric_at_a_leaf_drops_metadata_as_the_go_service_does() {
    let config = load(
        "domain: d\ndescriptors:\n  - key: k\n    detailed_metric: true\n    metadata: {a: 1}\n    rate_limit: {unit: second, requests_per_unit: 1}\n  - key: m\n    metadata: {a: 1}\n    rate_limit: {unit: second, requests_per_unit: 1}\n",
    )
    .unwrap();
    let detailed = config
        .get_limit("d", &[("k", "v")], None, &NoStats)
        .unwrap();
    assert_eq!(&*detailed.stats_key, "d.k_v");
    assert!(detailed.metadata.is_none());
    let plain = config
        .get_limit("d", &[("m", "v")], None, &NoStats)
        .unwrap();
    assert_eq!(&*plain.stats_key, "d.m");
    assert!(plain.metadata.is_some());
}
