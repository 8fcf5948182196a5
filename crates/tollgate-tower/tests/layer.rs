//! The route layer's behaviour, driven through `tower::ServiceExt` with a manual
//! clock. Every expected value is worked out by hand in the comments.

mod support;

use std::sync::Arc;
use std::time::Duration;

use http::StatusCode;
use metrics_util::debugging::{DebugValue, DebuggingRecorder};
use tollgate_core::ManualClock;
use tollgate_tower::{Budget, HostDefaults, HostLimits, KeySelector};
use tower::{Service, ServiceExt};

use support::{
    Backend, from, header, json, send, status, with_header, with_principal, with_tenant,
};

const PEER: &str = "192.0.2.7:5000";

fn limits(clock: &ManualClock) -> HostLimits {
    HostLimits::builder().clock(clock.clone()).build().unwrap()
}

fn budget(rpm: u64, burst: u64) -> Budget {
    Budget::new(rpm, burst).unwrap()
}

#[tokio::test]
async fn burst_window_allows_n_requests() {
    let clock = ManualClock::new(0);
    let layer = limits(&clock)
        .route("orders")
        .budget(budget(60, 5))
        .unwrap()
        .key(KeySelector::Tenant);
    let service = Backend::default().wrapped(&layer);
    // Five requests 20 ms apart, all within 100 ms: the bucket of 5 covers them.
    // One token a second comes back: after the k-th request (at (k - 1) * 20
    // ms) k - (k - 1) * 0.02 tokens are missing, so the bucket is full again
    // in 1, 1.98, 2.96, 3.94 and 4.92 s, rounded up.
    for (remaining, full_in) in [(4, 1), (3, 2), (2, 3), (1, 4), (0, 5)] {
        let response = send(&service, with_tenant(from(PEER), "acme")).await;
        assert_eq!(response.status(), StatusCode::OK);
        assert_eq!(
            header(&response, "ratelimit-policy"),
            Some("\"orders\";q=5;w=5")
        );
        assert_eq!(
            header(&response, "ratelimit"),
            Some(format!("\"orders\";r={remaining};t={full_in}").as_str())
        );
        clock.advance(Duration::from_millis(20));
    }
}

#[tokio::test]
async fn sixth_request_in_burst_window_is_rejected_with_retry_after() {
    let clock = ManualClock::new(0);
    let backend = Backend::default();
    let layer = limits(&clock)
        .route("orders")
        .budget(budget(60, 5))
        .unwrap()
        .key(KeySelector::Tenant);
    let service = backend.wrapped(&layer);
    for _ in 0..5 {
        assert_eq!(
            status(&service, with_tenant(from(PEER), "acme")).await,
            StatusCode::OK
        );
        clock.advance(Duration::from_millis(20));
    }
    // At 100 ms, 0.1 token has come back: the next whole token is 900 ms away,
    // which rounds up to 1 s. The bucket is full again after 4.9 s: t=5.
    let response = send(&service, with_tenant(from(PEER), "acme")).await;
    assert_eq!(response.status(), StatusCode::TOO_MANY_REQUESTS);
    assert_eq!(header(&response, "retry-after"), Some("1"));
    assert_eq!(
        header(&response, "content-type"),
        Some("application/problem+json")
    );
    assert_eq!(header(&response, "ratelimit"), Some("\"orders\";r=0;t=5"));
    assert_eq!(
        header(&response, "ratelimit-policy"),
        Some("\"orders\";q=5;w=5")
    );
    let problem = json(response).await;
    assert_eq!(problem["status"], 429);
    assert_eq!(problem["title"], "Too Many Requests");
    assert_eq!(problem["retry_after"], 1);
    assert_eq!(
        backend.calls(),
        5,
        "a rejected request never reaches the service"
    );
}

#[tokio::test]
async fn clock_advance_refills_tokens_deterministically() {
    let clock = ManualClock::new(0);
    let limits = limits(&clock);
    // rpm 60: exactly one token per second.
    let service = Backend::default().wrapped(&limits.route("a").budget(budget(60, 5)).unwrap());
    for _ in 0..5 {
        assert_eq!(status(&service, from(PEER)).await, StatusCode::OK);
    }
    assert_eq!(
        status(&service, from(PEER)).await,
        StatusCode::TOO_MANY_REQUESTS
    );
    clock.advance_by("1s").unwrap();
    assert_eq!(status(&service, from(PEER)).await, StatusCode::OK);
    assert_eq!(
        status(&service, from(PEER)).await,
        StatusCode::TOO_MANY_REQUESTS
    );
    // rpm 7: after 60 s exactly 7 tokens, not 6 and not 8.
    let service = Backend::default().wrapped(&limits.route("b").budget(budget(7, 7)).unwrap());
    for _ in 0..7 {
        assert_eq!(status(&service, from(PEER)).await, StatusCode::OK);
    }
    assert_eq!(
        status(&service, from(PEER)).await,
        StatusCode::TOO_MANY_REQUESTS
    );
    clock.advance_by("60s").unwrap();
    for _ in 0..7 {
        assert_eq!(status(&service, from(PEER)).await, StatusCode::OK);
    }
    assert_eq!(
        status(&service, from(PEER)).await,
        StatusCode::TOO_MANY_REQUESTS
    );
}

#[tokio::test]
async fn retry_after_rounds_a_partial_refill_up_and_keeps_exact_seconds() {
    let clock = ManualClock::new(0);
    // rpm 30: one token every 2 s.
    let service =
        Backend::default().wrapped(&limits(&clock).route("slow").budget(budget(30, 1)).unwrap());
    assert_eq!(status(&service, from(PEER)).await, StatusCode::OK);
    let retry_after = |response: http::Response<support::Body>| {
        header(&response, "retry-after").map(str::to_owned)
    };
    // Exactly 2 s to wait: says 2, not 3.
    assert_eq!(
        retry_after(send(&service, from(PEER)).await).as_deref(),
        Some("2")
    );
    // 1.5 s to wait: rounds up to 2.
    clock.advance_by("500ms").unwrap();
    assert_eq!(
        retry_after(send(&service, from(PEER)).await).as_deref(),
        Some("2")
    );
    // 1 s to wait exactly.
    clock.advance_by("500ms").unwrap();
    assert_eq!(
        retry_after(send(&service, from(PEER)).await).as_deref(),
        Some("1")
    );
    // 1 ns to wait: never 0.
    clock.advance(Duration::from_nanos(999_999_999));
    assert_eq!(
        retry_after(send(&service, from(PEER)).await).as_deref(),
        Some("1")
    );
    clock.advance(Duration::from_nanos(1));
    assert_eq!(status(&service, from(PEER)).await, StatusCode::OK);
}

#[tokio::test]
async fn tenant_key_isolates_buckets() {
    let clock = ManualClock::new(0);
    let layer = limits(&clock)
        .route("orders")
        .budget(budget(60, 2))
        .unwrap()
        .key(KeySelector::Tenant);
    let service = Backend::default().wrapped(&layer);
    for _ in 0..2 {
        assert_eq!(
            status(&service, with_tenant(from(PEER), "acme")).await,
            StatusCode::OK
        );
    }
    assert_eq!(
        status(&service, with_tenant(from(PEER), "acme")).await,
        StatusCode::TOO_MANY_REQUESTS
    );
    // Same IP, other tenant: a bucket of its own.
    assert_eq!(
        status(&service, with_tenant(from(PEER), "globex")).await,
        StatusCode::OK
    );
    assert_eq!(
        status(&service, with_tenant(from(PEER), "ACME")).await,
        StatusCode::OK
    );
}

#[tokio::test]
async fn default_falls_back_to_ip_without_principal() {
    let clock = ManualClock::new(0);
    let service =
        Backend::default().wrapped(&limits(&clock).route("any").budget(budget(60, 1)).unwrap());
    // No principal: keyed by IP.
    assert_eq!(status(&service, from("192.0.2.7:1")).await, StatusCode::OK);
    assert_eq!(
        status(&service, from("192.0.2.7:2")).await,
        StatusCode::TOO_MANY_REQUESTS
    );
    assert_eq!(status(&service, from("192.0.2.8:1")).await, StatusCode::OK);
    // A principal from the same IP is keyed by the principal.
    assert_eq!(
        status(&service, with_principal(from("192.0.2.7:1"), "alice")).await,
        StatusCode::OK
    );
    assert_eq!(
        status(&service, with_principal(from("192.0.2.9:1"), "alice")).await,
        StatusCode::TOO_MANY_REQUESTS
    );
}

#[tokio::test]
async fn tenant_and_ip_buckets_never_share_state_even_with_equal_strings() {
    let clock = ManualClock::new(0);
    // One store, and one route name for every key kind: only the kind keeps
    // the buckets apart. Each bucket holds one request.
    let limits = limits(&clock);
    let route = || limits.route("any").budget(budget(60, 1)).unwrap();
    let by_default = Backend::default().wrapped(&route());
    let custom =
        KeySelector::custom(|request| Some(request.uri.path().trim_start_matches('/').to_owned()));
    let by_custom = Backend::default().wrapped(&route().key(custom));
    let by_tenant = Backend::default().wrapped(&route().key(KeySelector::Tenant));
    let to_the_ip = || {
        let mut request = from(PEER);
        *request.uri_mut() = "/192.0.2.7".parse().unwrap();
        request
    };
    // The client's IP, then a principal, a custom key and a tenant whose text
    // is that IP: each its own bucket.
    assert_eq!(status(&by_default, to_the_ip()).await, StatusCode::OK);
    assert_eq!(
        status(&by_default, with_principal(to_the_ip(), "192.0.2.7")).await,
        StatusCode::OK
    );
    assert_eq!(status(&by_custom, to_the_ip()).await, StatusCode::OK);
    assert_eq!(
        status(&by_tenant, with_tenant(to_the_ip(), "192.0.2.7")).await,
        StatusCode::OK
    );
    // And each of them is spent now: the same keys again are refused.
    assert_eq!(
        status(&by_default, to_the_ip()).await,
        StatusCode::TOO_MANY_REQUESTS
    );
    assert_eq!(
        status(&by_default, with_principal(to_the_ip(), "192.0.2.7")).await,
        StatusCode::TOO_MANY_REQUESTS
    );
    assert_eq!(
        status(&by_custom, to_the_ip()).await,
        StatusCode::TOO_MANY_REQUESTS
    );
    assert_eq!(
        status(&by_tenant, with_tenant(to_the_ip(), "192.0.2.7")).await,
        StatusCode::TOO_MANY_REQUESTS
    );
}

#[tokio::test]
async fn denial_increments_the_counter_exactly_once_per_denied_request() {
    let clock = ManualClock::new(0);
    let recorder = DebuggingRecorder::new();
    let snapshotter = recorder.snapshotter();
    let layer = limits(&clock)
        .route("orders")
        .budget(budget(60, 1))
        .unwrap()
        .key(KeySelector::Tenant);
    let mut service = Backend::default().wrapped(&layer);
    let mut statuses = Vec::new();
    for _ in 0..11 {
        let ready = service.ready().await.unwrap();
        // The decision, and the counter, happen in `call`.
        let future =
            metrics::with_local_recorder(&recorder, || ready.call(with_tenant(from(PEER), "acme")));
        statuses.push(future.await.unwrap().status());
    }
    assert_eq!(
        statuses
            .iter()
            .filter(|status| **status == StatusCode::OK)
            .count(),
        1
    );
    let counters: Vec<_> = snapshotter
        .snapshot()
        .into_vec()
        .into_iter()
        .map(|(key, _, _, value)| {
            let key = key.key();
            let mut labels: Vec<(String, String)> = key
                .labels()
                .map(|label| (label.key().to_owned(), label.value().to_owned()))
                .collect();
            labels.sort();
            (key.name().to_owned(), labels, value)
        })
        .collect();
    let expected_labels = vec![
        ("key_kind".to_owned(), "tenant".to_owned()),
        ("plugin".to_owned(), "tollgate".to_owned()),
        ("route".to_owned(), "orders".to_owned()),
    ];
    assert_eq!(
        counters,
        vec![(
            // The name as recorded; Prometheus shows it with `_` for `.`.
            "api.rate_limit.exceeded_total".to_owned(),
            expected_labels,
            DebugValue::Counter(10)
        )]
    );
}

#[tokio::test]
async fn allowed_requests_never_touch_the_counter() {
    let clock = ManualClock::new(0);
    let recorder = DebuggingRecorder::new();
    let snapshotter = recorder.snapshotter();
    let mut service = Backend::default().wrapped(
        &limits(&clock)
            .route("orders")
            .budget(budget(60, 5))
            .unwrap(),
    );
    for _ in 0..5 {
        let ready = service.ready().await.unwrap();
        let future = metrics::with_local_recorder(&recorder, || ready.call(from(PEER)));
        assert_eq!(future.await.unwrap().status(), StatusCode::OK);
    }
    assert!(snapshotter.snapshot().into_vec().is_empty());
}

#[tokio::test]
async fn route_override_beats_host_default() {
    let clock = ManualClock::new(0);
    let host = HostDefaults {
        tenant: Some(budget(100, 100)),
        ip: Some(budget(100, 100)),
    };
    let limits = HostLimits::builder()
        .clock(clock.clone())
        .host_defaults(host)
        .build()
        .unwrap();
    let layer = limits
        .route("orders")
        .budget(budget(10, 10))
        .unwrap()
        .key(KeySelector::Tenant);
    let service = Backend::default().wrapped(&layer);
    // The route's 10 applies, not the host's 100.
    for _ in 0..10 {
        let response = send(&service, with_tenant(from(PEER), "acme")).await;
        assert_eq!(response.status(), StatusCode::OK);
        assert_eq!(
            header(&response, "ratelimit-policy"),
            Some("\"orders\";q=10;w=60")
        );
    }
    assert_eq!(
        status(&service, with_tenant(from(PEER), "acme")).await,
        StatusCode::TOO_MANY_REQUESTS
    );
}

#[tokio::test]
async fn host_defaults_limit_per_tenant_else_per_ip() {
    let clock = ManualClock::new(0);
    let host = HostDefaults::from_json(
        r#"{"tenant": {"rpm": 60, "burst": 2}, "ip": {"rpm": 60, "burst": 1}}"#,
    )
    .unwrap();
    let limits = HostLimits::builder()
        .clock(clock.clone())
        .host_defaults(host)
        .build()
        .unwrap();
    let service = Backend::default().wrapped(&limits.route("search"));
    assert_eq!(
        status(&service, with_tenant(from(PEER), "acme")).await,
        StatusCode::OK
    );
    assert_eq!(
        status(&service, with_tenant(from(PEER), "acme")).await,
        StatusCode::OK
    );
    assert_eq!(
        status(&service, with_tenant(from(PEER), "acme")).await,
        StatusCode::TOO_MANY_REQUESTS
    );
    // Without a tenant, the IP default: 1.
    assert_eq!(status(&service, from(PEER)).await, StatusCode::OK);
    assert_eq!(
        status(&service, from(PEER)).await,
        StatusCode::TOO_MANY_REQUESTS
    );
    // Another route has buckets of its own.
    let other = Backend::default().wrapped(&limits.route("other"));
    assert_eq!(status(&other, from(PEER)).await, StatusCode::OK);
}

#[tokio::test]
async fn no_op_when_neither_route_nor_host_declares() {
    let clock = ManualClock::new(0);
    let backend = Backend::default();
    let service = backend.wrapped(&limits(&clock).route("free"));
    for _ in 0..1000 {
        let response = send(&service, from(PEER)).await;
        assert_eq!(response.status(), StatusCode::OK);
        assert!(response.headers().get("ratelimit").is_none());
        assert!(response.headers().get("ratelimit-policy").is_none());
    }
    // Not even a peer address is needed: nothing is looked at.
    assert_eq!(
        status(&service, http::Request::new(())).await,
        StatusCode::OK
    );
    assert_eq!(backend.calls(), 1001);
}

#[tokio::test]
async fn a_declared_selector_that_finds_nothing_answers_401() {
    let clock = ManualClock::new(0);
    let backend = Backend::default();
    let limits = limits(&clock);
    let by_tenant = backend.wrapped(
        &limits
            .route("orders")
            .budget(budget(60, 5))
            .unwrap()
            .key(KeySelector::Tenant),
    );
    let response = send(&by_tenant, from(PEER)).await;
    assert_eq!(response.status(), StatusCode::UNAUTHORIZED);
    assert_eq!(header(&response, "www-authenticate"), Some("Bearer"));
    assert_eq!(
        header(&response, "content-type"),
        Some("application/problem+json")
    );
    let problem = json(response).await;
    assert_eq!(
        problem["detail"],
        "orders is rate limited per tenant, and the request has none"
    );
    // An empty tenant is no tenant.
    assert_eq!(
        status(&by_tenant, with_tenant(from(PEER), "")).await,
        StatusCode::UNAUTHORIZED
    );
    let by_principal = backend.wrapped(
        &limits
            .route("me")
            .budget(budget(60, 5))
            .unwrap()
            .key(KeySelector::Principal),
    );
    let problem = json(send(&by_principal, from(PEER)).await).await;
    assert_eq!(problem["status"], 401);
    assert_eq!(
        problem["detail"],
        "me is rate limited per principal, and the request has none"
    );
    let custom = KeySelector::custom(|request| {
        request
            .headers
            .get("x-client")?
            .to_str()
            .ok()
            .map(str::to_owned)
    });
    let by_header = backend.wrapped(&limits.route("c").budget(budget(60, 5)).unwrap().key(custom));
    let problem = json(send(&by_header, from(PEER)).await).await;
    assert_eq!(problem["status"], 401);
    assert_eq!(
        problem["detail"],
        "c is rate limited per custom key, and the request has none"
    );
    assert_eq!(
        status(&by_header, with_header(from(PEER), "x-client", "")).await,
        StatusCode::UNAUTHORIZED
    );
    assert_eq!(
        status(&by_header, with_header(from(PEER), "x-client", "c1")).await,
        StatusCode::OK
    );
    // Without a peer address the server is set up wrongly: 500, not a shared bucket.
    let by_ip = backend.wrapped(
        &limits
            .route("ip")
            .budget(budget(60, 5))
            .unwrap()
            .key(KeySelector::Ip),
    );
    assert_eq!(
        status(&by_ip, http::Request::new(())).await,
        StatusCode::INTERNAL_SERVER_ERROR
    );
    assert_eq!(
        backend.calls(),
        1,
        "only the request with a key reached the service"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn sixty_four_concurrent_requests_on_a_burst_of_5_give_exactly_5_passes() {
    let clock = ManualClock::new(0);
    let backend = Backend::default();
    let service = backend.wrapped(
        &limits(&clock)
            .route("hot")
            .budget(budget(60, 5))
            .unwrap()
            .key(KeySelector::Tenant),
    );
    let barrier = Arc::new(tokio::sync::Barrier::new(64));
    let tasks: Vec<_> = (0..64)
        .map(|_| {
            let service = service.clone();
            let barrier = Arc::clone(&barrier);
            tokio::spawn(async move {
                barrier.wait().await;
                status(&service, with_tenant(from(PEER), "acme")).await
            })
        })
        .collect();
    let mut passed = 0;
    for task in tasks {
        if task.await.unwrap() == StatusCode::OK {
            passed += 1;
        }
    }
    assert_eq!(passed, 5);
    assert_eq!(backend.calls(), 5);
}
