//! `examples/rls/config` (the directory docs/RLS.md and the README start
//! `tollgate rls` on) loads as a configuration directory, with the Go
//! service's rules (no extensions), and means what its comments say.

use std::path::PathBuf;

use tollgate_rls::{ConfigSource, LoaderOptions, NoStats, Unit};

#[test]
fn the_example_config_loads_and_matches() {
    let directory = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../examples/rls/config");
    let source = ConfigSource::directory(&directory, LoaderOptions::default());
    let (config, files) = source.read_and_load().unwrap();
    assert_eq!(files.files.len(), 1);
    assert!(files.skipped.is_empty());

    let limit = |entries: &[(&str, &str)]| config.get_limit("edge", entries, None, &NoStats);
    let client = limit(&[("remote_address", "10.0.0.1")]).unwrap();
    assert_eq!(
        (
            client.limit.requests_per_unit,
            client.limit.unit,
            client.limit.name.as_str()
        ),
        (60, Unit::Minute, "per_client")
    );
    let key = limit(&[("api_key", "k-123")]).unwrap();
    assert_eq!(
        (key.limit.requests_per_unit, key.limit.unit),
        (1000, Unit::Hour)
    );
    assert_eq!(&*key.stats_key, "edge.api_key");
    assert!(
        limit(&[("api_key", "internal-batch")])
            .unwrap()
            .limit
            .unlimited
    );
    let trial = limit(&[("api_key", "partner-trial")]).unwrap();
    assert!(trial.limit.shadow_mode);
    let login = limit(&[("path", "/login"), ("method", "POST")]).unwrap();
    assert_eq!(
        (login.limit.requests_per_unit, login.limit.unit),
        (5, Unit::Second)
    );
    assert_eq!(&*login.stats_key, "edge.path_/login.method_POST");
    assert!(limit(&[("path", "/login"), ("method", "GET")]).is_none());
    assert!(limit(&[("path", "/login")]).is_none());
}
