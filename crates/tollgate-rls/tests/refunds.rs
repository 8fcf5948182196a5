//! Refunds (`TOLLGATE_REFUNDS`): a limited descriptor sent with
//! `is_negative_hits` gives its hits back instead of being charged them,
//! and is answered OK with what remains after the refund; its hits are
//! counted in `refunded_hits`, not `total_hits`. Off (the default), the hits
//! are charged as the Go service charges them. Through the harness (an
//! in-memory store on a clock each step sets), through the service on the
//! in-memory store and on Redis (`REDIS_URL`) with its store calls counted,
//! and over real gRPC. Every expectation is worked out by hand.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use envoy_types::pb::envoy::extensions::common::ratelimit::v3::{
    RateLimitDescriptor as GrpcDescriptor, rate_limit_descriptor::Entry as GrpcEntry,
};
use envoy_types::pb::envoy::service::ratelimit::v3::RateLimitRequest as GrpcRequest;
use envoy_types::pb::envoy::service::ratelimit::v3::rate_limit_service_client::RateLimitServiceClient;
use serde_json::{Value, json};
use tollgate_core::{
    Clock, KeyReport, Limit, LimitDecision, LimitUnits, LimiterConfig, ManualClock, MemoryStore,
    Policy, PolicyError, PreparedPolicy, Stats, Store, StoreFuture,
};
use tollgate_redis::RedisStore;
use tollgate_rls::harness::run;
use tollgate_rls::proto::{Code, Entry, RateLimitDescriptor, RateLimitRequest};
use tollgate_rls::{Extensions, LoaderOptions, RateLimitConfig, RateLimitService, ServiceSettings};
use tollgate_test_support::redis as redis_support;
use tollgate_test_support::rls;

const EXTENSIONS: LoaderOptions = LoaderOptions {
    merge_domains: false,
    extensions: true,
};

const CONFIG: &str = "domain: d
descriptors:
  - key: fw
    rate_limit: {unit: minute, requests_per_unit: 10}
  - key: sl
    rate_limit: {algorithm: sliding_log, requests_per_unit: 3, window: 10s}
  - key: tb
    rate_limit: {algorithm: token_bucket, requests_per_unit: 10, window: 30s, burst: 5}
  - key: unl
    rate_limit: {unlimited: true}
";

fn refunds() -> ServiceSettings {
    ServiceSettings {
        extensions: Extensions {
            refunds: true,
            ..Extensions::default()
        },
        ..ServiceSettings::default()
    }
}

fn steps(settings: ServiceSettings, steps: &[Value]) -> Vec<Value> {
    let input = serde_json::to_vec(&steps).unwrap();
    let output = run(
        vec![("d.yaml".to_owned(), CONFIG.to_owned())],
        settings,
        EXTENSIONS,
        &input,
    )
    .unwrap();
    serde_json::from_slice(&output).unwrap()
}

/// One descriptor `key: x` with `hits`, given back when `negative`.
fn descriptor(key: &str, hits: u64, negative: bool) -> Value {
    let mut descriptor =
        json!({"entries": [{"key": key, "value": "x"}], "hitsAddend": hits.to_string()});
    if negative {
        descriptor["isNegativeHits"] = json!(true);
    }
    descriptor
}

/// A request at `now` for one descriptor.
fn at(now: u64, key: &str, hits: u64, negative: bool) -> Value {
    json!({"now": now, "request": {"domain": "d", "descriptors": [descriptor(key, hits, negative)]}})
}

/// (overall code, the first status's code, remaining, seconds until reset).
fn summary(out: &Value) -> (String, String, u64, String) {
    let response = &out["response"];
    let status = &response["statuses"][0];
    (
        response["overallCode"].as_str().unwrap().to_owned(),
        status["code"].as_str().unwrap_or("").to_owned(),
        status["limitRemaining"].as_u64().unwrap_or(0),
        status["durationUntilReset"]
            .as_str()
            .unwrap_or("")
            .to_owned(),
    )
}

fn s(text: &str) -> String {
    text.to_owned()
}

#[test]
fn a_fixed_window_gets_its_hits_back() {
    // 10 a minute; t=1000 is in the window [960, 1020).
    let out = steps(
        refunds(),
        &[
            at(1000, "fw", 8, false),
            at(1001, "fw", 5, true),
            at(1002, "fw", 7, false),
            at(1003, "fw", 1, false),
            at(1003, "fw", 100, true),
        ],
    );
    assert_eq!(summary(&out[0]), (s("OK"), s("OK"), 2, s("20s")));
    // 5 back: the counter 8 -> 3, 7 left; the window ends in 19 s.
    assert_eq!(summary(&out[1]), (s("OK"), s("OK"), 7, s("19s")));
    assert_eq!(
        out[1]["response"]["statuses"][0]["currentLimit"],
        json!({"requestsPerUnit": 10, "unit": "MINUTE"})
    );
    // So 7 more fit (the counter at 10), and the next is over.
    assert_eq!(summary(&out[2]), (s("OK"), s("OK"), 0, s("18s")));
    assert_eq!(summary(&out[3]).0, "OVER_LIMIT");
    // Everything back: the counter (11) at 0, the whole limit left.
    assert_eq!(summary(&out[4]), (s("OK"), s("OK"), 10, s("17s")));
    let stats = &out[4]["stats"];
    assert_eq!(stats["ratelimit.service.rate_limit.d.fw.total_hits"], 16);
    assert_eq!(
        stats["ratelimit.service.rate_limit.d.fw.refunded_hits"],
        105
    );
    assert_eq!(stats["ratelimit.service.rate_limit.d.fw.over_limit"], 1);
    assert_eq!(stats["ratelimit.service.rate_limit.d.fw.within_limit"], 15);
    // After the refund of everything, 10 fit again.
    let out = steps(
        refunds(),
        &[
            at(1000, "fw", 10, false),
            at(1001, "fw", 10, true),
            at(1002, "fw", 10, false),
        ],
    );
    assert_eq!(summary(&out[2]), (s("OK"), s("OK"), 0, s("18s")));
}

#[test]
fn without_the_setting_negative_hits_are_charged_as_the_go_service_does() {
    let out = steps(
        ServiceSettings::default(),
        &[at(1000, "fw", 8, false), at(1001, "fw", 5, true)],
    );
    // 8 + 5 = 13 on 10: over.
    assert_eq!(summary(&out[1]).0, "OVER_LIMIT");
    let stats = out[1]["stats"].as_object().unwrap();
    assert_eq!(stats["ratelimit.service.rate_limit.d.fw.total_hits"], 13);
    assert!(
        !stats.keys().any(|name| name.ends_with("refunded_hits")),
        "{stats:?}"
    );
}

#[test]
fn a_sliding_log_and_a_token_bucket_get_their_hits_back() {
    let out = steps(
        refunds(),
        &[
            // The log: 3 per 10 s.
            at(1000, "sl", 3, false),
            at(1001, "sl", 2, true),
            at(1001, "sl", 3, false),
            at(1001, "sl", 2, false),
            // The bucket: 5 deep, a token every 3 s.
            at(1010, "tb", 5, false),
            at(1010, "tb", 2, true),
            at(1010, "tb", 2, false),
            at(1010, "tb", 1, false),
        ],
    );
    assert_eq!(summary(&out[0]), (s("OK"), s("OK"), 0, s("10s")));
    // 2 of the 3 hits of 1000 back: 2 left; the one left leaves at 1010.
    assert_eq!(summary(&out[1]), (s("OK"), s("OK"), 2, s("9s")));
    // 3 do not fit in 2 (nothing taken), 2 do.
    assert_eq!(summary(&out[2]).0, "OVER_LIMIT");
    assert_eq!(summary(&out[3]), (s("OK"), s("OK"), 0, s("10s")));
    assert_eq!(summary(&out[4]), (s("OK"), s("OK"), 0, s("15s")));
    // 2 tokens back: 3 missing, full again in 9 s.
    assert_eq!(summary(&out[5]), (s("OK"), s("OK"), 2, s("9s")));
    assert_eq!(summary(&out[6]), (s("OK"), s("OK"), 0, s("15s")));
    assert_eq!(summary(&out[7]).0, "OVER_LIMIT");
    let stats = &out[7]["stats"];
    assert_eq!(stats["ratelimit.service.rate_limit.d.sl.refunded_hits"], 2);
    assert_eq!(stats["ratelimit.service.rate_limit.d.tb.refunded_hits"], 2);
    assert_eq!(stats["ratelimit.service.rate_limit.d.tb.total_hits"], 8);
}

#[test]
fn a_request_mixes_charges_and_refunds() {
    let out = steps(
        refunds(),
        &[
            at(1000, "fw", 4, false),
            json!({"now": 1001, "request": {"domain": "d", "descriptors": [
                descriptor("fw", 3, true),
                descriptor("sl", 2, false),
                descriptor("unl", 5, true),
                descriptor("nothing", 5, true),
            ]}}),
        ],
    );
    let response = &out[1]["response"];
    assert_eq!(response["overallCode"], "OK");
    let statuses = response["statuses"].as_array().unwrap();
    // fw: 4 - 3 = 1 counted, 9 left; sl: charged as usual, 1 left; the
    // unlimited and the unmatched descriptors answered as always.
    assert_eq!(statuses[0]["limitRemaining"], 9);
    assert_eq!(statuses[1]["limitRemaining"], 1);
    assert_eq!(statuses[2]["limitRemaining"], u64::from(u32::MAX));
    assert_eq!(statuses[3], json!({"code": "OK"}));
    let stats = &out[1]["stats"];
    assert_eq!(stats["ratelimit.service.rate_limit.d.fw.total_hits"], 4);
    assert_eq!(stats["ratelimit.service.rate_limit.d.fw.refunded_hits"], 3);
    assert_eq!(stats["ratelimit.service.rate_limit.d.sl.total_hits"], 2);
}

/// The in-memory store, counting the calls that decide and give back.
struct Counted {
    store: MemoryStore,
    decides: AtomicUsize,
    gives_back: AtomicUsize,
}

impl Counted {
    fn calls(&self) -> (usize, usize) {
        (
            self.decides.swap(0, Ordering::Relaxed),
            self.gives_back.swap(0, Ordering::Relaxed),
        )
    }
}

impl Store for Counted {
    fn prepare(&self, policy: Policy) -> Result<PreparedPolicy, PolicyError> {
        self.store.prepare(policy)
    }
    fn acquire<'a>(&'a self, limits: &'a [Limit<'a>]) -> StoreFuture<'a, Vec<LimitDecision>> {
        self.decides.fetch_add(1, Ordering::Relaxed);
        self.store.acquire(limits)
    }
    fn acquire_units<'a>(
        &'a self,
        limits: &'a [LimitUnits<'a>],
    ) -> StoreFuture<'a, Vec<LimitDecision>> {
        self.decides.fetch_add(1, Ordering::Relaxed);
        self.store.acquire_units(limits)
    }
    fn give_back_units<'a>(
        &'a self,
        limits: &'a [LimitUnits<'a>],
    ) -> StoreFuture<'a, Vec<LimitDecision>> {
        self.gives_back.fetch_add(1, Ordering::Relaxed);
        self.store.give_back_units(limits)
    }
    fn is_exempt(&self, key: &str) -> bool {
        self.store.is_exempt(key)
    }
    fn default_policy(&self) -> StoreFuture<'_, Policy> {
        self.store.default_policy()
    }
    fn configure(&self, policy: Policy) -> StoreFuture<'_, Policy> {
        self.store.configure(policy)
    }
    fn assign_tier<'a>(&'a self, key: &'a str, tier: &'a str) -> StoreFuture<'a, ()> {
        self.store.assign_tier(key, tier)
    }
    fn reset<'a>(&'a self, key: &'a str) -> StoreFuture<'a, bool> {
        self.store.reset(key)
    }
    fn inspect<'a>(&'a self, key: &'a str) -> StoreFuture<'a, KeyReport> {
        self.store.inspect(key)
    }
    fn stats(&self) -> StoreFuture<'_, Stats> {
        self.store.stats()
    }
    fn reconfigure(&self, config: &LimiterConfig) -> Result<(), tollgate_core::ConfigError> {
        self.store.reconfigure(config)
    }
}

fn request(descriptors: Vec<RateLimitDescriptor>) -> RateLimitRequest {
    RateLimitRequest {
        domain: "d".into(),
        descriptors,
        hits_addend: 0,
    }
}

fn one(key: &str, hits: u64, negative: bool) -> RateLimitDescriptor {
    RateLimitDescriptor {
        entries: vec![Entry::new(key, "x")],
        hits_addend: Some(hits),
        is_negative_hits: negative,
        ..RateLimitDescriptor::default()
    }
}

fn service(
    store: Arc<dyn Store>,
    clock: Arc<dyn Clock>,
    settings: ServiceSettings,
) -> RateLimitService {
    let config = RateLimitConfig::from_sources(&[("d.yaml", CONFIG)], &EXTENSIONS).unwrap();
    RateLimitService::new(store, config, settings, clock)
}

/// 2100-01-01T00:00:10Z in nanoseconds: ten seconds into a minute.
const START: u64 = 4_102_444_810_000_000_000;

#[tokio::test]
async fn a_request_takes_two_store_calls_at_most() {
    let clock = Arc::new(ManualClock::new(START));
    let counted = Arc::new(Counted {
        store: MemoryStore::new(&LimiterConfig::default(), clock.clone()).unwrap(),
        decides: AtomicUsize::new(0),
        gives_back: AtomicUsize::new(0),
    });
    let service = service(counted.clone(), clock.clone(), refunds());
    let mixed = request(vec![
        one("fw", 2, false),
        one("sl", 1, true),
        one("tb", 1, true),
    ]);
    let answer = service.should_rate_limit(&mixed).await.unwrap();
    assert_eq!(answer.overall_code, Code::Ok);
    assert_eq!(counted.calls(), (1, 1), "one decision, one refund");
    let refunds_only = request(vec![one("fw", 1, true), one("sl", 1, true)]);
    service.should_rate_limit(&refunds_only).await.unwrap();
    assert_eq!(counted.calls(), (0, 1));
    // Off: the negative hits are charged, in the one call that decides.
    let off = self::service(counted.clone(), clock, ServiceSettings::default());
    let answer = off.should_rate_limit(&mixed).await.unwrap();
    assert_eq!(answer.statuses[1].limit_remaining, 2, "charged");
    assert_eq!(counted.calls(), (1, 0));
}

/// A mixed timeline through the service on `store` (whose clock is
/// `clock`), the same on every store.
async fn refunds_through_the_store(store: Arc<dyn Store>, clock: Arc<ManualClock>) {
    let service = service(store, clock.clone(), refunds());
    let remaining = |answer: &tollgate_rls::proto::RateLimitResponse| -> Vec<(Code, u32)> {
        answer
            .statuses
            .iter()
            .map(|status| (status.code, status.limit_remaining))
            .collect()
    };
    // At 10 s into the minute: 12 hits on fw (over: the Go counter at 12),
    // the log's 3, the bucket's 5.
    let first = request(vec![
        one("fw", 12, false),
        one("sl", 3, false),
        one("tb", 5, false),
    ]);
    let answer = service.should_rate_limit(&first).await.unwrap();
    assert_eq!(
        remaining(&answer),
        [(Code::OverLimit, 0), (Code::Ok, 0), (Code::Ok, 0)]
    );
    // 3 s later, 4 of each back: fw 12 -> 8 (2 left); the log's 3 all (3
    // left); the bucket has 1 token again and takes 4 more (full).
    clock.advance(Duration::from_secs(3));
    let back = request(vec![
        one("fw", 4, true),
        one("sl", 4, true),
        one("tb", 4, true),
    ]);
    let answer = service.should_rate_limit(&back).await.unwrap();
    assert_eq!(answer.overall_code, Code::Ok);
    assert_eq!(
        remaining(&answer),
        [(Code::Ok, 2), (Code::Ok, 3), (Code::Ok, 5)]
    );
    let resets: Vec<u64> = answer
        .statuses
        .iter()
        .map(|status| status.duration_until_reset.unwrap().as_secs())
        .collect();
    // The minute ends in 47 s; the log and the bucket have nothing to reset.
    assert_eq!(resets, [47, 0, 0]);
    let stats = service.stats();
    assert_eq!(stats["ratelimit.service.rate_limit.d.fw.refunded_hits"], 4);
    assert_eq!(stats["ratelimit.service.rate_limit.d.fw.total_hits"], 12);
    // What a request then finds.
    let again = request(vec![
        one("fw", 2, false),
        one("sl", 3, false),
        one("tb", 5, false),
    ]);
    let answer = service.should_rate_limit(&again).await.unwrap();
    assert_eq!(
        remaining(&answer),
        [(Code::Ok, 0), (Code::Ok, 0), (Code::Ok, 0)]
    );
}

#[tokio::test]
async fn refunds_in_memory() {
    let clock = Arc::new(ManualClock::new(START));
    let store = MemoryStore::new(&LimiterConfig::default(), clock.clone()).unwrap();
    refunds_through_the_store(Arc::new(store), clock).await;
}

#[tokio::test]
#[cfg_attr(not(has_redis), ignore = "set REDIS_URL=redis://127.0.0.1:6379 to run")]
async fn refunds_on_redis() {
    let url = redis_support::require_redis_url();
    let clock = Arc::new(ManualClock::new(START));
    let prefix = redis_support::prefix("rls-refunds");
    let redis = redis_support::on_manual_clock(&url, &prefix, clock.clone());
    let store = RedisStore::connect(redis, &LimiterConfig::default()).unwrap();
    refunds_through_the_store(Arc::new(store), clock).await;
    redis_support::cleanup(&url, &prefix);
}

#[tokio::test]
async fn refunds_over_grpc() {
    // A token bucket of 2 refilled once a day: no window ends during the
    // test, whatever the wall clock says.
    let directory = tempfile::tempdir().unwrap();
    std::fs::write(
        directory.path().join("rl.yaml"),
        "domain: rl\ndescriptors:\n  - key: foo\n    rate_limit: \
         {algorithm: token_bucket, requests_per_unit: 1, window: 86400s, burst: 2}\n",
    )
    .unwrap();
    let mut arguments = rls::arguments();
    arguments.config = Some(directory.path().to_owned());
    arguments.config_extensions = true;
    arguments.refunds = true;
    let rls = tollgate_rls::Rls::start_polling(&arguments, Duration::from_millis(100))
        .await
        .unwrap();
    let address = format!("http://{}", rls.server().grpc_address().unwrap());
    let mut client = RateLimitServiceClient::connect(address).await.unwrap();
    let ask = |hits: u64, negative: bool| GrpcRequest {
        domain: "rl".to_owned(),
        descriptors: vec![GrpcDescriptor {
            entries: vec![GrpcEntry {
                key: "foo".to_owned(),
                value: "a".to_owned(),
            }],
            hits_addend: Some(envoy_types::pb::google::protobuf::UInt64Value { value: hits }),
            is_negative_hits: negative,
            ..GrpcDescriptor::default()
        }],
        hits_addend: 0,
    };
    // (overall code: 1 OK, 2 OVER_LIMIT; remaining).
    let mut answers = Vec::new();
    for (hits, negative) in [(2, false), (1, true), (1, false), (1, false)] {
        let answer = client
            .should_rate_limit(ask(hits, negative))
            .await
            .unwrap()
            .into_inner();
        answers.push((answer.overall_code, answer.statuses[0].limit_remaining));
    }
    // Both tokens taken; one back; taken again; then none.
    assert_eq!(answers, [(1, 0), (1, 1), (1, 0), (2, 0)]);
    rls::stop(rls).await;
}
