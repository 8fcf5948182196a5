//! The scenarios of routes without an API key and of `cost` (issue #26),
//! run on any store: `keyless.rs` in memory, `redis_keyless.rs` on Redis
//! and a Redis Cluster. Each takes a gateway started on [`routes`] at 0 s
//! of its manual clock; expected values by hand.

use tollgate_test_support::gateway::{Gateway, config, header};
use tollgate_test_support::loopback::Upstream;

/// The configuration of the scenarios, its routes' names starting with
/// `name` (each gateway's own, for its metrics), then `store`:
/// - the default plan: a fixed window of 5 per 60 s;
/// - `[host] ip`: 60 per minute in bursts of 2;
/// - `/public`: `api_key = "none"`, its own budget of 60 per minute in
///   bursts of 3, keyed by client IP (the default there);
/// - `/mixed`: `api_key = "optional"`, 60 per minute in bursts of 2 per IP;
/// - `/open`: `api_key = "optional"`, no budget of its own (`[host] ip`);
/// - `/heavy`: `cost = 2`, 60 per minute in bursts of 4 per API key.
pub(crate) fn routes(upstream: &Upstream, name: &str, store: &str) -> String {
    let upstream = upstream.address;
    config(&format!(
        "[limits.default_policy]\nalgorithm = \"fixed_window\"\nlimit = 5\nwindow_s = 60\n\
         [host]\nip = {{ rpm = 60, burst = 2 }}\n\
         [[routes]]\nname = \"{name}_public\"\nprefix = \"/public\"\nupstream = \"http://{upstream}\"\n\
         api_key = \"none\"\nrpm = 60\nburst = 3\n\
         [[routes]]\nname = \"{name}_mixed\"\nprefix = \"/mixed\"\nupstream = \"http://{upstream}\"\n\
         api_key = \"optional\"\nrpm = 60\nburst = 2\nkey = \"ip\"\n\
         [[routes]]\nname = \"{name}_open\"\nprefix = \"/open\"\nupstream = \"http://{upstream}\"\n\
         api_key = \"optional\"\n\
         [[routes]]\nname = \"{name}_heavy\"\nprefix = \"/heavy\"\nupstream = \"http://{upstream}\"\n\
         cost = 2\nrpm = 60\nburst = 4\n\
         {store}"
    ))
}

/// A GET of `path` without an API key, from `forwarded_for` if given.
async fn keyless(gateway: &Gateway, path: &str, forwarded_for: Option<&str>) -> reqwest::Response {
    let mut request = gateway.client.get(gateway.url(path));
    if let Some(client) = forwarded_for {
        request = request.header("x-forwarded-for", client);
    }
    request.send().await.unwrap()
}

/// `/public` reads no key: three requests pass per client IP, the fourth
/// is refused whether it carries a key or a spoofed `X-Forwarded-For` (the
/// loopback peer is no trusted proxy), and only the route's item is sent.
pub(crate) async fn a_route_without_keys_is_limited_per_client_ip(
    gateway: &Gateway,
    upstream: &Upstream,
    name: &str,
) {
    let before = upstream.requests();
    let first = keyless(gateway, "/public/a", None).await;
    assert_eq!(first.status(), 200);
    // 3 tokens refilled at one a second: q=3 over the 3 s an empty bucket takes.
    assert_eq!(
        header(&first, "ratelimit-policy"),
        Some(format!("\"{name}_public\";q=3;w=3"))
    );
    assert_eq!(
        header(&first, "ratelimit"),
        Some(format!("\"{name}_public\";r=2;t=1"))
    );
    assert_eq!(keyless(gateway, "/public/a", None).await.status(), 200);
    // A key is not read: the same IP's budget.
    let keyed = gateway.get("/public/b", "sk_public").await;
    assert_eq!(keyed.status(), 200);
    assert_eq!(
        header(&keyed, "ratelimit-policy"),
        Some(format!("\"{name}_public\";q=3;w=3"))
    );
    let refused = keyless(gateway, "/public/a", Some("198.51.100.7")).await;
    assert_eq!(refused.status(), 429);
    assert_eq!(header(&refused, "retry-after").as_deref(), Some("1"));
    assert_eq!(gateway.get("/public/a", "sk_other").await.status(), 429);
    assert_eq!(upstream.requests() - before, 3);
}

/// `/mixed` takes a key or none: a key is held to its plan and the route's
/// budget per IP; a keyless request to the route's budget alone.
pub(crate) async fn an_optional_key_adds_the_plan(
    gateway: &Gateway,
    upstream: &Upstream,
    name: &str,
) {
    let before = upstream.requests();
    let keyed = gateway.get("/mixed", "sk_mixed").await;
    assert_eq!(keyed.status(), 200);
    assert_eq!(
        header(&keyed, "ratelimit-policy"),
        Some(format!("\"default\";q=5;w=60, \"{name}_mixed\";q=2;w=2"))
    );
    let keyless_first = keyless(gateway, "/mixed", None).await;
    assert_eq!(keyless_first.status(), 200);
    assert_eq!(
        header(&keyless_first, "ratelimit"),
        Some(format!("\"{name}_mixed\";r=0;t=2"))
    );
    let refused = keyless(gateway, "/mixed", None).await;
    assert_eq!(refused.status(), 429);
    let problem: serde_json::Value = refused.json().await.unwrap();
    assert_eq!(problem["retry_after"], 1);
    // `/open` has no budget of its own: `[host] ip`, 2 at once.
    for expected in [200, 200, 429] {
        assert_eq!(keyless(gateway, "/open/x", None).await.status(), expected);
    }
    let open = keyless(gateway, "/open/x", None).await;
    assert_eq!(
        header(&open, "ratelimit-policy"),
        Some(format!("\"{name}_open\";q=2;w=2"))
    );
    assert_eq!(upstream.requests() - before, 4);
}

/// `/heavy` costs 2 units of the plan (5 per window) and of the route's
/// budget (4 at once): two requests pass, the third is refused with the
/// plan's wait and uses nothing, and a new window lets it through.
pub(crate) async fn a_cost_is_charged_to_every_limit(
    gateway: &Gateway,
    upstream: &Upstream,
    name: &str,
) {
    let before = upstream.requests();
    let first = gateway.get("/heavy", "sk_heavy").await;
    assert_eq!(first.status(), 200);
    assert_eq!(
        header(&first, "ratelimit"),
        Some(format!("\"default\";r=3;t=60, \"{name}_heavy\";r=2;t=2"))
    );
    let second = gateway.get("/heavy", "sk_heavy").await;
    assert_eq!(
        header(&second, "ratelimit"),
        Some(format!("\"default\";r=1;t=60, \"{name}_heavy\";r=0;t=4"))
    );
    let refused = gateway.get("/heavy", "sk_heavy").await;
    assert_eq!(refused.status(), 429);
    assert_eq!(header(&refused, "retry-after").as_deref(), Some("60"));
    // 4 s later the route's bucket is full again; the plan still has 1 of 2.
    gateway.clock.advance_by("4s").unwrap();
    let still = gateway.get("/heavy", "sk_heavy").await;
    assert_eq!(still.status(), 429);
    assert_eq!(
        header(&still, "ratelimit"),
        Some(format!("\"default\";r=1;t=56, \"{name}_heavy\";r=4;t=0"))
    );
    gateway.clock.advance_by("56s").unwrap();
    assert_eq!(gateway.status("/heavy", "sk_heavy").await, 200);
    assert_eq!(upstream.requests() - before, 3);
}
