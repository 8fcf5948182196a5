//! The tower layer's limits of issue #26 on one real Redis, each service
//! with stores of its own: a concurrency limit shared as leases
//! (`RedisSlots`), a route's delay (turns booked by the store's script, a
//! dropped request's turn given back), and known principals (an invented
//! one held to its client IP's budget). The stores' clock is a manual one
//! that stands still; waits run on tokio's real timer, and only orders and
//! counts are asserted, never durations. Needs `REDIS_URL` (ignored
//! without it, failing under `CI=true`: the build script sets `has_redis`).

mod support;

use std::sync::Arc;
use std::time::Duration;

use http::StatusCode;
use support::{Backend, from, header, send, with_principal};
use tollgate_core::{Clock, LimiterConfig, ManualClock};
use tollgate_redis::{RedisSlots, RedisStore};
use tollgate_test_support::redis as redis_support;
use tollgate_test_support::wait::until;
use tollgate_tower::{Budget, HostLimits, KeySelector, KnownKeys, UnknownKeys};

/// 2100-01-01T00:00:00Z in nanoseconds, far from Redis's own clock.
const START: u64 = 4_102_444_800_000_000_000;

/// A host whose rates and slots are kept in the Redis at `url` under
/// `prefix`, on `clock`, with `known` principals if any (others anonymous).
fn host(url: &str, prefix: &str, clock: &Arc<dyn Clock>, known: Option<&[u8]>) -> HostLimits {
    let redis = redis_support::on_manual_clock(url, prefix, Arc::clone(clock));
    let store = RedisStore::connect(redis.clone(), &LimiterConfig::default()).unwrap();
    let slots = RedisSlots::connect(&redis, Duration::from_secs(30)).unwrap();
    let mut builder = HostLimits::builder()
        .store(Arc::new(store))
        .slots(Arc::new(slots));
    if let Some(known) = known {
        let known = Arc::new(KnownKeys::parse(known).unwrap());
        builder = builder.known_keys(known, UnknownKeys::Anonymous);
    }
    builder.build().unwrap()
}

/// Waits until `host` holds no slot: a slot's release is a Redis call of
/// its own, sent when the response body is dropped.
async fn until_no_slot_is_held(host: &HostLimits) {
    until("no slot held", || host.slots_held() == 0).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[cfg_attr(not(has_redis), ignore = "set REDIS_URL=redis://127.0.0.1:6379 to run")]
async fn two_services_share_a_concurrency_limit_through_redis() {
    use tower::ServiceExt;
    let url = redis_support::require_redis_url();
    let prefix = redis_support::prefix("tower-in-flight");
    let clock: Arc<dyn Clock> = Arc::new(ManualClock::new(START));
    let hosts = [
        host(&url, &prefix, &clock, None),
        host(&url, &prefix, &clock, None),
    ];
    let backend = Backend::default();
    let services: Vec<_> = hosts
        .iter()
        .map(|host| {
            let layer = host
                .in_flight("tw_redis_in_flight", 1)
                .key(KeySelector::Principal);
            tower::Layer::layer(&layer, backend.service())
        })
        .collect();
    let request = |principal: &str| with_principal(from("192.0.2.20:5000"), principal);
    // p_a's response body is still held by its client through the first
    // service: the second refuses p_a, and lets p_b through.
    let held = services[0].clone().oneshot(request("p_a")).await.unwrap();
    assert_eq!(held.status(), StatusCode::OK);
    assert_eq!(hosts[0].slots_held(), 1);
    let refused = services[1].clone().oneshot(request("p_a")).await.unwrap();
    assert_eq!(refused.status(), StatusCode::TOO_MANY_REQUESTS);
    assert_eq!(refused.headers().get("retry-after").unwrap(), "1");
    let other = services[1].clone().oneshot(request("p_b")).await.unwrap();
    assert_eq!(other.status(), StatusCode::OK);
    drop((held, other));
    until_no_slot_is_held(&hosts[0]).await;
    until_no_slot_is_held(&hosts[1]).await;
    let again = services[1].clone().oneshot(request("p_a")).await.unwrap();
    assert_eq!(again.status(), StatusCode::OK);
    drop(again);
    until_no_slot_is_held(&hosts[1]).await;
    assert_eq!(backend.calls(), 3);
    let leases: Vec<_> = redis_support::state_keys_and_ttls(&url, &prefix)
        .into_iter()
        .filter(|(key, _)| key.ends_with(":f"))
        .collect();
    assert!(leases.is_empty(), "leases left: {leases:?}");
    redis_support::cleanup(&url, &prefix);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[cfg_attr(not(has_redis), ignore = "set REDIS_URL=redis://127.0.0.1:6379 to run")]
async fn requests_wait_their_turn_on_redis_and_a_request_gone_gives_it_back() {
    let url = redis_support::require_redis_url();
    let prefix = redis_support::prefix("tower-delay");
    let manual = ManualClock::new(START);
    let clock: Arc<dyn Clock> = Arc::new(manual.clone());
    // A token every 3 s, a bucket one deep, up to 4 s of waiting.
    let host = host(&url, &prefix, &clock, None);
    let layer = host
        .route("tw_redis_delay")
        .budget(Budget::new(20, 1).unwrap())
        .unwrap()
        .delay(Duration::from_secs(4))
        .unwrap();
    let backend = Backend::default();
    let service = backend.wrapped(&layer);
    let request = || from("192.0.2.21:5000");
    // On a clock that stands still: one at once, one at its turn (3 s), and
    // one whose turn (6 s) is past the delay, refused at once
    // (`Retry-After: 2`): it comes back before the one that waits.
    let (sender, mut receiver) = tokio::sync::mpsc::unbounded_channel();
    for _ in 0..3 {
        let (service, sender) = (service.clone(), sender.clone());
        tokio::spawn(async move {
            let response = send(&service, request()).await;
            let retry_after = header(&response, "retry-after").map(str::to_owned);
            sender.send((response.status(), retry_after)).unwrap();
        });
    }
    drop(sender);
    let mut answers = Vec::new();
    while let Some(answer) = receiver.recv().await {
        answers.push(answer);
    }
    let mut first_two = answers[..2].to_vec();
    first_two.sort();
    assert_eq!(
        first_two,
        [
            (StatusCode::OK, None),
            (StatusCode::TOO_MANY_REQUESTS, Some("2".to_owned()))
        ]
    );
    assert_eq!(answers[2], (StatusCode::OK, None));
    assert_eq!(backend.calls(), 2);
    // 4 s later the next turn (6 s) is 2 s away: a request waits for it,
    // and gives it back when dropped.
    manual.advance_by("4s").unwrap();
    let gone = tokio::time::timeout(Duration::from_millis(200), send(&service, request())).await;
    assert!(gone.is_err(), "still waiting when dropped");
    until_none_waits(&host).await;
    // The turn given back is taken by the next (it waits 2 s) and only it:
    // the one after it, 5 s away, is refused (`Retry-After: 1`).
    let next = {
        let service = service.clone();
        tokio::spawn(async move { send(&service, request()).await.status() })
    };
    until("the next request waiting", || host.requests_waiting() == 1).await;
    let after = send(&service, request()).await;
    assert_eq!(after.status(), StatusCode::TOO_MANY_REQUESTS);
    assert_eq!(header(&after, "retry-after"), Some("1"));
    assert_eq!(next.await.unwrap(), StatusCode::OK);
    assert_eq!(backend.calls(), 3);
    until_none_waits(&host).await;
    redis_support::cleanup(&url, &prefix);
}

/// Waits until no request of `host` waits for its turn.
async fn until_none_waits(host: &HostLimits) {
    until("no request waiting", || host.requests_waiting() == 0).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[cfg_attr(not(has_redis), ignore = "set REDIS_URL=redis://127.0.0.1:6379 to run")]
async fn invented_principals_share_their_client_ip_s_budget_across_services() {
    let url = redis_support::require_redis_url();
    let prefix = redis_support::prefix("tower-known");
    let clock: Arc<dyn Clock> = Arc::new(ManualClock::new(START));
    let backend = Backend::default();
    // Two services, each with its own store on one Redis; a route budget of
    // 2 at once keyed by principal, an unknown one keyed by client IP.
    let layers: Vec<_> = (0..2)
        .map(|_| {
            host(&url, &prefix, &clock, Some(b"p_known\n"))
                .route("tw_redis_known")
                .budget(Budget::new(60, 2).unwrap())
                .unwrap()
                .key(KeySelector::Principal)
        })
        .collect();
    let services: Vec<_> = layers.iter().map(|layer| backend.wrapped(layer)).collect();
    let peer = "192.0.2.22:5000";
    for (index, (principal, expected)) in [
        ("p_invented_1", StatusCode::OK),
        ("p_invented_2", StatusCode::OK),
        ("p_invented_3", StatusCode::TOO_MANY_REQUESTS),
        ("p_invented_4", StatusCode::TOO_MANY_REQUESTS),
        ("p_known", StatusCode::OK),
        ("p_known", StatusCode::OK),
        ("p_known", StatusCode::TOO_MANY_REQUESTS),
    ]
    .into_iter()
    .enumerate()
    {
        let response = send(&services[index % 2], with_principal(from(peer), principal)).await;
        assert_eq!(response.status(), expected, "request {index}, {principal}");
    }
    // Another client IP's invented principals have a budget of their own.
    let elsewhere = with_principal(from("192.0.2.23:5000"), "p_invented_1");
    assert_eq!(send(&services[1], elsewhere).await.status(), StatusCode::OK);
    assert_eq!(backend.calls(), 5);
    redis_support::cleanup(&url, &prefix);
}
