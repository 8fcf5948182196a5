//! `HEALTHY_WITH_AT_LEAST_ONE_CONFIG_LOADED` (issue #28), as the Go
//! service's health `config` component: set, `/healthcheck` answers 500
//! until a configuration of at least one domain is loaded, and again when
//! the one in force has none; unset (the Go default), a service with a
//! broken configuration still answers 200.

use std::time::Duration;

use tollgate_test_support::rls;

const VALID: &str =
    "domain: d\ndescriptors:\n  - key: k\n    rate_limit: {unit: minute, requests_per_unit: 5}\n";

/// `/healthcheck`'s status once it is `expected` (at most 5 s: the files
/// are polled every 100 ms), else the last one seen.
async fn health_becomes(service: &tollgate_rls::Rls, expected: u16) -> u16 {
    let address = service.server().http_address().unwrap();
    let mut status = 0;
    for _ in 0..50 {
        status = reqwest::get(format!("http://{address}/healthcheck"))
            .await
            .unwrap()
            .status()
            .as_u16();
        if status == expected {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    status
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn health_waits_for_a_configuration_when_asked_to() {
    let mut arguments = rls::arguments();
    arguments.healthy_with_at_least_one_config_loaded = true;
    let (service, directory) = rls::start_at_noon("domain: [", arguments).await;
    assert_eq!(health_becomes(&service, 500).await, 500);
    std::fs::write(directory.path().join("rl.yaml"), VALID).unwrap();
    assert_eq!(health_becomes(&service, 200).await, 200);
    // A configuration of no domain at all: unhealthy again.
    std::fs::remove_file(directory.path().join("rl.yaml")).unwrap();
    assert_eq!(health_becomes(&service, 500).await, 500);
    rls::stop(service).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn by_default_health_does_not_look_at_the_configuration() {
    let (service, _directory) = rls::start_at_noon("domain: [", rls::arguments()).await;
    assert_eq!(health_becomes(&service, 200).await, 200);
    rls::stop(service).await;
}
