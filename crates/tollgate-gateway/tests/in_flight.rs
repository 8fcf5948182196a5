//! A route's concurrency limit (`max_in_flight`, issue #26), in memory: a
//! slot held from admission until the response ends, refused requests over
//! it (429, `Retry-After: 1`), all or nothing with the rates, a client gone
//! mid-body giving its slot back, and no slot left held at the end of any
//! test. A real upstream (its `/slow` requests held until released) and
//! HTTP client, the gateway in process on a manual clock.

use std::time::Duration;

use tollgate_test_support::gateway::{Gateway, config, header};
use tollgate_test_support::loopback::Upstream;

/// A gateway whose route `name` (every path) has `settings`.
async fn gateway(upstream: &Upstream, name: &str, settings: &str) -> Gateway {
    Gateway::start(
        &config(&format!(
            "[limits.default_policy]\nalgorithm = \"fixed_window\"\nlimit = 1000\nwindow_s = 60\n\
             [[routes]]\nname = \"{name}\"\nprefix = \"/\"\nupstream = \"http://{}\"\n{settings}",
            upstream.address
        )),
        0,
    )
    .await
}

/// Waits (at most 5 s) until `gateway` holds `slots` slots: a slot is given
/// back when hyper drops the response, just after the client has it.
async fn until_held(gateway: &Gateway, slots: u64) {
    for _ in 0..500 {
        if gateway.running.slots_held() == slots {
            return;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    panic!("{} slots held, not {slots}", gateway.running.slots_held());
}

/// Waits until `upstream` has received `requests` requests.
async fn until_received(upstream: &Upstream, requests: usize) {
    for _ in 0..500 {
        if upstream.requests() >= requests {
            return;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    panic!("the upstream received {} requests", upstream.requests());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_key_holds_at_most_max_in_flight_until_its_responses_end() {
    let upstream = Upstream::start().await;
    let gateway = gateway(&upstream, "if_max", "max_in_flight = 2\n").await;
    let slow = |key: &'static str| {
        let request = gateway
            .client
            .get(gateway.url("/slow"))
            .header("authorization", format!("Bearer {key}"))
            .send();
        tokio::spawn(request)
    };
    let first = slow("sk_a");
    let second = slow("sk_a");
    until_received(&upstream, 2).await;
    assert_eq!(gateway.running.slots_held(), 2);
    let refused = gateway.get("/x", "sk_a").await;
    assert_eq!(refused.status(), 429);
    assert_eq!(header(&refused, "retry-after").as_deref(), Some("1"));
    let problem: serde_json::Value = refused.json().await.unwrap();
    assert_eq!(
        problem["detail"],
        "the concurrency limit of if_max is reached: at most 2 requests in flight at once; \
         retry in 1 s"
    );
    // Another key has slots of its own.
    assert_eq!(gateway.status("/x", "sk_b").await, 200);
    upstream.release.notify_waiters();
    for request in [first, second] {
        let response = request.await.unwrap().unwrap();
        assert_eq!(response.text().await.unwrap(), "finally");
    }
    until_held(&gateway, 0).await;
    assert_eq!(gateway.status("/x", "sk_a").await, 200);
    until_held(&gateway, 0).await;
    let refusals = gateway
        .route_sample("tollgate_in_flight_refusals_total", &[("route", "if_max")])
        .await;
    assert_eq!(refusals, Some(1.0));
    // sk_a's two held requests and sk_b's one.
    assert_eq!(upstream.most_in_flight(), 3);
    gateway.until_nothing_held().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn slots_and_rates_are_all_or_nothing() {
    // One in flight; a budget of 2 at once (60 a minute).
    let upstream = Upstream::start().await;
    let gateway = gateway(
        &upstream,
        "if_rates",
        "max_in_flight = 1\nrpm = 60\nburst = 2\n",
    )
    .await;
    let held = {
        let request = gateway
            .client
            .get(gateway.url("/slow"))
            .header("authorization", "Bearer sk_a")
            .send();
        tokio::spawn(request)
    };
    until_received(&upstream, 1).await;
    // Refused for its slot: uses none of the budget's 1 token left.
    assert_eq!(gateway.status("/x", "sk_a").await, 429);
    upstream.release.notify_waiters();
    assert_eq!(held.await.unwrap().unwrap().status(), 200);
    until_held(&gateway, 0).await;
    let second = gateway.get("/x", "sk_a").await;
    assert_eq!(second.status(), 200);
    assert_eq!(
        header(&second, "ratelimit").as_deref(),
        Some("\"default\";r=998;t=60, \"if_rates\";r=0;t=2")
    );
    until_held(&gateway, 0).await;
    // Refused by the budget: takes no slot (none is held after).
    let refused = gateway.get("/x", "sk_a").await;
    assert_eq!(refused.status(), 429);
    assert_eq!(header(&refused, "retry-after").as_deref(), Some("1"));
    assert_eq!(gateway.running.slots_held(), 0);
    assert_eq!(upstream.requests(), 2);
    gateway.until_nothing_held().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_client_gone_mid_body_gives_its_slot_back() {
    let upstream = Upstream::start().await;
    let gateway = gateway(&upstream, "if_gone", "max_in_flight = 1\n").await;
    // `/stall` sends its headers and a first part, then nothing.
    let stalled = gateway.get("/stall", "sk_a").await;
    assert_eq!(stalled.status(), 200);
    assert_eq!(gateway.running.slots_held(), 1);
    assert_eq!(gateway.status("/x", "sk_a").await, 429);
    drop(stalled);
    until_held(&gateway, 0).await;
    assert_eq!(gateway.status("/x", "sk_a").await, 200);
    gateway.until_nothing_held().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn keyless_and_per_ip_requests_count_per_client_ip() {
    let upstream = Upstream::start().await;
    let gateway = gateway(
        &upstream,
        "if_ip",
        "api_key = \"none\"\nrpm = 6000\nmax_in_flight = 1\nin_flight_key = \"api_key\"\n",
    )
    .await;
    let held = tokio::spawn(gateway.client.get(gateway.url("/slow")).send());
    until_received(&upstream, 1).await;
    // No key is read: the requests in flight are counted per client IP.
    let refused = gateway.client.get(gateway.url("/x")).send().await.unwrap();
    assert_eq!(refused.status(), 429);
    upstream.release.notify_waiters();
    assert_eq!(held.await.unwrap().unwrap().status(), 200);
    gateway.until_nothing_held().await;
}

#[test]
fn bad_concurrency_settings_are_refused_at_load() {
    let refused = |route: &str, rest: &str| {
        tollgate_gateway::ServeConfig::from_toml_str(&format!(
            "{rest}\n[[routes]]\nname = \"r\"\nprefix = \"/r\"\nupstream = \"http://h:1\"\n{route}"
        ))
        .unwrap_err()
        .to_string()
    };
    assert_eq!(
        refused("max_in_flight = 0", ""),
        "route r (/r): max_in_flight must be 1 to 4294967296 (2^32), the requests of one key in \
         flight at once"
    );
    assert_eq!(
        refused("in_flight_key = \"ip\"", ""),
        "route r (/r): in_flight_key applies to max_in_flight: set it too"
    );
    assert!(
        refused("max_in_flight = 1\nin_flight_key = \"principal\"", "")
            .contains("in_flight_key must be \"api_key\", \"ip\", \"tenant\" or \"header:NAME\"")
    );
    assert!(
        refused("max_in_flight = 1\nin_flight_key = \"cookie\"", "")
            .contains("in_flight_key must be \"api_key\"")
    );
    assert!(
        refused("", "[store]\nlease_ttl = \"500ms\"")
            .contains("store.lease_ttl must be at least 1s")
    );
}
