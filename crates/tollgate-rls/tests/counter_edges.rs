//! The Go service's counter at its edges, in memory and on Redis, on a manual
//! clock: a look (`hits_addend: 0`) at exactly the limit is OK and past it
//! OVER_LIMIT; `requests_per_unit: 0` counts every hit (so a look after one is
//! over, and a later limit starts from the count); and a changed limit keeps
//! the count, since envoyproxy/ratelimit's counter key
//! (`domain_key_value_..._windowstart`) names no limit.
//!
//! Expected values by the Go arithmetic (`GetResponseDescriptorStatus`): with
//! the counter `after` the request's hits, OVER_LIMIT when `after > limit`,
//! else OK with `limit - after` remaining.

use std::sync::Arc;
use std::time::Duration;

use serde_json::{Value, json};
use tollgate_core::{LimiterConfig, ManualClock, MemoryStore, Store};
use tollgate_redis::RedisStore;
use tollgate_rls::proto::RateLimitRequest;
use tollgate_rls::{LoaderOptions, RateLimitConfig, RateLimitService, ServiceSettings};
use tollgate_test_support::redis as redis_support;

/// 2100-01-01T00:00:10Z in nanoseconds: ten seconds into a minute, far from
/// today so that a decision on Redis's own clock instead would show.
const START: u64 = 4_102_444_810_000_000_000;

fn config(a_per_minute: u32, z_per_minute: u32) -> RateLimitConfig {
    let yaml = format!(
        "domain: d
descriptors:
  - key: a
    rate_limit: {{unit: minute, requests_per_unit: {a_per_minute}}}
  - key: z
    rate_limit: {{unit: minute, requests_per_unit: {z_per_minute}}}
"
    );
    RateLimitConfig::from_sources(&[("d.yaml", yaml)], &LoaderOptions::default()).unwrap()
}

/// `(overall code, limit_remaining)` of a request for descriptor `key` with
/// the descriptor's `hits_addend`.
async fn ask(service: &RateLimitService, key: &str, hits: u64) -> (String, u64) {
    let request: RateLimitRequest = serde_json::from_value(json!({
        "domain": "d",
        "descriptors": [{"entries": [{"key": key, "value": "v"}], "hitsAddend": hits.to_string()}],
    }))
    .unwrap();
    let response = service.should_rate_limit(&request).await.unwrap();
    let response: Value = serde_json::to_value(&response).unwrap();
    let remaining = response["statuses"][0]["limitRemaining"]
        .as_u64()
        .unwrap_or(0);
    (
        response["overallCode"].as_str().unwrap().to_owned(),
        remaining,
    )
}

async fn the_counter_at_its_edges(store: Arc<dyn Store>, clock: Arc<ManualClock>) {
    let service = RateLimitService::new(
        store,
        config(3, 0),
        ServiceSettings::default(),
        clock.clone(),
    );
    // a: 3 of 3 per minute.
    assert_eq!(ask(&service, "a", 3).await, ("OK".into(), 0));
    // A look at exactly the limit: 3 > 3 is false, so OK with 0 remaining.
    assert_eq!(ask(&service, "a", 0).await, ("OK".into(), 0));
    // One more hit: the counter is 4, over.
    assert_eq!(ask(&service, "a", 1).await, ("OVER_LIMIT".into(), 0));
    // A look past the limit: over.
    assert_eq!(ask(&service, "a", 0).await, ("OVER_LIMIT".into(), 0));

    // z: a limit of 0. A look at a fresh counter: 0 > 0 is false, OK.
    assert_eq!(ask(&service, "z", 0).await, ("OK".into(), 0));
    // A hit: over, and counted (the counter is 1), so a look is over too.
    assert_eq!(ask(&service, "z", 1).await, ("OVER_LIMIT".into(), 0));
    assert_eq!(ask(&service, "z", 0).await, ("OVER_LIMIT".into(), 0));

    // The limits change within the minute: a to 10, z to 2.
    clock.advance(Duration::from_secs(5));
    service.reload(config(10, 2));
    // a's counter is still 4: one hit makes 5, 5 remaining.
    assert_eq!(ask(&service, "a", 1).await, ("OK".into(), 5));
    // z's counter is still 1: one hit makes 2 of 2, 0 remaining; the next is over.
    assert_eq!(ask(&service, "z", 1).await, ("OK".into(), 0));
    assert_eq!(ask(&service, "z", 1).await, ("OVER_LIMIT".into(), 0));

    // The next minute starts afresh: a has 10, z 2.
    clock.advance(Duration::from_secs(60));
    assert_eq!(ask(&service, "a", 1).await, ("OK".into(), 9));
    assert_eq!(ask(&service, "z", 0).await, ("OK".into(), 2));
}

#[tokio::test]
async fn the_counter_at_its_edges_in_memory() {
    let clock = Arc::new(ManualClock::new(START));
    let store = MemoryStore::new(&LimiterConfig::default(), clock.clone()).unwrap();
    the_counter_at_its_edges(Arc::new(store), clock).await;
}

#[tokio::test]
#[cfg_attr(not(has_redis), ignore = "set REDIS_URL=redis://127.0.0.1:6379 to run")]
async fn the_counter_at_its_edges_on_redis() {
    let url = redis_support::require_redis_url();
    let clock = Arc::new(ManualClock::new(START));
    // A prefix of this test's own, fresh on every run.
    let prefix = format!("tollgate-test-counter-edges-{}", std::process::id());
    let redis = redis_support::on_manual_clock(&url, &prefix, clock.clone());
    let store = RedisStore::connect(redis, &LimiterConfig::default()).unwrap();
    the_counter_at_its_edges(Arc::new(store), clock).await;
}
