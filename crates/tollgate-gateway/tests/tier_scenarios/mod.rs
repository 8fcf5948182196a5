//! A plan's settings besides its policies (`[limits.tier_defaults.NAME]`)
//! and `[host] max_in_flight` (issue #26), the same scenarios in memory
//! (`tier_defaults.rs`), on Redis and on a Redis Cluster
//! (`redis_tier_defaults.rs`): a tier's `delay` on a route without one of
//! its own, and a tier's and the host's concurrency limits (all or nothing
//! with the rates: a request refused for its slot gives its units back).
//! Real clients and a real upstream; the gateway's limits on its manual
//! clock, which stands still while waits run on the wall clock (only
//! orders and counts are asserted, never durations).

use std::time::Duration;

use reqwest::Method;
use serde_json::json;
use tollgate_test_support::gateway::{Gateway, config, header};
use tollgate_test_support::loopback::Upstream;
use tollgate_test_support::wait::until;

/// `count` requests with `key` to `path` at once: their statuses and
/// `Retry-After`s, in the order they were answered.
async fn at_once(
    gateway: &Gateway,
    path: &str,
    key: &str,
    count: usize,
) -> Vec<(u16, Option<String>)> {
    let (sender, mut receiver) = tokio::sync::mpsc::unbounded_channel();
    for _ in 0..count {
        let request = gateway
            .client
            .get(gateway.url(path))
            .header("authorization", format!("Bearer {key}"))
            .send();
        let sender = sender.clone();
        tokio::spawn(async move {
            let response = request.await.unwrap();
            let answer = (response.status().as_u16(), header(&response, "retry-after"));
            sender.send(answer).unwrap();
        });
    }
    drop(sender);
    let mut answers = Vec::with_capacity(count);
    while let Some(answer) = receiver.recv().await {
        answers.push(answer);
    }
    answers
}

pub(crate) async fn assign(gateway: &Gateway, key: &str, tier: &str) {
    let assigned = gateway
        .admin(
            Method::POST,
            "/admin/tier",
            Some(json!({"key": key, "tier": tier})),
        )
        .await;
    assert_eq!(assigned.status(), 200);
}

/// The routes of the waiting scenario, named `name_*`, then `rest` (a
/// `[store]`): both plans 5 a second in a bucket one deep; pro waits up
/// to 2 s.
pub(crate) fn waiting(upstream: &Upstream, name: &str, rest: &str) -> String {
    let bucket = "algorithm = \"token_bucket\"\nlimit = 5\nwindow_s = 1\nburst = 1\n";
    config(&format!(
        "[limits.default_policy]\n{bucket}[limits.tiers.pro]\n{bucket}\
         [limits.tier_defaults.pro]\ndelay = \"2s\"\n\
         [[routes]]\nname = \"{name}_wait\"\nprefix = \"/\"\nupstream = \"http://{0}\"\n\
         [[routes]]\nname = \"{name}_observed\"\nprefix = \"/observed\"\n\
         upstream = \"http://{0}\"\nrpm = 6000\nshadow = true\n{rest}",
        upstream.address
    ))
}

/// A key on tier pro waits its turn up to 2 s on a route without a delay
/// of its own; a key on the default plan does not wait, nor does pro's on
/// a route in shadow mode.
pub(crate) async fn a_key_waits_up_to_its_tiers_delay(
    gateway: &Gateway,
    upstream: &Upstream,
    name: &str,
) {
    assign(gateway, "sk_pro", "pro").await;
    assign(gateway, "sk_pro_observed", "pro").await;
    // The twelve: eleven pass (at once, then every 200 ms up to
    // 2 s), the twelfth is refused at once, 200 ms past the delay.
    let answers = at_once(gateway, "/x", "sk_pro", 12).await;
    let refused: Vec<usize> = (0..answers.len())
        .filter(|at| answers[*at].0 == 429)
        .collect();
    assert_eq!(refused.len(), 1, "{answers:?}");
    assert_eq!(answers[refused[0]].1.as_deref(), Some("1"));
    assert!(refused[0] <= 1, "answered at once: {answers:?}");
    // The default plan has no delay: one passes, two are refused.
    let free = at_once(gateway, "/x", "sk_free", 3).await;
    assert_eq!(free.iter().filter(|(status, _)| *status == 200).count(), 1);
    // A route in shadow mode never waits: one of pro's passes there.
    let observed = at_once(gateway, "/observed/x", "sk_pro_observed", 3).await;
    assert_eq!(
        observed.iter().filter(|(status, _)| *status == 200).count(),
        1,
        "{observed:?}"
    );
    gateway.until_nothing_held().await;
    assert_eq!(upstream.requests(), 11 + 1 + 1);
    assert_eq!(
        gateway
            .route_sample(
                "tollgate_delayed_total",
                &[("tier", "pro"), ("route", &format!("{name}_wait"))]
            )
            .await,
        Some(10.0)
    );
}

/// The routes of the concurrency scenario, named `name_*`, then `rest`:
/// `[host] max_in_flight = 1`, tier pro's 2, tier basic without one; route
/// `name_slots` keyless-optional with a budget per IP, `name_own` with 3
/// of its own.
pub(crate) fn slots(upstream: &Upstream, name: &str, rest: &str) -> String {
    let window = "algorithm = \"fixed_window\"\nlimit = 1000\nwindow_s = 60\n";
    config(&format!(
        "[host]\nmax_in_flight = 1\n\
         [limits.default_policy]\n{window}[limits.tiers.pro]\n{window}\
         [limits.tiers.basic]\n{window}\
         [limits.tier_defaults.pro]\nmax_in_flight = 2\n\
         [[routes]]\nname = \"{name}_slots\"\nprefix = \"/\"\nupstream = \"http://{0}\"\n\
         api_key = \"optional\"\nrpm = 60000\nkey = \"ip\"\n\
         [[routes]]\nname = \"{name}_own\"\nprefix = \"/own\"\nupstream = \"http://{0}\"\n\
         strip_prefix = true\nmax_in_flight = 3\n{rest}",
        upstream.address
    ))
}

/// The route's own concurrency limit, else the key's tier's, else the
/// host's; a request refused for its slot uses none of its plan.
pub(crate) async fn tiers_and_the_host_set_the_concurrency_limit(
    gateway: &Gateway,
    upstream: &Upstream,
    name: &str,
) {
    assign(gateway, "sk_pro", "pro").await;
    assign(gateway, "sk_basic", "basic").await;
    let slow = |path: &'static str, key: Option<&'static str>| {
        let mut request = gateway.client.get(gateway.url(path));
        if let Some(key) = key {
            request = request.header("authorization", format!("Bearer {key}"));
        }
        tokio::spawn(request.send())
    };
    // pro: two at once (its tier's); basic, with none of its own tier's,
    // and a keyless request (per client IP): one each (the host's); /own:
    // the route's three, whatever the tier.
    let held = [
        slow("/slow", Some("sk_pro")),
        slow("/slow", Some("sk_pro")),
        slow("/slow", Some("sk_basic")),
        slow("/slow", None),
        slow("/own/slow", Some("sk_basic")),
        slow("/own/slow", Some("sk_basic")),
        slow("/own/slow", Some("sk_basic")),
    ];
    until("seven requests in flight", || upstream.requests() == 7).await;
    assert_eq!(gateway.running.slots_held(), 7);
    let refused = gateway.get("/x", "sk_pro").await;
    assert_eq!(refused.status(), 429);
    assert_eq!(header(&refused, "retry-after").as_deref(), Some("1"));
    let problem: serde_json::Value = refused.json().await.unwrap();
    assert_eq!(
        problem["detail"],
        format!(
            "the concurrency limit of {name}_slots is reached: at most 2 requests in flight at \
             once; retry in 1 s"
        )
    );
    assert_eq!(gateway.status("/x", "sk_basic").await, 429);
    let keyless = gateway.client.get(gateway.url("/x")).send().await.unwrap();
    assert_eq!(keyless.status(), 429);
    assert_eq!(gateway.status("/own/x", "sk_basic").await, 429);
    // Another key has slots of its own.
    assert_eq!(gateway.status("/x", "sk_free").await, 200);
    // All or nothing: pro's refused request used none of its plan (2 of
    // 1000 used: its two held requests), once its units are given back.
    let remaining = || async {
        let inspected = gateway
            .admin(
                Method::POST,
                "/admin/inspect",
                Some(json!({"key": "sk_pro"})),
            )
            .await;
        let body: serde_json::Value = inspected.json().await.unwrap();
        body["remaining"].as_u64()
    };
    let mut given_back = false;
    for _ in 0..500 {
        if remaining().await == Some(998) {
            given_back = true;
            break;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    assert!(given_back, "remaining {:?}", remaining().await);
    upstream.release.notify_waiters();
    for request in held {
        assert_eq!(request.await.unwrap().unwrap().status(), 200);
    }
    until("no slot held", || gateway.running.slots_held() == 0).await;
    assert_eq!(gateway.status("/x", "sk_pro").await, 200);
    gateway.until_nothing_held().await;
    // Seven held, sk_free's one (while the seven were held), pro's last.
    assert_eq!(upstream.requests(), 9);
    assert_eq!(upstream.most_in_flight(), 8);
}

/// The routes of the scenario of both at once, named `name_both`, then
/// `rest`: tier pro 5 a second in a bucket one deep, waiting up to 200 ms,
/// at most one request in flight.
pub(crate) fn both(upstream: &Upstream, name: &str, rest: &str) -> String {
    let bucket = "algorithm = \"token_bucket\"\nlimit = 5\nwindow_s = 1\nburst = 1\n";
    config(&format!(
        "[limits.tiers.pro]\n{bucket}\
         [limits.tier_defaults.pro]\ndelay = \"200ms\"\nmax_in_flight = 1\n\
         [[routes]]\nname = \"{name}_both\"\nprefix = \"/\"\nupstream = \"http://{}\"\n{rest}",
        upstream.address
    ))
}

/// A request whose turn was booked ahead, then refused for its tier's slot,
/// gives its turn back: the next request's turn is 200 ms away (within the
/// delay), not 400 ms (refused). The clock stands still.
pub(crate) async fn a_turn_refused_its_slot_is_given_back(
    gateway: &Gateway,
    upstream: &Upstream,
    name: &str,
) {
    assign(gateway, "sk_both", "pro").await;
    let held = tokio::spawn(
        gateway
            .client
            .get(gateway.url("/slow"))
            .header("authorization", "Bearer sk_both")
            .send(),
    );
    until("one request in flight", || upstream.requests() == 1).await;
    // Its turn booked 200 ms ahead, then refused: the one slot is held.
    let refused = gateway.get("/x", "sk_both").await;
    assert_eq!(refused.status(), 429);
    let problem: serde_json::Value = refused.json().await.unwrap();
    assert_eq!(
        problem["detail"],
        format!(
            "the concurrency limit of {name}_both is reached: at most 1 request in flight at \
             once; retry in 1 s"
        )
    );
    upstream.release.notify_waiters();
    assert_eq!(held.await.unwrap().unwrap().status(), 200);
    until("no slot held", || gateway.running.slots_held() == 0).await;
    // The turn given back: this one waits 200 ms for it and passes.
    assert_eq!(gateway.status("/x", "sk_both").await, 200);
    assert_eq!(
        gateway
            .route_sample(
                "tollgate_delayed_total",
                &[("tier", "pro"), ("route", &format!("{name}_both"))]
            )
            .await,
        Some(1.0)
    );
    gateway.until_nothing_held().await;
    assert_eq!(upstream.requests(), 2);
}
