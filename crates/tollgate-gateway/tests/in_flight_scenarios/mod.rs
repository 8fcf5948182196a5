//! Concurrency limits (a route's `max_in_flight`, issue #26), the same
//! scenarios in memory (`in_flight.rs`), on Redis and on a Redis Cluster
//! (`redis_in_flight.rs`): a slot held from admission until the response
//! ends (its last byte, the client gone, an upstream error or timeout, a
//! body cut off), refused requests over it, all or nothing with the rates.
//! Real clients and a real upstream on loopback (its `/slow` requests held
//! until released); only orders and counts are asserted, never durations.
//! Every scenario ends with nothing held.

use tollgate_test_support::gateway::{Gateway, config, header};
use tollgate_test_support::loopback::Upstream;
use tollgate_test_support::wait::until;

/// A route `name_suffix` on `/suffix` (stripped) to `upstream`, then
/// `settings`.
fn route(name: &str, suffix: &str, upstream: &str, settings: &str) -> String {
    format!(
        "[[routes]]\nname = \"{name}_{suffix}\"\nprefix = \"/{suffix}\"\nupstream = \"http://{upstream}\"\n\
         strip_prefix = true\n{settings}\n"
    )
}

/// The routes of the scenarios that hold requests (`/slow`) as long as the
/// test needs, named `name_*`, then `rest` (a `[store]`); each scenario
/// uses keys of its own.
pub(crate) fn routes(upstream: &Upstream, name: &str, rest: &str) -> String {
    let upstream = upstream.address.to_string();
    config(&format!(
        "[limits.default_policy]\nalgorithm = \"fixed_window\"\nlimit = 1000\nwindow_s = 60\n\
         {}{}{}{}{}{rest}",
        route(name, "max", &upstream, "max_in_flight = 2"),
        route(
            name,
            "rates",
            &upstream,
            "max_in_flight = 1\nrpm = 60\nburst = 2"
        ),
        route(name, "gone", &upstream, "max_in_flight = 1"),
        route(
            name,
            "ip",
            &upstream,
            "api_key = \"none\"\nrpm = 6000\nmax_in_flight = 1\nin_flight_key = \"api_key\""
        ),
        route(
            name,
            "status",
            &upstream,
            "max_in_flight = 1\nrefused_status = 503"
        ),
    ))
}

/// The routes of the scenarios where the response ends badly, named
/// `name_*`, then `rest`: the upstream answers no later than 1 s
/// (`[upstream] timeout`) and pauses no longer within a body
/// (`body_idle_timeout`); `/down` goes to a port where nothing listens.
pub(crate) fn ending_routes(upstream: &Upstream, name: &str, rest: &str) -> String {
    let up = upstream.address.to_string();
    let down = format!("127.0.0.1:{}", tollgate_test_support::loopback::free_port());
    config(&format!(
        "[upstream]\ntimeout = \"1s\"\nbody_idle_timeout = \"1s\"\n\
         {}{}{rest}",
        route(name, "ends", &up, "max_in_flight = 1"),
        route(name, "down", &down, "max_in_flight = 1"),
    ))
}

/// A request for `path` with API key `key`, sent in a task of its own.
fn spawn_get(
    gateway: &Gateway,
    path: &str,
    key: &str,
) -> tokio::task::JoinHandle<reqwest::Result<reqwest::Response>> {
    let request = gateway
        .client
        .get(gateway.url(path))
        .header("authorization", format!("Bearer {key}"))
        .send();
    tokio::spawn(request)
}

/// Waits until `gateway` holds `slots` slots: a slot is given back when
/// hyper drops the response, just after the client has it (on Redis, once
/// Redis has answered the release).
async fn until_held(gateway: &Gateway, slots: u64) {
    until(&format!("{slots} slots held"), || {
        gateway.running.slots_held() == slots
    })
    .await;
}

/// Waits until `upstream` has received `requests` requests in all.
async fn until_received(upstream: &Upstream, requests: usize) {
    until(&format!("{requests} requests received"), || {
        upstream.requests() >= requests
    })
    .await;
}

/// Two of a key's requests held at the upstream: a third is refused (429,
/// `Retry-After: 1`, problem+json naming the limit), another key has slots
/// of its own, and once the two end the key passes again. Run first on a
/// fresh upstream: it records the most requests it had in flight.
///
/// On Redis (`leases`: its URL and the store's prefix), the two slots are
/// two leases of one key in Redis while they are held.
pub(crate) async fn a_key_holds_at_most_max_in_flight(
    gateway: &Gateway,
    upstream: &Upstream,
    name: &str,
    leases: Option<(&str, &str)>,
) {
    let before = upstream.requests();
    let first = spawn_get(gateway, "/max/slow", "sk_max_a");
    let second = spawn_get(gateway, "/max/slow", "sk_max_a");
    until_received(upstream, before + 2).await;
    assert_eq!(gateway.running.slots_held(), 2);
    if let Some((url, prefix)) = leases {
        let keys: Vec<String> = tollgate_test_support::redis::state_keys_and_ttls(url, prefix)
            .into_iter()
            .map(|(key, _)| key)
            .filter(|key| key.ends_with(":f"))
            .collect();
        assert_eq!(keys.len(), 1, "{keys:?}");
        let members: u64 = redis::cmd("ZCARD")
            .arg(&keys[0])
            .query(&mut redis::Client::open(url).unwrap().get_connection().unwrap())
            .unwrap();
        assert_eq!(members, 2);
    }
    let refused = gateway.get("/max/x", "sk_max_a").await;
    assert_eq!(refused.status(), 429);
    assert_eq!(header(&refused, "retry-after").as_deref(), Some("1"));
    let problem: serde_json::Value = refused.json().await.unwrap();
    assert_eq!(
        problem["detail"],
        format!(
            "the concurrency limit of {name}_max is reached: at most 2 requests in flight at \
             once; retry in 1 s"
        )
    );
    // Another key has slots of its own.
    assert_eq!(gateway.status("/max/x", "sk_max_b").await, 200);
    upstream.release.notify_waiters();
    for request in [first, second] {
        let response = request.await.unwrap().unwrap();
        assert_eq!(response.text().await.unwrap(), "finally");
    }
    until_held(gateway, 0).await;
    assert_eq!(gateway.status("/max/x", "sk_max_a").await, 200);
    let refusals = gateway
        .route_sample(
            "tollgate_in_flight_refusals_total",
            &[("route", &format!("{name}_max"))],
        )
        .await;
    assert_eq!(refusals, Some(1.0));
    // sk_max_a's two held requests and sk_max_b's one.
    assert_eq!(upstream.most_in_flight(), 3);
    gateway.until_nothing_held().await;
}

/// One in flight, a budget of 2 at once (60 a minute): a request refused
/// for its slot uses none of the budget, and one refused by the budget
/// takes no slot.
pub(crate) async fn slots_and_rates_are_all_or_nothing(
    gateway: &Gateway,
    upstream: &Upstream,
    name: &str,
) {
    let before = upstream.requests();
    let held = spawn_get(gateway, "/rates/slow", "sk_rates");
    until_received(upstream, before + 1).await;
    // Refused for its slot: uses none of the budget's 1 token left.
    assert_eq!(gateway.status("/rates/x", "sk_rates").await, 429);
    upstream.release.notify_waiters();
    assert_eq!(held.await.unwrap().unwrap().status(), 200);
    until_held(gateway, 0).await;
    let second = gateway.get("/rates/x", "sk_rates").await;
    assert_eq!(second.status(), 200);
    assert_eq!(
        header(&second, "ratelimit"),
        Some(format!("\"default\";r=998;t=60, \"{name}_rates\";r=0;t=2"))
    );
    until_held(gateway, 0).await;
    // Refused by the budget: keeps no slot (the slot is taken first and
    // given back at once; on Redis in a call of its own).
    let refused = gateway.get("/rates/x", "sk_rates").await;
    assert_eq!(refused.status(), 429);
    assert_eq!(header(&refused, "retry-after").as_deref(), Some("1"));
    until_held(gateway, 0).await;
    assert_eq!(upstream.requests() - before, 2);
    gateway.until_nothing_held().await;
}

/// A client that goes away in the middle of a body (`/stall` sends its
/// headers and a first part, then nothing) gives its slot back.
pub(crate) async fn a_client_gone_mid_body_gives_its_slot_back(gateway: &Gateway) {
    let stalled = gateway.get("/gone/stall", "sk_gone").await;
    assert_eq!(stalled.status(), 200);
    assert_eq!(gateway.running.slots_held(), 1);
    assert_eq!(gateway.status("/gone/x", "sk_gone").await, 429);
    drop(stalled);
    until_held(gateway, 0).await;
    assert_eq!(gateway.status("/gone/x", "sk_gone").await, 200);
    gateway.until_nothing_held().await;
}

/// On a route that reads no key, the requests in flight are counted per
/// client IP.
pub(crate) async fn keyless_requests_count_per_client_ip(gateway: &Gateway, upstream: &Upstream) {
    let before = upstream.requests();
    let held = tokio::spawn(gateway.client.get(gateway.url("/ip/slow")).send());
    until_received(upstream, before + 1).await;
    let refused = gateway.client.get(gateway.url("/ip/x")).send().await;
    assert_eq!(refused.unwrap().status(), 429);
    upstream.release.notify_waiters();
    assert_eq!(held.await.unwrap().unwrap().status(), 200);
    gateway.until_nothing_held().await;
}

/// A route's `refused_status` is the status of its concurrency refusals
/// too, with the same `Retry-After` and problem details.
pub(crate) async fn a_concurrency_refusal_has_the_route_s_status(
    gateway: &Gateway,
    upstream: &Upstream,
    name: &str,
) {
    let before = upstream.requests();
    let held = spawn_get(gateway, "/status/slow", "sk_status");
    until_received(upstream, before + 1).await;
    let refused = gateway.get("/status/x", "sk_status").await;
    assert_eq!(refused.status(), 503);
    assert_eq!(header(&refused, "retry-after").as_deref(), Some("1"));
    let problem: serde_json::Value = refused.json().await.unwrap();
    assert_eq!(problem["status"], 503);
    assert_eq!(
        problem["detail"],
        format!(
            "the concurrency limit of {name}_status is reached: at most 1 request in flight at \
             once; retry in 1 s"
        )
    );
    upstream.release.notify_waiters();
    assert_eq!(held.await.unwrap().unwrap().status(), 200);
    gateway.until_nothing_held().await;
}

/// A slot is given back when the response ends badly: the upstream does
/// not answer in time (504), cannot be reached (502), or pauses too long
/// in the middle of a body (cut off). After each, the key's next request
/// gets the slot.
pub(crate) async fn a_response_that_ends_badly_gives_its_slot_back(
    gateway: &Gateway,
    upstream: &Upstream,
) {
    let before = upstream.requests();
    // `/slow` is never released: no answer within the timeout.
    let timed_out = gateway.get("/ends/slow", "sk_ends").await;
    assert_eq!(timed_out.status(), 504);
    until_held(gateway, 0).await;
    // Nothing listens: no connection.
    assert_eq!(gateway.status("/down/x", "sk_ends").await, 502);
    until_held(gateway, 0).await;
    assert_eq!(gateway.status("/down/x", "sk_ends").await, 502);
    // A body that stops: the slot is held until the gateway cuts it off.
    let stalled = gateway.get("/ends/stall", "sk_ends").await;
    assert_eq!(stalled.status(), 200);
    assert!(stalled.text().await.is_err(), "the body is cut off");
    until_held(gateway, 0).await;
    let passed = gateway.get("/ends/x", "sk_ends").await;
    assert_eq!(passed.status(), 200);
    assert_eq!(passed.text().await.unwrap(), "upstream");
    // /ends/slow, /ends/stall and /ends/x (/down reaches no upstream).
    assert_eq!(upstream.requests() - before, 3);
    gateway.until_nothing_held().await;
}
