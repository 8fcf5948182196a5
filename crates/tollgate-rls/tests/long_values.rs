//! Descriptor values of any length, on a manual clock: a 3 MB value is
//! decided and counted under one key across calls, two long values that
//! differ only at their end have budgets of their own, and on Redis a long
//! value keeps the key name it always had (the Redis store names every key
//! by its own SHA-256 digest; only the in-memory store is handed digests of
//! long keys).
//!
//! Expected values by the Go arithmetic: `requests_per_unit: 5` a minute, one
//! hit per call, all calls in one minute: calls 1 to 5 are OK with 4, 3, 2,
//! 1, 0 remaining, the 6th is OVER_LIMIT with 0.

use std::sync::Arc;
use std::time::Duration;

use sha2::{Digest, Sha256};
use tollgate_core::{Clock, LimiterConfig, ManualClock, MemoryStore, Store};
use tollgate_redis::{RedisConfig, RedisStore, TimeSource};
use tollgate_rls::proto::{Code, Entry, RateLimitDescriptor, RateLimitRequest};
use tollgate_rls::{
    LoaderOptions, RateLimitConfig, RateLimitService, RlsArguments, ServiceSettings,
};

/// 2100-01-01T00:00:10Z in nanoseconds: ten seconds into a minute, so that
/// every call of a test falls in one minute's window.
const START: u64 = 4_102_444_810_000_000_000;

/// 3 MiB, the size of the values that took the service to 1.6 GB.
const THREE_MB: usize = 3 << 20;

fn config() -> RateLimitConfig {
    let yaml = "domain: edge
descriptors:
  - key: token
    rate_limit: {unit: minute, requests_per_unit: 5}
";
    RateLimitConfig::from_sources(&[("edge.yaml", yaml)], &LoaderOptions::default()).unwrap()
}

fn request(value: &str) -> RateLimitRequest {
    RateLimitRequest {
        domain: "edge".into(),
        descriptors: vec![RateLimitDescriptor {
            entries: vec![Entry::new("token", value)],
            ..RateLimitDescriptor::default()
        }],
        hits_addend: 1,
    }
}

/// `(code, limit_remaining)` of one call for `value`.
async fn ask(service: &RateLimitService, value: &str) -> (Code, u32) {
    let response = service.should_rate_limit(&request(value)).await.unwrap();
    (response.overall_code, response.statuses[0].limit_remaining)
}

/// The answers of five calls and then a sixth: 4, 3, 2, 1, 0 left, then over.
const SPENT: [(Code, u32); 6] = [
    (Code::Ok, 4),
    (Code::Ok, 3),
    (Code::Ok, 2),
    (Code::Ok, 1),
    (Code::Ok, 0),
    (Code::OverLimit, 0),
];

async fn six_calls(service: &RateLimitService, value: &str) -> Vec<(Code, u32)> {
    let mut answers = Vec::new();
    for _ in 0..6 {
        answers.push(ask(service, value).await);
    }
    answers
}

fn in_memory() -> (Arc<MemoryStore>, RateLimitService) {
    let clock = Arc::new(ManualClock::new(START));
    let store = Arc::new(MemoryStore::new(&LimiterConfig::default(), clock.clone()).unwrap());
    let shared: Arc<dyn Store> = store.clone();
    let service = RateLimitService::new(shared, config(), ServiceSettings::default(), clock);
    (store, service)
}

async fn tracked_keys(store: &MemoryStore) -> u64 {
    store.stats().await.unwrap().tracked_keys
}

#[tokio::test]
async fn a_3_mb_value_is_counted_under_one_key() {
    let (store, service) = in_memory();
    let value = "v".repeat(THREE_MB);
    assert_eq!(six_calls(&service, &value).await, SPENT);
    assert_eq!(tracked_keys(&store).await, 1);
    // Another value still has its whole budget.
    assert_eq!(ask(&service, "short").await, (Code::Ok, 4));
    assert_eq!(tracked_keys(&store).await, 2);
}

#[tokio::test]
async fn long_values_with_a_long_common_prefix_have_budgets_of_their_own() {
    let (store, service) = in_memory();
    let prefix = "p".repeat(THREE_MB);
    let first = format!("{prefix}1");
    let second = format!("{prefix}2");
    assert_eq!(six_calls(&service, &first).await, SPENT);
    assert_eq!(six_calls(&service, &second).await, SPENT);
    // And the prefix alone, a value of its own too.
    assert_eq!(ask(&service, &prefix).await, (Code::Ok, 4));
    assert_eq!(tracked_keys(&store).await, 3);
}

/// Values around the length at which a key is kept as its digest (128
/// bytes: `edge_token_` and `_` are 12 of them), each its own budget.
#[tokio::test]
async fn values_around_the_digest_length_have_budgets_of_their_own() {
    let (store, service) = in_memory();
    let lengths = [115, 116, 117, 118, 200];
    for (index, length) in lengths.into_iter().enumerate() {
        let value = "x".repeat(length);
        assert_eq!(ask(&service, &value).await, (Code::Ok, 4), "{length}");
        assert_eq!(tracked_keys(&store).await, index as u64 + 1, "{length}");
    }
}

/// The Redis key name of the state of a key limited by a policy given with
/// the request, as `tollgate-redis`'s `keys.rs` names it with no key
/// secret: `PREFIX:{HEX}:s`, `HEX` the first 16 bytes of
/// SHA-256(`policy\0` KEY) in hex.
fn redis_state_name(prefix: &str, key: &str) -> String {
    let mut hasher = Sha256::new();
    hasher.update(b"policy\0");
    hasher.update(key.as_bytes());
    let digest = hasher.finalize();
    let hex: String = digest[..16].iter().map(|b| format!("{b:02x}")).collect();
    format!("{prefix}:{{{hex}}}:s")
}

#[tokio::test]
#[cfg_attr(not(has_redis), ignore = "set REDIS_URL=redis://127.0.0.1:6379 to run")]
async fn on_redis_a_long_value_keeps_its_key_name() {
    let url = tollgate_test_support::redis::require_redis_url();
    // The service's settings as `tollgate rls` reads them with `REDIS_URL`.
    let arguments = RlsArguments::try_parse_from(["rls", "--redis-url", url.as_str()]).unwrap();
    let settings = arguments.service_settings();
    let clock = Arc::new(ManualClock::new(START));
    let mut redis = RedisConfig::new(url.as_str());
    // A prefix of this test's own, fresh on every run.
    let prefix = format!("tollgate-test-rls-long-values-{}", std::process::id());
    redis.prefix.clone_from(&prefix);
    redis.timeout = Duration::from_secs(5);
    let shared: Arc<dyn Clock> = clock.clone();
    redis.time = TimeSource::Clock(shared);
    // Redis expires keys on its own clock: keep them past the test.
    redis.minimum_ttl = Duration::from_secs(600);
    let store: Arc<dyn Store> =
        Arc::new(RedisStore::connect(redis, &LimiterConfig::default()).unwrap());
    let service = RateLimitService::new(store, config(), settings, clock);

    let value = "r".repeat(THREE_MB);
    assert_eq!(six_calls(&service, &value).await, SPENT);

    let mut connection = redis::Client::open(url.as_str())
        .unwrap()
        .get_connection()
        .unwrap();
    let keys: Vec<String> = redis::cmd("KEYS")
        .arg(format!("{prefix}:*"))
        .query(&mut connection)
        .unwrap();
    // The Go cache key without its window, whole: `edge_token_<value>_`
    // (beside the state, the store's shared policy, `PREFIX:config`).
    let expected = redis_state_name(&prefix, &format!("edge_token_{value}_"));
    let mut states: Vec<&String> = keys.iter().filter(|key| key.ends_with(":s")).collect();
    states.sort();
    assert_eq!(states, [&expected]);
    for key in keys {
        let _: i64 = redis::cmd("DEL").arg(key).query(&mut connection).unwrap();
    }
}
