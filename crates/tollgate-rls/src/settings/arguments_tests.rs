//! The defaults of [`RlsArguments`](super::RlsArguments): the Go service's.
use super::*;

#[test]
fn defaults_are_the_go_services() {
    let defaults = RlsArguments::defaults();
    assert_eq!((defaults.host.as_str(), defaults.port), ("0.0.0.0", 8080));
    assert_eq!(
        (defaults.grpc_host.as_str(), defaults.grpc_port),
        ("0.0.0.0", 8081)
    );
    assert_eq!(
        (defaults.debug_host.as_str(), defaults.debug_port),
        ("0.0.0.0", 6070)
    );
    assert_eq!(
        defaults.runtime_root,
        PathBuf::from("/srv/runtime_data/current")
    );
    assert_eq!(defaults.runtime_appdirectory, "config");
    assert!(defaults.runtime_watch_root && !defaults.runtime_ignoredotfiles);
    assert_eq!(defaults.redis_url, None);
    assert_eq!(defaults.redis_type, "SINGLE");
    assert!((defaults.near_limit_ratio - 0.8).abs() < f32::EPSILON);
    assert_eq!(defaults.limit_remaining_header, "RateLimit-Remaining");
    assert!(defaults.use_statsd && !defaults.use_prometheus);
    assert_eq!(defaults.stats_flush_interval, Duration::from_secs(10));
    assert_eq!(defaults.redis_timeout, Duration::from_secs(10));
    assert_eq!(defaults.store_timeout, Duration::from_millis(50));
    assert_eq!(defaults.store_failure, None);
    assert_eq!(defaults.log_level, "INFO");
    assert!(defaults.check().is_ok());
}

#[test]
fn workers_are_the_setting_else_tokios_count_else_the_cpus() {
    assert_eq!(worker_setting(Some(3), Some("5")), Some(3));
    assert_eq!(worker_setting(None, Some("5")), Some(5));
    for unusable in ["0", "-1", "two", "", "1025"] {
        assert_eq!(worker_setting(None, Some(unusable)), None, "{unusable:?}");
    }
    assert_eq!(worker_setting(None, None), None);
}

#[test]
fn booleans_read_go_spellings() {
    assert_eq!(go_bool("True"), Ok(true));
    assert_eq!(go_bool("0"), Ok(false));
    assert!(go_bool("yes").is_err());
    let arguments =
        RlsArguments::try_parse_from(["t", "--shadow-mode", "--runtime-watch-root=false"]).unwrap();
    assert!(arguments.shadow_mode && !arguments.runtime_watch_root);
    assert!(RlsArguments::try_parse_from(["t", "--shadow-mode=yes"]).is_err());
}

#[test]
fn store_failure_policies() {
    let arguments =
        RlsArguments::try_parse_from(["t", "--store-failure=fail_closed", "--store-timeout=20ms"])
            .unwrap();
    assert_eq!(
        arguments.store_failure,
        Some(tollgate_core::FailurePolicy::FailClosed)
    );
    assert_eq!(arguments.store_timeout, Duration::from_millis(20));
    assert!(RlsArguments::try_parse_from(["t", "--store-failure=open"]).is_err());
}

#[test]
fn durations_read_go_spellings() {
    assert_eq!(go_duration("10s"), Ok(Duration::from_secs(10)));
    assert_eq!(go_duration("1m30s"), Ok(Duration::from_secs(90)));
    assert_eq!(go_duration("250ms"), Ok(Duration::from_millis(250)));
    assert_eq!(go_duration("1.5h"), Ok(Duration::from_secs(5400)));
    assert_eq!(go_duration("0"), Ok(Duration::ZERO));
    assert_eq!(positive_go_duration("45s"), Ok(Duration::from_secs(45)));
    assert!(positive_go_duration("0").is_err());
    assert!(positive_go_duration("0s").is_err());
    for bad in [
        "",
        "10",
        "s",
        "-1s",
        "1d",
        "1e3s",
        "9999999999999999999999h",
    ] {
        assert!(go_duration(bad).is_err(), "{bad}");
    }
}

#[test]
fn two_stats_sinks_are_refused() {
    let mut arguments = RlsArguments::defaults();
    arguments.use_prometheus = true;
    assert!(matches!(arguments.check(), Err(SettingsError::StatsSinks)));
    arguments.use_statsd = false;
    assert!(arguments.check().is_ok());
}
