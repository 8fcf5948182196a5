//! Redis Sentinel through the services (issue #28): `tollgate serve` with
//! `[store] url = "redis-sentinel://..."` and `tollgate rls` with the Go
//! service's `REDIS_TYPE=SENTINEL` and `REDIS_URL=MASTER,HOST:PORT,...`,
//! each on a primary, its replica and three sentinels of Debian's
//! redis-server (test-support's `Sentinels`). A key brought to its limit
//! stays refused through a `SENTINEL FAILOVER` (its count replicated), and
//! another is decided on the new primary. For the gateway, the new primary
//! is then killed: while no primary is named, `fail_closed` answers 503
//! within the store's timeout, and decisions resume on the old primary once
//! the sentinels promote it (whether a count survives that second failover
//! depends on what was replicated before the kill: the store's own test,
//! `crates/tollgate-redis/tests/sentinel.rs`, checks it with every write
//! waited for, and times every call). `tollgate rls` also authenticates
//! with the Go service's `REDIS_AUTH` and `REDIS_SENTINEL_AUTH` to a
//! primary and sentinels that ask for passwords.

use std::time::{Duration, Instant};

use tollgate_rls::settings::Secret;
use tollgate_test_support::gateway::{Gateway, config};
use tollgate_test_support::loopback::Upstream;
use tollgate_test_support::redis::Sentinels;

/// The store's timeout in these tests.
const TIMEOUT: Duration = Duration::from_millis(300);
/// What a request may take past it on a busy machine (the proxying too):
/// a request stuck on a dead primary would take the client's own timeout
/// or forever, far past this.
const SLACK: Duration = Duration::from_millis(1700);

/// `key`'s status on `gateway`, and how long it took.
async fn timed(gateway: &Gateway, key: &str) -> (u16, Duration) {
    let started = Instant::now();
    let status = gateway.status("/x", key).await;
    (status, started.elapsed())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[cfg_attr(
    not(has_redis),
    ignore = "set REDIS_URL=redis://127.0.0.1:6379 to run (needs redis-server too)"
)]
async fn the_gateway_keeps_its_limits_through_a_sentinel_failover() {
    let deployment = Sentinels::start();
    let upstream = Upstream::start().await;
    let gateway = Gateway::start(
        &config(&format!(
            "[limits.default_policy]\nalgorithm = \"fixed_window\"\nlimit = 3\nwindow_s = 3600\n\
             [store]\nurl = \"{}\"\ntimeout = \"300ms\"\nfailure = \"fail_closed\"\n\
             [[routes]]\nprefix = \"/\"\nupstream = \"http://{}\"\n",
            deployment.url(),
            upstream.address
        )),
        0,
    )
    .await;
    for _ in 0..3 {
        assert_eq!(gateway.status("/x", "sk_full").await, 200);
    }
    assert_eq!(gateway.status("/x", "sk_full").await, 429);
    deployment.replicate(deployment.primary);
    deployment.fail_over();
    // Until the replica is named and answering: refused (429), or 503
    // while the store cannot decide; never let through.
    let mut on_the_new = false;
    for _ in 0..200 {
        let (status, took) = timed(&gateway, "sk_full").await;
        assert!(took <= TIMEOUT + SLACK, "a request took {took:?}");
        assert!(matches!(status, 429 | 503), "sk_full got {status}");
        if status == 429 && deployment.primary_named_by(0) == Some(deployment.replica) {
            on_the_new = true;
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert!(on_the_new, "never decided on the new primary");
    assert_eq!(gateway.status("/x", "sk_full").await, 429);
    assert_eq!(gateway.status("/x", "sk_other").await, 200);
    // The old primary a replica of the new (so the sentinels can promote it
    // back), then the new primary killed: 503 within the timeout until
    // they do, then decided again.
    let old = deployment.primary;
    let synced = tokio::task::spawn_blocking(move || {
        deployment.until_synced_replica(old);
        deployment
    });
    let mut deployment = synced.await.unwrap();
    deployment.replicate(deployment.replica);
    let replica = deployment.replica;
    deployment.kill(replica);
    let (mut failed, mut decided_again) = (0, None);
    for _ in 0..400 {
        let (status, took) = timed(&gateway, "sk_other").await;
        assert!(took <= TIMEOUT + SLACK, "a request took {took:?}");
        match status {
            503 => failed += 1,
            200 if deployment.primary_named_by(1) == Some(deployment.primary) => {
                decided_again = Some(status);
                break;
            }
            200 => {}
            other => panic!("sk_other got {other}"),
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert!(failed > 0, "no request was answered 503 without a primary");
    assert_eq!(decided_again, Some(200), "never decided again");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[cfg_attr(
    not(has_redis),
    ignore = "set REDIS_URL=redis://127.0.0.1:6379 to run (needs redis-server too)"
)]
async fn tollgate_rls_takes_the_go_services_sentinel_settings() {
    let deployment = Sentinels::start();
    let mut arguments = tollgate_test_support::rls::arguments();
    "SENTINEL".clone_into(&mut arguments.redis_type);
    arguments.redis_url = Some(Secret::new(deployment.go_url()));
    arguments.redis_socket_type = "tcp".to_owned();
    let yaml = "domain: sentinel\ndescriptors:\n  - key: k\n    rate_limit:\n      unit: hour\n      requests_per_unit: 2\n";
    let (rls, _directory) = tollgate_test_support::rls::start_at_noon(yaml, arguments).await;
    let http = rls.server().http_address().unwrap();
    let client = reqwest::Client::new();
    let ask = |value: &'static str| {
        let client = client.clone();
        async move {
            let body = format!(
                r#"{{"domain": "sentinel", "descriptors": [{{"entries": [{{"key": "k", "value": "{value}"}}]}}]}}"#
            );
            let answer = client
                .post(format!("http://{http}/json"))
                .body(body)
                .send()
                .await
                .unwrap();
            let status = answer.status().as_u16();
            let json: serde_json::Value = answer.json().await.unwrap_or_default();
            (
                status,
                json["overallCode"].as_str().unwrap_or("").to_owned(),
            )
        }
    };
    assert_eq!(ask("full").await, (200, "OK".to_owned()));
    assert_eq!(ask("full").await, (200, "OK".to_owned()));
    assert_eq!(ask("full").await, (429, "OVER_LIMIT".to_owned()));
    deployment.replicate(deployment.primary);
    deployment.fail_over();
    let mut on_the_new = false;
    for _ in 0..200 {
        let (_, code) = ask("full").await;
        // Never OK: refused, or an error while no primary answers.
        assert_ne!(code, "OK");
        if code == "OVER_LIMIT" && deployment.primary_named_by(0) == Some(deployment.replica) {
            on_the_new = true;
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert!(on_the_new, "never decided on the new primary");
    assert_eq!(ask("other").await, (200, "OK".to_owned()));
    tollgate_test_support::rls::stop(rls).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[cfg_attr(
    not(has_redis),
    ignore = "set REDIS_URL=redis://127.0.0.1:6379 to run (needs redis-server too)"
)]
async fn tollgate_rls_authenticates_to_the_primary_and_the_sentinels() {
    // The primary asks for one password and the sentinels for another: the
    // Go service's REDIS_AUTH and REDIS_SENTINEL_AUTH.
    let deployment = tokio::task::spawn_blocking(|| {
        Sentinels::start_with_passwords(Some("primary-pw"), Some("sentinel-pw"))
    })
    .await
    .unwrap();
    let start = |sentinel_auth: &str| {
        let mut arguments = tollgate_test_support::rls::arguments();
        "SENTINEL".clone_into(&mut arguments.redis_type);
        arguments.redis_url = Some(Secret::new(deployment.go_url()));
        arguments.redis_auth = Secret::new("primary-pw");
        arguments.redis_sentinel_auth = Secret::new(sentinel_auth);
        arguments
    };
    let yaml = "domain: sentinel\ndescriptors:\n  - key: k\n    rate_limit:\n      unit: hour\n      requests_per_unit: 1\n";
    let body =
        r#"{"domain": "sentinel", "descriptors": [{"entries": [{"key": "k", "value": "v"}]}]}"#;
    let (rls, _directory) =
        tollgate_test_support::rls::start_at_noon(yaml, start("sentinel-pw")).await;
    let http = rls.server().http_address().unwrap();
    let client = reqwest::Client::new();
    let ask = || client.post(format!("http://{http}/json")).body(body).send();
    assert_eq!(ask().await.unwrap().status(), 200);
    assert_eq!(ask().await.unwrap().status(), 429);
    tollgate_test_support::rls::stop(rls).await;
    // A wrong sentinel password: no primary is found, no request decided.
    let (rls, _directory) = tollgate_test_support::rls::start_at_noon(yaml, start("wrong")).await;
    let http = rls.server().http_address().unwrap();
    let answer = client
        .post(format!("http://{http}/json"))
        .body(body)
        .send()
        .await
        .unwrap();
    assert_ne!(answer.status(), 200);
    assert_ne!(answer.status(), 429);
    tollgate_test_support::rls::stop(rls).await;
}
