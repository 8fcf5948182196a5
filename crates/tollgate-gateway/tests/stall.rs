//! The gateway on a Redis that stalls (a redis-server of the test's own,
//! paused with SIGSTOP) and resumes (SIGCONT): the requests answered by the
//! failure policy during the stall (503 with `fail_closed`, passed unlimited
//! with `fail_open`) use none of their key's budget, although the calls made
//! for them stay queued on the connection and Redis runs them when it
//! resumes. The tests run when `REDIS_URL` is set (and under `CI=true`), as
//! the other Redis tests do, and need `redis-server`.

use std::time::{Duration, Instant};

use futures_util::future::join_all;
use reqwest::Method;
use serde_json::json;
use tollgate_test_support::gateway::{Gateway, config, header};
use tollgate_test_support::loopback::Upstream;
use tollgate_test_support::redis as redis_support;
use tollgate_test_support::redis::{Stalled, wait_for_the_backlog};

/// 2100-01-01T00:00:10Z: the gateway's manual clock, ten seconds into a
/// minute (the 60 s window does not end during the test) and far from today.
const START_S: u64 = 4_102_444_810;

/// A gateway on `redis` under `prefix`: a 200 ms store timeout (shorter than
/// the test's stall), `failure`,
/// decisions on the gateway's manual clock, every key 20 per 60 s, every path
/// to `upstream`.
fn on_redis(
    redis: &redis_support::OwnRedis,
    prefix: &str,
    upstream: &Upstream,
    failure: &str,
) -> String {
    config(&format!(
        "[limits.default_policy]\nalgorithm = \"fixed_window\"\nlimit = 20\nwindow_s = 60\n\
         [store]\nurl = \"{}\"\nprefix = \"{prefix}\"\ntimeout = \"200ms\"\n\
         failure = \"{failure}\"\ntime = \"local\"\n\
         [[routes]]\nprefix = \"/\"\nupstream = \"http://{}\"\n",
        redis.url(),
        upstream.address
    ))
}

/// `key`'s report from `POST /admin/inspect`, once Redis answers again.
async fn inspect(gateway: &Gateway, key: &str) -> serde_json::Value {
    let give_up = Instant::now() + Duration::from_secs(20);
    loop {
        let response = gateway
            .admin(Method::POST, "/admin/inspect", Some(json!({ "key": key })))
            .await;
        if response.status() == 200 {
            return response.json().await.unwrap();
        }
        assert!(Instant::now() < give_up, "Redis did not come back");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// A request with `key` that Redis decided (with `fail_open`, one with the
/// limit headers; with `fail_closed`, not a 503), at most 20 s on.
async fn answered(gateway: &Gateway, key: &str) -> reqwest::Response {
    let give_up = Instant::now() + Duration::from_secs(20);
    loop {
        let response = gateway.get("/", key).await;
        if response.status() != 503 && header(&response, "ratelimit").is_some() {
            return response;
        }
        assert!(Instant::now() < give_up, "Redis did not decide");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// Stalls Redis under a gateway with `failure`, sends 25 requests with one
/// key, checks each with `during`, resumes Redis, and checks that the key
/// kept its whole budget.
async fn stall_then_resume(failure: &str, during: impl Fn(&reqwest::Response)) {
    let redis = redis_support::OwnRedis::start();
    let upstream = Upstream::start().await;
    let prefix = redis_support::prefix(&format!("stall-{failure}"));
    let gateway = Gateway::start(&on_redis(&redis, &prefix, &upstream, failure), START_S).await;
    // Connected, and Redis's clock known.
    assert_eq!(answered(&gateway, "sk_warm").await.status(), 200);

    let servers = [redis.url()];
    let stalled = Stalled::stop(&servers);
    let responses = join_all((0..25).map(|_| gateway.get("/", "sk_a"))).await;
    for response in &responses {
        during(response);
    }
    drop(stalled);

    wait_for_the_backlog(&servers).await;
    let report = inspect(&gateway, "sk_a").await;
    assert_eq!(
        (&report["tracked"], &report["remaining"]),
        (&json!(false), &json!(20)),
        "{report}"
    );
    let next = answered(&gateway, "sk_a").await;
    assert_eq!(next.status(), 200);
    assert_eq!(
        header(&next, "x-ratelimit-remaining").as_deref(),
        Some("19")
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[cfg_attr(
    not(has_redis),
    ignore = "set REDIS_URL=redis://127.0.0.1:6379 to run (needs redis-server too)"
)]
async fn requests_refused_during_a_stall_use_no_budget() {
    stall_then_resume("fail_closed", |response| {
        assert_eq!(response.status(), 503);
        assert_eq!(
            header(response, "content-type").as_deref(),
            Some("application/problem+json")
        );
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[cfg_attr(
    not(has_redis),
    ignore = "set REDIS_URL=redis://127.0.0.1:6379 to run (needs redis-server too)"
)]
async fn requests_passed_unlimited_during_a_stall_use_no_budget() {
    stall_then_resume("fail_open", |response| {
        assert_eq!(response.status(), 200);
        assert!(header(response, "ratelimit").is_none());
    })
    .await;
}
