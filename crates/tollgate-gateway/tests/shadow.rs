//! Shadow mode (`[refusal] shadow`, `shadow_tiers`, a route's `shadow`),
//! over real HTTP to a real upstream, in memory and on Redis (`REDIS_URL`).
//! Each scenario runs on two gateways given the same requests: one with the
//! limits in shadow mode, one enforcing them; the limits' state afterwards
//! (admin inspect) must be the same, and the shadow gateway's
//! `tollgate_shadow_denials_total` must count exactly what the enforcing one
//! refused.
//!
//! Expected values by hand. The clock stands at 6,000,000,000 s, the start of
//! a minute, and never moves. Plans: default fixed window 5 per 60 s, tier
//! `trial` fixed window 3 per 60 s. Routes: `/p` no budget; `/m` 8 a minute
//! per API key (a token bucket of 8); `/b` 3 a minute (a bucket of 3, one
//! token per 20 s). A request refused by one limit uses nothing of the other
//! (all or nothing), in shadow mode as when enforced.

use reqwest::Method;
use serde_json::{Value, json};
use tollgate_test_support::gateway::{self, Gateway, header};
use tollgate_test_support::loopback::Upstream;
use tollgate_test_support::redis as redis_support;

const START_S: u64 = 6_000_000_000;
const SHADOW: &str = "tollgate_shadow_denials_total";
const DENIALS: &str = "api_rate_limit_exceeded_total";
const DECIDE: &str = "/_tollgate/decide";

/// The routes of a gateway named with `suffix`, the limits above, and
/// `refusal` (the `[refusal]` table's settings).
fn config(upstream: &Upstream, store: &str, suffix: &str, refusal: &str) -> String {
    gateway::config(&format!(
        "{store}\
         [limits.default_policy]\nalgorithm = \"fixed_window\"\nlimit = 5\nwindow_s = 60\n\
         [limits.tiers.trial]\nalgorithm = \"fixed_window\"\nlimit = 3\nwindow_s = 60\n\
         [refusal]\n{refusal}\n\
         [forward_auth]\npath = \"{DECIDE}\"\n\
         [[routes]]\nname = \"sh_plan{suffix}\"\nprefix = \"/p\"\nupstream = \"http://{0}\"\n\
         [[routes]]\nname = \"sh_mixed{suffix}\"\nprefix = \"/m\"\nupstream = \"http://{0}\"\n\
         rpm = 8\n\
         [[routes]]\nname = \"sh_both{suffix}\"\nprefix = \"/b\"\nupstream = \"http://{0}\"\n\
         rpm = 3\n",
        upstream.address
    ))
}

async fn inspect(gateway: &Gateway, body: Value) -> Value {
    let response = gateway
        .admin(Method::POST, "/admin/inspect", Some(body))
        .await;
    assert_eq!(response.status(), 200);
    let mut report: Value = response.json().await.unwrap();
    // The route's name differs between the two gateways; the rest must not.
    if let Some(report) = report.as_object_mut() {
        report.remove("route");
    }
    report
}

/// The statuses of `count` GETs of `path` with `key`, each 200 answered by
/// the upstream itself (its fallback's body).
async fn statuses(gateway: &Gateway, path: &str, key: &str, count: usize) -> Vec<u16> {
    let mut statuses = Vec::new();
    for _ in 0..count {
        let response = gateway.get(path, key).await;
        let status = response.status().as_u16();
        if status == 200 {
            assert_eq!(response.text().await.unwrap(), "upstream");
        }
        statuses.push(status);
    }
    statuses
}

async fn assign_trial(gateway: &Gateway, key: &str) {
    let assigned = gateway
        .admin(
            Method::POST,
            "/admin/tier",
            Some(json!({"key": key, "tier": "trial"})),
        )
        .await;
    assert_eq!(assigned.status(), 200);
}

/// The labels of the denial and shadow counters.
fn labels<'a>(route: &'a str, kind: &'a str) -> [(&'a str, &'a str); 3] {
    [("plugin", "tollgate"), ("route", route), ("key_kind", kind)]
}

/// The plans in shadow mode (`shadow_tiers`), the route budgets enforced,
/// the shadow gateway on `store` and the enforcing one on `enforced_store`
/// (`[store]` tables, or nothing for memory): the shadow gateway's routes
/// end in `suffix`, the enforcing one's in `suffix_e`.
async fn shadow_plans_decide_as_enforced_ones(store: &str, enforced_store: &str, suffix: &str) {
    let shadow_upstream = Upstream::start().await;
    let enforced_upstream = Upstream::start().await;
    let enforced_suffix = format!("{suffix}_e");
    let shadow = Gateway::start(
        &config(
            &shadow_upstream,
            store,
            suffix,
            "shadow_tiers = [\"default\", \"trial\"]",
        ),
        START_S,
    )
    .await;
    let enforced = Gateway::start(
        &config(&enforced_upstream, enforced_store, &enforced_suffix, ""),
        START_S,
    )
    .await;
    for gateway in [&shadow, &enforced] {
        assign_trial(gateway, "sk_c").await;
    }

    // sk_a on the plan alone: 8 requests, 5 within the plan.
    let passed = shadow.get("/p", "sk_a").await;
    assert_eq!(passed.status(), 200);
    // A shadow limit's headers are not sent (shadow_headers = false).
    assert_eq!(header(&passed, "ratelimit"), None);
    assert_eq!(header(&passed, "x-ratelimit-remaining"), None);
    assert_eq!(statuses(&shadow, "/p", "sk_a", 7).await, [200; 7]);
    assert_eq!(
        statuses(&enforced, "/p", "sk_a", 8).await,
        [200, 200, 200, 200, 200, 429, 429, 429]
    );

    // sk_b on /m: the plan (shadow) refuses from the 6th request on, the
    // route budget (8, enforced) is never charged for those: 3 left.
    assert_eq!(statuses(&shadow, "/m", "sk_b", 10).await, [200; 10]);
    assert_eq!(
        statuses(&enforced, "/m", "sk_b", 10).await,
        [200, 200, 200, 200, 200, 429, 429, 429, 429, 429]
    );

    // sk_c (trial, 3) on /b (3): both refuse the 4th and 5th. The shadow
    // gateway refuses by the enforced route budget (Retry-After 20, its
    // field alone); the enforcing one by the plan's longer wait (60).
    assert_eq!(statuses(&shadow, "/b", "sk_c", 3).await, [200; 3]);
    assert_eq!(statuses(&enforced, "/b", "sk_c", 3).await, [200; 3]);
    let route = format!("sh_both{suffix}");
    for _ in 0..2 {
        let refused = shadow.get("/b", "sk_c").await;
        assert_eq!(refused.status(), 429);
        assert_eq!(header(&refused, "retry-after").as_deref(), Some("20"));
        assert_eq!(
            header(&refused, "ratelimit-policy"),
            Some(format!("\"{route}\";q=3;w=60"))
        );
        assert_eq!(
            header(&refused, "ratelimit"),
            Some(format!("\"{route}\";r=0;t=60"))
        );
        let refused = enforced.get("/b", "sk_c").await;
        assert_eq!(refused.status(), 429);
        assert_eq!(header(&refused, "retry-after").as_deref(), Some("60"));
    }
    // 8 + 10 + 3 requests reached the shadow gateway's upstream, 5 + 5 + 3
    // the enforcing one's.
    assert_eq!(shadow_upstream.requests(), 21);
    assert_eq!(enforced_upstream.requests(), 13);

    // The shadow count is what enforcing refused, limit by limit.
    let read = async |gateway: &Gateway, metric: &str, route: &str, kind: &str| {
        gateway.route_sample(metric, &labels(route, kind)).await
    };
    for (route, kind, count) in [
        ("sh_plan", "api_key", 3.0),
        ("sh_mixed", "api_key", 5.0),
        ("sh_both", "api_key", 2.0),
    ] {
        let shadow_route = format!("{route}{suffix}");
        let enforced_route = format!("{route}{enforced_suffix}");
        assert_eq!(
            read(&shadow, SHADOW, &shadow_route, kind).await,
            Some(count),
            "{shadow_route}"
        );
        assert_eq!(
            read(&enforced, DENIALS, &enforced_route, kind).await,
            Some(count),
            "{enforced_route}"
        );
        assert_eq!(read(&shadow, DENIALS, &shadow_route, kind).await, None);
        assert_eq!(read(&enforced, SHADOW, &enforced_route, kind).await, None);
    }
    // The enforced route budget refused on both gateways.
    for (gateway, route) in [
        (&shadow, format!("sh_both{suffix}")),
        (&enforced, format!("sh_both{enforced_suffix}")),
    ] {
        assert_eq!(read(gateway, DENIALS, &route, "principal").await, Some(2.0));
    }

    // The state is the enforced one's: every plan used up, the route
    // budgets charged only for the requests every limit allowed.
    for (body, remaining) in [
        (json!({"key": "sk_a"}), 0),
        (json!({"key": "sk_b"}), 0),
        (json!({"key": "sk_c"}), 0),
    ] {
        let report = inspect(&shadow, body.clone()).await;
        assert_eq!(report["remaining"], remaining, "{body}");
        assert_eq!(report, inspect(&enforced, body).await);
    }
    for (route, key, remaining) in [("sh_mixed", "sk_b", 3), ("sh_both", "sk_c", 0)] {
        let shadow_report = inspect(
            &shadow,
            json!({"route": format!("{route}{suffix}"), "key": key}),
        )
        .await;
        assert_eq!(shadow_report["remaining"], remaining, "{route}");
        assert_eq!(
            shadow_report,
            inspect(
                &enforced,
                json!({"route": format!("{route}{enforced_suffix}"), "key": key}),
            )
            .await
        );
    }
}

/// The whole gateway in shadow mode (`[refusal] shadow`), its headers sent
/// (`shadow_headers`): the decision endpoint answers 200 as proxying passes,
/// and both count. Route `/m`'s budget is 8: the plan (5) refuses first.
async fn the_decision_endpoint_answers_as_proxying(store: &str, suffix: &str) {
    let upstream = Upstream::start().await;
    let gateway = Gateway::start(
        &config(
            &upstream,
            store,
            suffix,
            "shadow = true\nshadow_headers = true",
        ),
        START_S,
    )
    .await;
    let decide = async |key: &str| {
        gateway
            .client
            .get(gateway.url(DECIDE))
            .header("authorization", format!("Bearer {key}"))
            .header("x-forwarded-uri", "/p/orders?id=7")
            .send()
            .await
            .unwrap()
    };
    // Remaining 4, 3, 2, 1, 0, then 0 and let through: the headers as
    // enforced (the plan's window ends in 60 s).
    for remaining in [4, 3, 2, 1, 0, 0, 0] {
        let answer = decide("sk_f").await;
        assert_eq!(answer.status(), 200);
        assert_eq!(
            header(&answer, "ratelimit"),
            Some(format!("\"default\";r={remaining};t=60"))
        );
        assert_eq!(header(&answer, "retry-after"), None);
        assert_eq!(answer.text().await.unwrap(), "");
    }
    // Proxied, the same key passes too.
    let proxied = gateway.get("/p/orders", "sk_f").await;
    assert_eq!(proxied.status(), 200);
    assert_eq!(
        header(&proxied, "x-ratelimit-remaining").as_deref(),
        Some("0")
    );
    assert_eq!(proxied.text().await.unwrap(), "upstream");
    assert_eq!(upstream.requests(), 1);
    let route = format!("sh_plan{suffix}");
    assert_eq!(
        gateway
            .route_sample(SHADOW, &labels(&route, "api_key"))
            .await,
        Some(3.0)
    );
    assert_eq!(
        gateway
            .route_sample(DENIALS, &labels(&route, "api_key"))
            .await,
        None
    );
    let report = inspect(&gateway, json!({"key": "sk_f"})).await;
    assert_eq!(
        (&report["remaining"], &report["reset_after_s"]),
        (&json!(0), &json!(60))
    );
}

#[tokio::test]
async fn shadow_plans_in_memory() {
    shadow_plans_decide_as_enforced_ones("", "", "_memory").await;
}

#[tokio::test]
async fn shadow_decisions_in_memory() {
    the_decision_endpoint_answers_as_proxying("", "_fa_memory").await;
}

fn redis_store(test: &str) -> String {
    let url = redis_support::require_redis_url();
    let prefix = redis_support::prefix(test);
    format!("[store]\nurl = \"{url}\"\nprefix = \"{prefix}\"\ntimeout = \"5s\"\ntime = \"local\"\n")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[cfg_attr(not(has_redis), ignore = "set REDIS_URL=redis://127.0.0.1:6379 to run")]
async fn shadow_plans_on_redis() {
    // The two gateways under prefixes of their own: a store each.
    shadow_plans_decide_as_enforced_ones(
        &redis_store("shadow"),
        &redis_store("enforced"),
        "_redis",
    )
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[cfg_attr(not(has_redis), ignore = "set REDIS_URL=redis://127.0.0.1:6379 to run")]
async fn shadow_decisions_on_redis() {
    the_decision_endpoint_answers_as_proxying(&redis_store("shadow-fa"), "_fa_redis").await;
}

#[test]
fn shadow_settings_are_checked_at_load() {
    let error = |text: &str| {
        tollgate_gateway::ServeConfig::from_toml_str(text)
            .unwrap_err()
            .to_string()
    };
    assert_eq!(
        error("[refusal]\nshadow_tiers = [\"gold\"]"),
        "refusal.shadow_tiers names \"gold\", which is not a tier of [limits.tiers] (nor \
         \"default\", the default policy)"
    );
    assert_eq!(
        error(
            "[[routes]]\nname = \"r\"\nprefix = \"/\"\nupstream = \"http://127.0.0.1:1\"\nshadow = true"
        ),
        "route r (/): shadow applies to the route's own budget: set rpm too (or a calendar \
         quota: limit and window)"
    );
    // `tollgate run --config` reads [limits] alone: shadow is not its.
    assert!(
        tollgate_core::LimiterConfig::from_toml_str(
            "[tiers.a]\nalgorithm = \"fixed_window\"\nlimit = 1\nwindow_s = 60\nshadow = true"
        )
        .is_err()
    );
}

/// With `shadow_headers = true`, a request refused by an enforced limit gets
/// the headers of the enforced limits only: a shadow limit's longer wait
/// must not contradict the `Retry-After` of the limit that refused.
#[tokio::test]
async fn a_refusal_describes_the_enforced_limit_not_a_longer_shadow_one() {
    let upstream = Upstream::start().await;
    // Plan (shadow): 1 per 60 s, fixed window. Route `/t` (enforced): a
    // token bucket of 1 refilled every 30 s (rpm 2, burst 1). The clock
    // stands at the start of a minute.
    let gateway = Gateway::start(
        &gateway::config(&format!(
            "[limits.default_policy]\nalgorithm = \"fixed_window\"\nlimit = 1\nwindow_s = 60\n\
             [refusal]\nshadow_tiers = [\"default\"]\nshadow_headers = true\n\
             [[routes]]\nname = \"sh_tight\"\nprefix = \"/t\"\nupstream = \"http://{}\"\n\
             rpm = 2\nburst = 1\n",
            upstream.address
        )),
        START_S,
    )
    .await;
    // The first request fits both; with shadow_headers both are described.
    let first = gateway.get("/t", "sk_a").await;
    assert_eq!(first.status(), 200);
    let policy = header(&first, "ratelimit-policy").unwrap_or_default();
    assert!(
        policy.contains("\"default\"") && policy.contains("\"sh_tight\""),
        "{policy}"
    );
    // The second: the plan (shadow) would wait 60 s, the route (enforced)
    // refuses it for 30 s. The answer is the route's alone.
    let refused = gateway.get("/t", "sk_a").await;
    assert_eq!(refused.status(), 429);
    assert_eq!(header(&refused, "retry-after").as_deref(), Some("30"));
    assert_eq!(header(&refused, "x-ratelimit-reset").as_deref(), Some("30"));
    let policy = header(&refused, "ratelimit-policy").unwrap_or_default();
    assert!(
        policy.starts_with("\"sh_tight\"") && !policy.contains("\"default\""),
        "{policy}"
    );
    assert_eq!(upstream.requests(), 1);
    gateway.running.shutdown().await;
}
