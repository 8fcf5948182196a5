//! The gateway with its limits in Redis, in process: when Redis is gone,
//! requests follow the failure policy, and decisions resume with it. Each
//! test starts a redis-server of its own; they run when `REDIS_URL` is set
//! (and under `CI=true`), as the Redis store's tests do, and are ignored
//! otherwise (this crate's build script sets the cfg `has_redis`).

use std::time::Duration;
use tollgate_test_support::gateway::{Gateway, config, header};
use tollgate_test_support::loopback::Upstream;
use tollgate_test_support::redis as redis_support;

/// A gateway on `redis` under `prefix` with a 50 ms store timeout and
/// `failure`, every path to `upstream` on a route named `route` (of this
/// gateway's own, so that its metrics are its own).
fn on_redis(
    redis: &redis_support::OwnRedis,
    prefix: &str,
    upstream: &Upstream,
    failure: &str,
    route: &str,
) -> String {
    config(&format!(
        "[store]\nurl = \"{}\"\nprefix = \"{prefix}\"\ntimeout = \"50ms\"\nfailure = \"{failure}\"\n\
         [[routes]]\nname = \"{route}\"\nprefix = \"/\"\nupstream = \"http://{}\"\n",
        redis.url(),
        upstream.address
    ))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[cfg_attr(
    not(has_redis),
    ignore = "set REDIS_URL=redis://127.0.0.1:6379 to run (needs redis-server too)"
)]
async fn without_redis_requests_follow_the_failure_policy_and_resume_after() {
    let mut redis = redis_support::OwnRedis::start();
    let upstream = Upstream::start().await;
    let prefix = redis_support::prefix("failure");
    let open = Gateway::start(
        &on_redis(&redis, &prefix, &upstream, "fail_open", "rf_open"),
        0,
    )
    .await;
    let closed = Gateway::start(
        &on_redis(&redis, &prefix, &upstream, "fail_closed", "rf_closed"),
        0,
    )
    .await;
    let limited = open.get("/", "sk_a").await;
    assert_eq!(limited.status(), 200);
    assert_eq!(
        header(&limited, "x-ratelimit-remaining").as_deref(),
        Some("4")
    );
    assert_eq!(closed.status("/", "sk_b").await, 200);

    redis.stop();
    // fail_open: through, unlimited (no limit headers); fail_closed: 503.
    let through = open.get("/", "sk_a").await;
    assert_eq!(through.status(), 200);
    assert!(header(&through, "ratelimit").is_none());
    let refused = closed.get("/", "sk_b").await;
    assert_eq!(refused.status(), 503);
    assert_eq!(
        header(&refused, "content-type").as_deref(),
        Some("application/problem+json")
    );
    // One failure each, counted by each gateway under its own route.
    let failures = |route: &'static str, policy: &'static str| {
        [("plugin", "tollgate"), ("route", route), ("policy", policy)]
    };
    assert_eq!(
        open.route_sample(
            "tollgate_store_failures_total",
            &failures("rf_open", "fail_open")
        )
        .await,
        Some(1.0)
    );
    assert_eq!(
        closed
            .route_sample(
                "tollgate_store_failures_total",
                &failures("rf_closed", "fail_closed")
            )
            .await,
        Some(1.0)
    );

    redis.run().unwrap();
    let mut resumed = false;
    for _ in 0..200 {
        let response = closed.get("/", "sk_b").await;
        if response.status() == 200 {
            // Redis kept nothing: a fresh budget.
            assert_eq!(
                header(&response, "x-ratelimit-remaining").as_deref(),
                Some("4")
            );
            resumed = true;
            break;
        }
        tokio::time::sleep(Duration::from_millis(25)).await;
    }
    assert!(resumed, "decisions did not resume");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[cfg_attr(
    not(has_redis),
    ignore = "set REDIS_URL=redis://127.0.0.1:6379 to run (needs redis-server too)"
)]
async fn readiness_says_when_redis_cannot_decide() {
    let mut redis = redis_support::OwnRedis::start();
    let upstream = Upstream::start().await;
    let prefix = redis_support::prefix("readiness");
    let open = Gateway::start(
        &on_redis(&redis, &prefix, &upstream, "fail_open", "rr_open"),
        0,
    )
    .await;
    let closed = Gateway::start(
        &on_redis(&redis, &prefix, &upstream, "fail_closed", "rr_closed"),
        0,
    )
    .await;
    let ready = |gateway: &Gateway| {
        let url = gateway.admin_url("/readyz");
        let client = gateway.client.clone();
        async move {
            let response = client.get(url).send().await.unwrap();
            (response.status().as_u16(), response.text().await.unwrap())
        }
    };
    assert_eq!(ready(&open).await, (200, "ready\n".to_owned()));
    assert_eq!(ready(&closed).await, (200, "ready\n".to_owned()));

    redis.stop();
    let (status, body) = ready(&open).await;
    assert_eq!(status, 200);
    assert!(
        body.starts_with("degraded: the limit store is unavailable"),
        "{body}"
    );
    assert!(
        body.ends_with("; requests pass unlimited (fail_open)\n"),
        "{body}"
    );
    let (status, body) = ready(&closed).await;
    assert_eq!(status, 503);
    let problem: serde_json::Value = serde_json::from_str(&body).unwrap();
    let detail = problem["detail"].as_str().unwrap();
    assert!(
        detail.starts_with("not ready: the limit store is unavailable"),
        "{detail}"
    );
    assert!(
        detail.ends_with("; requests get 503 (fail_closed)"),
        "{detail}"
    );

    redis.run().unwrap();
    let mut back = false;
    for _ in 0..200 {
        if ready(&closed).await.0 == 200 {
            back = true;
            break;
        }
        tokio::time::sleep(Duration::from_millis(25)).await;
    }
    assert!(back, "readiness did not come back with Redis");
}
