//! Stacked route layers: every limit's RateLimit fields in one List,
//! outermost first, decided in one store call so a request refused by one
//! limit uses nothing of the others; and what a store failure does. A manual
//! clock; every expected value is worked out by hand in the comments.

mod support;

use std::convert::Infallible;
use std::sync::Arc;

use http::{Request, Response, StatusCode};
use http_body_util::BodyExt;
use metrics_util::debugging::{DebugValue, DebuggingRecorder};
use tollgate_core::{
    Clock, KeyReport, Limit, LimitDecision, LimiterConfig, ManualClock, MemoryStore, Policy,
    PolicyError, PreparedPolicy, Resolution, Stats, Store, StoreError, StoreFuture,
};
use tollgate_tower::{Budget, FailurePolicy, HostLimits, KeySelector};
use tower::{Layer, Service, ServiceBuilder, ServiceExt};

use support::{Backend, from, with_tenant};

const PEER: &str = "192.0.2.7:5000";

fn budget(rpm: u64, burst: u64) -> Budget {
    Budget::new(rpm, burst).unwrap()
}

/// What a test reads of a response: status, `RateLimit-Policy`, `RateLimit`,
/// `Retry-After`.
#[derive(Debug, PartialEq, Eq)]
struct Seen {
    status: StatusCode,
    policy: Option<String>,
    state: Option<String>,
    retry_after: Option<String>,
}

fn seen(status: u16, policy: &str, state: &str, retry_after: Option<&str>) -> Seen {
    Seen {
        status: StatusCode::from_u16(status).unwrap(),
        policy: Some(policy.to_owned()).filter(|policy| !policy.is_empty()),
        state: Some(state.to_owned()).filter(|state| !state.is_empty()),
        retry_after: retry_after.map(str::to_owned),
    }
}

async fn send<S, B>(service: &S, request: Request<()>) -> Seen
where
    S: Service<Request<()>, Response = Response<B>, Error = Infallible> + Clone,
{
    let response = service.clone().oneshot(request).await.unwrap();
    let header = |name: &str| {
        let lines: Vec<_> = response
            .headers()
            .get_all(name)
            .iter()
            .map(|value| value.to_str().unwrap().to_owned())
            .collect();
        (!lines.is_empty()).then(|| lines.join(" | "))
    };
    Seen {
        status: response.status(),
        policy: header("ratelimit-policy"),
        state: header("ratelimit"),
        retry_after: header("retry-after"),
    }
}

/// `site`: 3 per client IP, refilled at 1 per second (advertised q=3;w=3).
/// `orders`: 1 per tenant, refilled at 1 per second (q=1;w=1).
fn site_and_orders(
    limits: &HostLimits,
) -> (
    tollgate_tower::RouteLimitLayer,
    tollgate_tower::RouteLimitLayer,
) {
    let site = limits
        .route("site")
        .budget(budget(60, 3))
        .unwrap()
        .key(KeySelector::Ip);
    let orders = limits
        .route("orders")
        .budget(budget(60, 1))
        .unwrap()
        .key(KeySelector::Tenant);
    (site, orders)
}

const BOTH: &str = "\"site\";q=3;w=3, \"orders\";q=1;w=1";

/// The stacked scenario, on any store whose clock is `clock`.
async fn stacked_layers_decide_together(limits: HostLimits, clock: &ManualClock) {
    let backend = Backend::default();
    let (site, orders) = site_and_orders(&limits);
    let service = ServiceBuilder::new()
        .layer(site)
        .layer(orders)
        .service(backend.service());
    let acme = || with_tenant(from(PEER), "acme");
    // Both allow: site 3 -> 2 (one token missing: full in 1 s), orders 1 -> 0
    // (full in 1 s).
    assert_eq!(
        send(&service, acme()).await,
        seen(200, BOTH, "\"site\";r=2;t=1, \"orders\";r=0;t=1", None)
    );
    // orders refuses (its next token is 1 s away); site is left at 2.
    assert_eq!(
        send(&service, acme()).await,
        seen(429, BOTH, "\"site\";r=2;t=1, \"orders\";r=0;t=1", Some("1"))
    );
    // Another tenant: a fresh orders bucket; site 2 -> 1 (full in 2 s), which
    // shows the refused request took nothing from it.
    assert_eq!(
        send(&service, with_tenant(from(PEER), "globex")).await,
        seen(200, BOTH, "\"site\";r=1;t=2, \"orders\";r=0;t=1", None)
    );
    // site 1 -> 0 (full in 3 s).
    assert_eq!(
        send(&service, with_tenant(from(PEER), "initech")).await,
        seen(200, BOTH, "\"site\";r=0;t=3, \"orders\";r=0;t=1", None)
    );
    // site refuses (1 s to its next token); umbrella's orders bucket, never
    // used, is whole: r=1, t=0.
    assert_eq!(
        send(&service, with_tenant(from(PEER), "umbrella")).await,
        seen(429, BOTH, "\"site\";r=0;t=3, \"orders\";r=1;t=0", Some("1"))
    );
    // One second later site has one token; umbrella's orders still has its
    // one, so the request passes: the refusal above used nothing of it.
    clock.advance_by("1s").unwrap();
    assert_eq!(
        send(&service, with_tenant(from(PEER), "umbrella")).await,
        seen(200, BOTH, "\"site\";r=0;t=3, \"orders\";r=0;t=1", None)
    );
    assert_eq!(backend.calls(), 4, "the two refused requests never ran");
}

#[tokio::test]
async fn stacked_layers_report_every_limit_and_a_refusal_uses_no_other_budget() {
    let clock = ManualClock::new(0);
    let limits = HostLimits::builder().clock(clock.clone()).build().unwrap();
    stacked_layers_decide_together(limits, &clock).await;
}

#[tokio::test]
async fn stacked_layers_decide_together_through_a_store_that_answers_later() {
    let clock = ManualClock::new(0);
    let store = Later::new(&clock);
    let limits = HostLimits::builder()
        .store(Arc::new(store))
        .build()
        .unwrap();
    stacked_layers_decide_together(limits, &clock).await;
}

#[tokio::test]
async fn a_401_further_in_uses_no_budget_further_out() {
    let clock = ManualClock::new(0);
    let limits = HostLimits::builder().clock(clock.clone()).build().unwrap();
    let (site, orders) = site_and_orders(&limits);
    let service = ServiceBuilder::new()
        .layer(site)
        .layer(orders)
        .service(Backend::default().service());
    // No tenant: orders answers 401; site, not asked, adds nothing.
    for _ in 0..5 {
        assert_eq!(send(&service, from(PEER)).await, seen(401, "", "", None));
    }
    // site is whole: 3 -> 2.
    assert_eq!(
        send(&service, with_tenant(from(PEER), "acme")).await,
        seen(200, BOTH, "\"site\";r=2;t=1, \"orders\";r=0;t=1", None)
    );
}

#[tokio::test]
async fn a_service_between_that_calls_later_makes_each_layer_decide_alone() {
    let clock = ManualClock::new(0);
    let limits = HostLimits::builder().clock(clock.clone()).build().unwrap();
    let (site, orders) = site_and_orders(&limits);
    // Like axum's `Route`: the inner service is called only when the future
    // is first polled, after site has decided.
    let inner = orders.layer(Backend::default().service());
    let lazy = tower::service_fn(move |request: Request<()>| inner.clone().oneshot(request));
    let service = site.layer(lazy);
    // The fields are still both, outermost first.
    assert_eq!(
        send(&service, with_tenant(from(PEER), "acme")).await,
        seen(200, BOTH, "\"site\";r=2;t=1, \"orders\";r=0;t=1", None)
    );
    // orders refuses, but site has decided (and used a token) already: the
    // documented caveat.
    assert_eq!(
        send(&service, with_tenant(from(PEER), "acme")).await,
        seen(429, BOTH, "\"site\";r=1;t=2, \"orders\";r=0;t=1", Some("1"))
    );
}

#[tokio::test]
async fn a_store_failure_fails_open_by_default_and_is_counted() {
    let recorder = DebuggingRecorder::new();
    let snapshotter = recorder.snapshotter();
    let limits = HostLimits::builder().store(Arc::new(Down)).build().unwrap();
    let backend = Backend::default();
    let layer = limits.route("orders").budget(budget(60, 1)).unwrap();
    let mut service = backend.wrapped(&layer);
    for _ in 0..3 {
        let ready = service.ready().await.unwrap();
        let response =
            metrics::with_local_recorder(&recorder, || futures_lite(ready.call(from(PEER))))
                .unwrap();
        assert_eq!(response.status(), StatusCode::OK);
        assert!(response.headers().get("ratelimit").is_none());
    }
    assert_eq!(backend.calls(), 3);
    let counters: Vec<_> = snapshotter
        .snapshot()
        .into_vec()
        .into_iter()
        .map(|(key, _, _, value)| {
            let key = key.key();
            let mut labels: Vec<String> = key
                .labels()
                .map(|label| format!("{}={}", label.key(), label.value()))
                .collect();
            labels.sort();
            (key.name().to_owned(), labels, value)
        })
        .collect();
    assert_eq!(
        counters,
        vec![(
            "tollgate_store_failures_total".to_owned(),
            vec![
                "plugin=tollgate".to_owned(),
                "policy=fail_open".to_owned(),
                "route=orders".to_owned()
            ],
            DebugValue::Counter(3)
        )]
    );
}

#[tokio::test]
async fn a_store_failure_fails_closed_when_asked_with_a_503() {
    let limits = HostLimits::builder()
        .store(Arc::new(Down))
        .failure_policy(FailurePolicy::FailClosed)
        .build()
        .unwrap();
    let backend = Backend::default();
    let service = backend.wrapped(&limits.route("orders").budget(budget(60, 1)).unwrap());
    let response = service.clone().oneshot(from(PEER)).await.unwrap();
    assert_eq!(response.status(), StatusCode::SERVICE_UNAVAILABLE);
    assert_eq!(
        response.headers()["content-type"],
        "application/problem+json"
    );
    let body = response.into_body().collect().await.unwrap().to_bytes();
    let problem: serde_json::Value = serde_json::from_slice(&body).unwrap();
    assert_eq!(problem["status"], 503);
    assert_eq!(
        problem["detail"],
        "the rate limiter cannot decide right now; retry shortly"
    );
    assert_eq!(backend.calls(), 0);
}

/// Runs a future the store answers at once (the decision is made under the
/// caller's local recorder).
fn futures_lite<F: std::future::Future>(future: F) -> F::Output {
    let mut future = std::pin::pin!(future);
    let mut context = std::task::Context::from_waker(std::task::Waker::noop());
    loop {
        if let std::task::Poll::Ready(output) = future.as_mut().poll(&mut context) {
            return output;
        }
    }
}

/// An in-memory store whose answers come one poll late, as a networked
/// store's do.
struct Later(MemoryStore);

impl Later {
    fn new(clock: &ManualClock) -> Self {
        let config = LimiterConfig {
            policy_lists: Default::default(),
            tiers: Default::default(),
            exempt_keys: Vec::new(),
            ..LimiterConfig::default()
        };
        let clock: Arc<dyn Clock> = Arc::new(clock.clone());
        Later(MemoryStore::new(&config, clock).unwrap())
    }
}

impl Store for Later {
    fn prepare(&self, policy: Policy) -> Result<PreparedPolicy, PolicyError> {
        self.0.prepare(policy)
    }

    fn acquire<'a>(&'a self, limits: &'a [Limit<'a>]) -> StoreFuture<'a, Vec<LimitDecision>> {
        Box::pin(async move {
            tokio::task::yield_now().await;
            self.0.acquire(limits).await
        })
    }

    fn is_exempt(&self, key: &str) -> bool {
        self.0.is_exempt(key)
    }

    fn default_policy(&self) -> StoreFuture<'_, Policy> {
        self.0.default_policy()
    }

    fn configure(&self, policy: Policy) -> StoreFuture<'_, Policy> {
        self.0.configure(policy)
    }

    fn assign_tier<'a>(&'a self, key: &'a str, tier: &'a str) -> StoreFuture<'a, ()> {
        self.0.assign_tier(key, tier)
    }

    fn reset<'a>(&'a self, key: &'a str) -> StoreFuture<'a, bool> {
        self.0.reset(key)
    }

    fn inspect<'a>(&'a self, key: &'a str) -> StoreFuture<'a, KeyReport> {
        self.0.inspect(key)
    }

    fn stats(&self) -> StoreFuture<'_, Stats> {
        self.0.stats()
    }

    fn reconfigure(&self, config: &LimiterConfig) -> Result<(), tollgate_core::ConfigError> {
        self.0.reconfigure(config)
    }
}

/// A store that is down: every call fails.
struct Down;

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
