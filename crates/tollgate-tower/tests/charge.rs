//! A route layer charging by usage ([`RouteLimitLayer::charge`], issue #29):
//! each request admitted with its cost (1), then charged, when its response
//! body ends, the units the inner service reported in `x-usage` (at most 40).
//! A calendar quota of 100 a UTC day on a manual clock at midnight; the
//! budget read back from the store with looks. Expected values by hand.

mod support;

use std::convert::Infallible;
use std::sync::Arc;

use bytes::Bytes;
use http::{HeaderName, Request, Response};
use http_body_util::{BodyExt, Full};
use std::sync::atomic::{AtomicUsize, Ordering};

use tollgate_core::{
    Calendar, CalendarPeriod, KeyReport, Limit, LimitDecision, LimitUnits, LimiterConfig,
    ManualClock, MemoryStore, Policy, PolicyError, PreparedPolicy, Resolution, RouteKeyKind, Stats,
    Store, StoreError, StoreFuture, route_store_key,
};
use tollgate_tower::{Budget, ChargeError, DelayError, FailurePolicy, HostLimits, KeySelector};
use tower::{Layer, ServiceExt};

use support::from;

/// 2025-01-01T00:00:00Z.
const MIDNIGHT_S: u64 = 1_735_689_600;

/// The inner service: reports the request's `x-test-use` as `x-usage`.
fn reporting()
-> impl tower::Service<Request<()>, Response = Response<Full<Bytes>>, Error = Infallible, Future: Send>
+ Clone {
    tower::service_fn(|request: Request<()>| async move {
        let mut response = Response::new(Full::new(Bytes::from_static(b"tokens")));
        if let Some(used) = request.headers().get("x-test-use") {
            response.headers_mut().insert("x-usage", used.clone());
        }
        Ok::<_, Infallible>(response)
    })
}

/// What `budget` has left for 192.0.2.7 on `route`, read from `store` with
/// a look (a request of 0 units).
async fn left_of(store: &MemoryStore, route: &str, budget: Budget) -> u64 {
    let prepared = store.prepare(budget.policy()).unwrap();
    let key = route_store_key(route, RouteKeyKind::Ip, "192.0.2.7");
    let looked = store
        .acquire_units(&[LimitUnits {
            limit: Limit::Policy {
                key: &key,
                policy: &prepared,
            },
            units: 0,
        }])
        .await
        .unwrap();
    looked[0].decision.remaining.unwrap()
}

/// A memory store on a manual clock at midnight UTC, the host's limits
/// deciding in it, and the UTC day.
fn at_midnight() -> (ManualClock, Arc<MemoryStore>, HostLimits, Calendar) {
    let clock = ManualClock::new(MIDNIGHT_S * 1_000_000_000);
    let store =
        Arc::new(MemoryStore::new(&LimiterConfig::default(), Arc::new(clock.clone())).unwrap());
    let limits = HostLimits::builder()
        .store(Arc::clone(&store) as Arc<dyn Store>)
        .build()
        .unwrap();
    let day = Calendar::new(CalendarPeriod::Day, "UTC", None).unwrap();
    (clock, store, limits, day)
}

#[tokio::test]
async fn usage_replaces_the_cost_when_the_body_ends() {
    let (clock, store, limits, day) = at_midnight();
    let budget = Budget::calendar(100, day).unwrap();
    let layer = limits
        .route("llm")
        .budget(budget)
        .unwrap()
        .key(KeySelector::Ip)
        .charge(HeaderName::from_static("x-usage"), 40)
        .unwrap();
    let service = layer.layer(reporting());
    // What the budget has left once the last response's settlement ran.
    let left = || async {
        tokio::task::yield_now().await;
        left_of(&store, "llm", budget).await
    };
    let ask = |used: &str| {
        let mut request = from("192.0.2.7:5000");
        if !used.is_empty() {
            request
                .headers_mut()
                .insert("x-test-use", used.parse().unwrap());
        }
        let service = service.clone();
        async move {
            let response = service.oneshot(request).await.unwrap();
            let status = response.status().as_u16();
            let state = response
                .headers()
                .get("ratelimit")
                .map(|value| value.to_str().unwrap().to_owned());
            response.into_body().collect().await.unwrap();
            (status, state)
        }
    };
    // Admitted with 1 (99 left), charged the 10 reported.
    assert_eq!(
        ask("10").await,
        (200, Some("\"llm\";r=99;t=86400".to_owned()))
    );
    assert_eq!(left().await, 90);
    // 0 reported: the unit of admission back.
    ask("0").await;
    assert_eq!(left().await, 90);
    // A bad report and none: the cost stays.
    ask("-1").await;
    ask("").await;
    assert_eq!(left().await, 88);
    // Above max: 40. Then 40 more, then 30 past the 8 left: a debt of 22.
    ask("500").await;
    ask("40").await;
    assert_eq!(left().await, 8);
    assert_eq!(ask("30").await.0, 200);
    assert_eq!(left().await, 0);
    // In debt: refused until midnight.
    let refused = service
        .clone()
        .oneshot(from("192.0.2.7:5000"))
        .await
        .unwrap();
    assert_eq!(refused.status(), 429);
    assert_eq!(refused.headers().get("retry-after").unwrap(), "86400");
    clock.advance_by("86400s").unwrap();
    assert_eq!(ask("1").await.0, 200);
    assert_eq!(left().await, 99);
}

/// A client that accepts trailers (`TE: trailers`) gets the RateLimit
/// fields after the settlement as trailers, announced in `Trailer`; the
/// headers keep the state at admission. 100 a UTC day, at midnight.
#[tokio::test]
async fn trailers_carry_the_state_after_settlement() {
    let (clock, store, limits, day) = at_midnight();
    let service = limits
        .route("llm")
        .budget(Budget::calendar(100, day).unwrap())
        .unwrap()
        .key(KeySelector::Ip)
        .charge(HeaderName::from_static("x-usage"), 40)
        .unwrap()
        .layer(reporting());
    let ask = |used: &str, trailers: bool| {
        let mut request = from("192.0.2.7:5000");
        request
            .headers_mut()
            .insert("x-test-use", used.parse().unwrap());
        if trailers {
            request
                .headers_mut()
                .insert("te", "trailers".parse().unwrap());
        }
        let service = service.clone();
        async move {
            let response = service.oneshot(request).await.unwrap();
            let headers = response.headers().clone();
            let collected = response.into_body().collect().await.unwrap();
            (headers, collected.trailers().cloned())
        }
    };
    // Admitted with 1 (99 left), charged 30: 70.
    let (headers, trailers) = ask("30", true).await;
    assert_eq!(headers["ratelimit"], "\"llm\";r=99;t=86400");
    assert_eq!(headers["trailer"], "ratelimit-policy, ratelimit");
    let trailers = trailers.expect("trailers");
    assert_eq!(trailers["ratelimit"], "\"llm\";r=70;t=86400");
    assert_eq!(trailers["ratelimit-policy"], "\"llm\";q=100;w=86400");
    // A bad report: the cost stays (69), the trailers show it.
    let (_, trailers) = ask("-1", true).await;
    assert_eq!(trailers.unwrap()["ratelimit"], "\"llm\";r=69;t=86400");
    // Without TE: trailers: none, and no Trailer field (68, then 63).
    let (headers, trailers) = ask("6", false).await;
    assert_eq!(headers["ratelimit"], "\"llm\";r=68;t=86400");
    assert!(headers.get("trailer").is_none());
    assert_eq!(trailers, None);
    // Its settlement runs in a task of its own: wait for it (63 left).
    let budget = Budget::calendar(100, day).unwrap();
    for _ in 0..1000 {
        if left_of(&store, "llm", budget).await == 63 {
            break;
        }
        tokio::task::yield_now().await;
    }
    // An hour on (the key idle past the default eviction age, its day's
    // count kept), past max: charged 40 (62 at admission, 63 - 40 = 23).
    clock.advance_by("3600s").unwrap();
    let (headers, trailers) = ask("1000", true).await;
    assert_eq!(headers["ratelimit"], "\"llm\";r=62;t=82800");
    assert_eq!(trailers.unwrap()["ratelimit"], "\"llm\";r=23;t=82800");
}

#[test]
fn a_charge_is_checked() {
    let limits = HostLimits::builder().build().unwrap();
    let route = || {
        limits
            .route("checked")
            .budget(Budget::new(60, 10).unwrap())
            .unwrap()
    };
    let header = || HeaderName::from_static("x-usage");
    assert_eq!(
        route().charge(header(), 0).unwrap_err(),
        ChargeError::Max(0)
    );
    assert_eq!(
        route().charge(header(), (1 << 53) + 1).unwrap_err(),
        ChargeError::Max((1 << 53) + 1)
    );
    assert_eq!(
        route().cost(5).unwrap().charge(header(), 4).unwrap_err(),
        ChargeError::BelowCost { max: 4, cost: 5 }
    );
    let waiting = route().delay(std::time::Duration::from_secs(1)).unwrap();
    assert_eq!(
        waiting.charge(header(), 9).unwrap_err(),
        ChargeError::WithDelay
    );
    // A cost set after the charge is held to its max too.
    assert!(route().charge(header(), 4).unwrap().cost(5).is_err());
    let charged = route().charge(header(), 9).unwrap();
    let delay = std::time::Duration::from_secs(1);
    assert_eq!(
        charged.delay(delay).unwrap_err(),
        DelayError {
            delay,
            charged: true
        }
    );
}

/// A store that cannot decide, counting the settlements it is asked for.
#[derive(Default)]
struct Down {
    settlements: AtomicUsize,
}

fn down<'a, T: Send + 'a>() -> StoreFuture<'a, T> {
    Box::pin(std::future::ready(Err(StoreError::Unavailable(
        "down".to_owned(),
    ))))
}

impl Store for Down {
    fn prepare(&self, policy: Policy) -> Result<PreparedPolicy, PolicyError> {
        PreparedPolicy::compile(policy, Resolution::Nanoseconds)
    }
    fn acquire<'a>(&'a self, _: &'a [Limit<'a>]) -> StoreFuture<'a, Vec<LimitDecision>> {
        down()
    }
    fn acquire_units<'a>(&'a self, _: &'a [LimitUnits<'a>]) -> StoreFuture<'a, Vec<LimitDecision>> {
        down()
    }
    fn give_back_units<'a>(
        &'a self,
        _: &'a [LimitUnits<'a>],
    ) -> StoreFuture<'a, Vec<LimitDecision>> {
        self.settlements.fetch_add(1, Ordering::SeqCst);
        down()
    }
    fn overdraw_units<'a>(
        &'a self,
        _: &'a [LimitUnits<'a>],
        _: u64,
    ) -> StoreFuture<'a, Vec<LimitDecision>> {
        self.settlements.fetch_add(1, Ordering::SeqCst);
        down()
    }
    fn is_exempt(&self, _: &str) -> bool {
        false
    }
    fn default_policy(&self) -> StoreFuture<'_, Policy> {
        down()
    }
    fn configure(&self, _: Policy) -> StoreFuture<'_, Policy> {
        down()
    }
    fn assign_tier<'a>(&'a self, _: &'a str, _: &'a str) -> StoreFuture<'a, ()> {
        down()
    }
    fn reset<'a>(&'a self, _: &'a str) -> StoreFuture<'a, bool> {
        down()
    }
    fn inspect<'a>(&'a self, _: &'a str) -> StoreFuture<'a, KeyReport> {
        down()
    }
    fn stats(&self) -> StoreFuture<'_, Stats> {
        down()
    }
    fn reconfigure(&self, _: &LimiterConfig) -> Result<(), tollgate_core::ConfigError> {
        Ok(())
    }
}

/// A request let through because the store failed (fail open) was charged
/// nothing: its usage, whatever it reports, settles nothing.
#[tokio::test]
async fn a_request_let_through_by_a_failing_store_settles_nothing() {
    let store = Arc::new(Down::default());
    let limits = HostLimits::builder()
        .store(Arc::clone(&store) as Arc<dyn Store>)
        .failure_policy(FailurePolicy::FailOpen)
        .build()
        .unwrap();
    let layer = limits
        .route("down")
        .budget(Budget::new(60, 10).unwrap())
        .unwrap()
        .key(KeySelector::Ip)
        .charge(HeaderName::from_static("x-usage"), 9)
        .unwrap();
    let service = layer.layer(reporting());
    for used in ["0", "5"] {
        let mut request = from("192.0.2.7:5000");
        request
            .headers_mut()
            .insert("x-test-use", used.parse().unwrap());
        let response = service.clone().oneshot(request).await.unwrap();
        assert_eq!(response.status(), 200);
        response.into_body().collect().await.unwrap();
        tokio::task::yield_now().await;
    }
    assert_eq!(store.settlements.load(Ordering::SeqCst), 0);
}

/// A layer charged by usage inside one that is not: the outer layer decides
/// both limits in one call, and the inner one's settlement still runs once
/// the outer decision charged them (the flag it checks is made when the
/// inner layer asks for it). 1,000 and 100 a UTC day, at midnight.
#[tokio::test]
async fn a_layer_charged_by_usage_inside_one_that_is_not_settles() {
    let (_, store, limits, day) = at_midnight();
    let (outer_budget, inner_budget) = (
        Budget::calendar(1_000, day).unwrap(),
        Budget::calendar(100, day).unwrap(),
    );
    let outer = limits
        .route("api")
        .budget(outer_budget)
        .unwrap()
        .key(KeySelector::Ip);
    let inner = limits
        .route("llm")
        .budget(inner_budget)
        .unwrap()
        .key(KeySelector::Ip)
        .charge(HeaderName::from_static("x-usage"), 40)
        .unwrap();
    let service = outer.layer(inner.layer(reporting()));
    let left = |route: &'static str, budget: Budget| {
        let store = Arc::clone(&store);
        async move {
            tokio::task::yield_now().await;
            left_of(&store, route, budget).await
        }
    };
    let mut request = from("192.0.2.7:5000");
    request
        .headers_mut()
        .insert("x-test-use", "10".parse().unwrap());
    let response = service.clone().oneshot(request).await.unwrap();
    assert_eq!(response.status(), 200);
    response.into_body().collect().await.unwrap();
    // The outer limit keeps its unit; the inner one was admitted with 1
    // and charged the 10 reported.
    assert_eq!(left("api", outer_budget).await, 999);
    assert_eq!(left("llm", inner_budget).await, 90);
}
