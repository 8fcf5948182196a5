//! The tower layer's share of issue #26: a route's `cost` charged to the
//! budget it is held to, and known principals ([`KnownKeys`]): an unknown
//! one refused before any budget is used, or anonymous (keyed per client
//! IP); and the concurrency-limit layer. On a manual clock; expected values
//! by hand.

mod support;

use std::sync::Arc;

use http::StatusCode;
use support::{Backend, from, header, send, status, with_principal};
use tollgate_core::ManualClock;
use tollgate_tower::{Budget, CostError, HostDefaults, HostLimits, KnownKeys, UnknownKeys};

#[tokio::test]
async fn a_cost_is_charged_to_the_budget_and_refusals_use_nothing() {
    let clock = ManualClock::new(0);
    let host = HostLimits::builder().clock(clock.clone()).build().unwrap();
    let layer = host
        .route("tw_heavy")
        .budget(Budget::new(60, 4).unwrap())
        .unwrap()
        .cost(2)
        .unwrap();
    let backend = Backend::default();
    let service = backend.wrapped(&layer);
    let request = || with_principal(from("192.0.2.7:5000"), "p_heavy");
    let first = send(&service, request()).await;
    assert_eq!(header(&first, "ratelimit"), Some("\"tw_heavy\";r=2;t=2"));
    let second = send(&service, request()).await;
    assert_eq!(header(&second, "ratelimit"), Some("\"tw_heavy\";r=0;t=4"));
    let refused = send(&service, request()).await;
    assert_eq!(refused.status(), StatusCode::TOO_MANY_REQUESTS);
    // Core's rule for a request of several units (`Limiter::acquire_units`):
    // the wait until one more unit is allowed, 1 s at one token a second;
    // the two this request costs take 2 s.
    assert_eq!(header(&refused, "retry-after"), Some("1"));
    clock.advance_by("1s").unwrap();
    assert_eq!(
        status(&service, request()).await,
        StatusCode::TOO_MANY_REQUESTS
    );
    clock.advance_by("1s").unwrap();
    assert_eq!(status(&service, request()).await, StatusCode::OK);
    assert_eq!(backend.calls(), 3);
}

#[test]
fn a_cost_no_request_could_pay_is_refused() {
    let host = HostLimits::builder()
        .host_defaults(HostDefaults {
            tenant: None,
            ip: Some(Budget::new(60, 3).unwrap()),
        })
        .build()
        .unwrap();
    assert_eq!(
        host.route("tw_c").cost(4).unwrap_err(),
        CostError {
            units: 4,
            burst: Some(3)
        }
    );
    assert_eq!(
        host.route("tw_c").cost(0).unwrap_err().to_string(),
        "a cost must be 1 to 2^32 units, got 0"
    );
    assert!(host.route("tw_c").cost((1 << 32) + 1).is_err());
    assert!(host.route("tw_c").cost(3).is_ok());
    let own = host
        .route("tw_c")
        .budget(Budget::new(60, 10).unwrap())
        .unwrap();
    assert!(
        own.cost(10).is_ok(),
        "the route's own budget replaces the host's"
    );
}

/// A host whose principals are `p_known`, others getting `unknown`, with a
/// route whose own budget (2 at once) is keyed by principal, else IP.
fn known_host(clock: &ManualClock, unknown: UnknownKeys) -> tollgate_tower::RouteLimitLayer {
    let known = Arc::new(KnownKeys::parse(b"p_known\n").unwrap());
    HostLimits::builder()
        .clock(clock.clone())
        .known_keys(known, unknown)
        .build()
        .unwrap()
        .route("tw_known")
        .budget(Budget::new(60, 2).unwrap())
        .unwrap()
}

#[tokio::test]
async fn unknown_principals_are_refused_or_share_their_client_ip_s_budget() {
    let clock = ManualClock::new(0);
    let backend = Backend::default();
    let refusing = backend.wrapped(&known_host(&clock, UnknownKeys::Refuse));
    let peer = "192.0.2.9:5000";
    assert_eq!(
        status(&refusing, with_principal(from(peer), "p_known")).await,
        StatusCode::OK
    );
    let refused = send(&refusing, with_principal(from(peer), "p_invented")).await;
    assert_eq!(refused.status(), StatusCode::UNAUTHORIZED);
    assert!(header(&refused, "ratelimit").is_none());
    // No principal at all: keyed per IP, as always.
    assert_eq!(status(&refusing, from(peer)).await, StatusCode::OK);
    assert_eq!(backend.calls(), 2);

    let anonymous = backend.wrapped(&known_host(&clock, UnknownKeys::Anonymous));
    let other_peer = "192.0.2.10:5000";
    for (principal, expected) in [
        ("p_invented_1", StatusCode::OK),
        ("p_invented_2", StatusCode::OK),
        ("p_invented_3", StatusCode::TOO_MANY_REQUESTS),
    ] {
        let response = send(&anonymous, with_principal(from(other_peer), principal)).await;
        assert_eq!(response.status(), expected, "{principal}");
    }
    // The known principal has a budget of its own.
    assert_eq!(
        status(&anonymous, with_principal(from(other_peer), "p_known")).await,
        StatusCode::OK
    );
}

#[tokio::test]
async fn an_anonymous_principal_is_held_to_the_own_budget_per_client_ip() {
    // The route's budget is keyed by principal: an invented principal must
    // not find it unlimited, nor a fresh budget of its own.
    let clock = ManualClock::new(0);
    let known = Arc::new(KnownKeys::parse(b"p_known\n").unwrap());
    let layer = HostLimits::builder()
        .clock(clock.clone())
        .known_keys(known, UnknownKeys::Anonymous)
        .build()
        .unwrap()
        .route("tw_principal")
        .budget(Budget::new(60, 2).unwrap())
        .unwrap()
        .key(tollgate_tower::KeySelector::Principal);
    let backend = Backend::default();
    let service = backend.wrapped(&layer);
    let peer = "192.0.2.11:5000";
    for (principal, expected) in [
        ("p_invented_1", StatusCode::OK),
        ("p_invented_2", StatusCode::OK),
        ("p_invented_3", StatusCode::TOO_MANY_REQUESTS),
    ] {
        let response = send(&service, with_principal(from(peer), principal)).await;
        assert_eq!(response.status(), expected, "{principal}");
    }
    assert_eq!(
        status(&service, with_principal(from(peer), "p_known")).await,
        StatusCode::OK
    );
    assert_eq!(backend.calls(), 3);
}

#[tokio::test]
async fn an_in_flight_layer_holds_a_slot_until_the_response_body_is_dropped() {
    use tower::ServiceExt;
    let host = HostLimits::new();
    let layer = host
        .in_flight("tw_in_flight", 1)
        .key(tollgate_tower::KeySelector::Principal);
    let backend = Backend::default();
    let service = tower::Layer::layer(&layer, backend.service());
    let request = |principal: &str| with_principal(from("192.0.2.12:5000"), principal);
    let first = service.clone().oneshot(request("p_a")).await.unwrap();
    assert_eq!(first.status(), StatusCode::OK);
    assert_eq!(host.slots_held(), 1);
    let refused = service.clone().oneshot(request("p_a")).await.unwrap();
    assert_eq!(refused.status(), StatusCode::TOO_MANY_REQUESTS);
    assert_eq!(
        refused
            .headers()
            .get("retry-after")
            .map(|value| value.to_str().unwrap()),
        Some("1")
    );
    // Another principal has a slot of its own.
    let other = service.clone().oneshot(request("p_b")).await.unwrap();
    assert_eq!(other.status(), StatusCode::OK);
    drop(other);
    drop(first);
    assert_eq!(host.slots_held(), 0);
    let again = service.clone().oneshot(request("p_a")).await.unwrap();
    assert_eq!(again.status(), StatusCode::OK);
    drop(again);
    assert_eq!(host.slots_held(), 0);
    assert_eq!(backend.calls(), 3);
}

#[tokio::test]
async fn an_in_flight_layer_counts_unknown_principals_per_client_ip() {
    use tower::ServiceExt;
    let known = Arc::new(KnownKeys::parse(b"p_known\n").unwrap());
    let host = HostLimits::builder()
        .known_keys(known, UnknownKeys::Anonymous)
        .build()
        .unwrap();
    let layer = host
        .in_flight("tw_in_flight_anonymous", 1)
        .key(tollgate_tower::KeySelector::Principal);
    let service = tower::Layer::layer(&layer, Backend::default().service());
    let request = |principal: &str| with_principal(from("192.0.2.13:5000"), principal);
    let first = service
        .clone()
        .oneshot(request("p_invented_1"))
        .await
        .unwrap();
    assert_eq!(first.status(), StatusCode::OK);
    // A second invented principal from the same address: the same slot.
    let second = service
        .clone()
        .oneshot(request("p_invented_2"))
        .await
        .unwrap();
    assert_eq!(second.status(), StatusCode::TOO_MANY_REQUESTS);
    let known = service.clone().oneshot(request("p_known")).await.unwrap();
    assert_eq!(known.status(), StatusCode::OK);
    drop((first, known));
    assert_eq!(host.slots_held(), 0);
}
