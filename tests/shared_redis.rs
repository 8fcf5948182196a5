//! A gateway and a rate limit service on one Redis, each on its default
//! settings, keep their own state: `tollgate rls` writes under
//! `tollgate-rls`, the gateway under `tollgate`. When both wrote under
//! `tollgate`, the gateway adopted the shared default policy the service had
//! written first (the built-in 5 per 60 s) and refused a key whose file
//! policy allows 1,000 from its 6th request.

use std::time::Duration;

use tollgate_rls::settings::Secret;
use tollgate_test_support::gateway::{Gateway, config};
use tollgate_test_support::loopback::Upstream;
use tollgate_test_support::redis as redis_support;
use tollgate_test_support::rls;

#[tokio::test]
#[cfg_attr(
    not(has_redis),
    ignore = "set REDIS_URL=redis://127.0.0.1:6379 (and install redis-server) to run"
)]
async fn a_gateway_and_a_rate_limit_service_on_one_redis_keep_their_own_state() {
    // A Redis of this test's own: both servers use their default prefixes.
    let redis = redis_support::OwnRedis::start();
    let url = redis.url();
    let mut arguments = rls::arguments();
    arguments.redis_url = Some(Secret::new(url.clone()));
    let (rls, _directory) = rls::start_at_noon(
        "domain: d\ndescriptors:\n  - key: k\n    rate_limit: {unit: minute, requests_per_unit: 5}\n",
        arguments,
    )
    .await;
    // The service shares its default policy under its own prefix; wait (at
    // most 10 s) until it has, so that the gateway starts after it.
    let mut written = false;
    for _ in 0..500 {
        if !redis_support::keys(&url, "tollgate-rls:config").is_empty() {
            written = true;
            break;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert!(written, "tollgate rls wrote no tollgate-rls:config");

    let upstream = Upstream::start().await;
    let gateway = Gateway::start(
        &config(&format!(
            "[store]\nurl = \"{url}\"\ntimeout = \"2s\"\n\
             [limits.default_policy]\nalgorithm = \"sliding_log\"\nlimit = 1000\nwindow_s = 60\n\
             [[routes]]\nname = \"shared_redis\"\nprefix = \"/\"\nupstream = \"http://{}\"\n",
            upstream.address
        )),
        0,
    )
    .await;
    // The file's 1,000 per 60 s: ten requests leave 990.
    for request in 1..=10 {
        let response = gateway.get("/", "sk_shared").await;
        assert_eq!(response.status(), 200, "request {request}");
        assert_eq!(
            response.headers()["x-ratelimit-remaining"],
            (1000 - request).to_string().as_str()
        );
    }
    assert!(redis_support::keys(&url, "tollgate:config").len() == 1);
    gateway.running.shutdown().await;
    rls::stop(rls).await;
}
