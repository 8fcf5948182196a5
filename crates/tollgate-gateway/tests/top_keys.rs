//! `GET /admin/top` (issue #27): the keys most refused and most active in a
//! recent window, fingerprinted, over real HTTP on a manual clock; two
//! gateways on one Redis each listing their own. The
//! fingerprints are Python's (no key secret is set):
//! `hashlib.sha256(b"plan\0" + key).hexdigest()[:16]`, and `b"policy\0"`
//! for a keyless request's route budget key `tk_open/ip:127.0.0.1`.

use serde_json::{Value, json};
use tollgate_test_support::gateway::{Gateway, config};
use tollgate_test_support::loopback::Upstream;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_keys_most_refused_and_most_active_are_listed_by_fingerprint() {
    let upstream = Upstream::start().await;
    // Minute 10 of the epoch (600 s): a plan of 3 a minute; /open reads no
    // key, 2 per client address (a burst of 2).
    let gateway = Gateway::start(
        &config(&format!(
            "[limits.default_policy]\nalgorithm = \"fixed_window\"\nlimit = 3\nwindow_s = 60\n\
             [[routes]]\nname = \"tk_api\"\nprefix = \"/\"\nupstream = \"http://{0}\"\n\
             [[routes]]\nname = \"tk_open\"\nprefix = \"/open\"\nupstream = \"http://{0}\"\n\
             api_key = \"none\"\nrpm = 2\nburst = 2\nkey = \"ip\"\n",
            upstream.address
        )),
        600,
    )
    .await;
    let mut statuses = Vec::new();
    for (key, times) in [("sk_heavy", 10), ("sk_mid", 4), ("sk_light", 1)] {
        for _ in 0..times {
            statuses.push(gateway.status("/x", key).await);
        }
    }
    for _ in 0..5 {
        let response = gateway
            .client
            .get(gateway.url("/open"))
            .send()
            .await
            .unwrap();
        statuses.push(response.status().as_u16());
    }
    let allowed = statuses.iter().filter(|status| **status == 200).count();
    // 3 + 3 + 1 keyed, 2 keyless.
    assert_eq!(allowed, 9, "{statuses:?}");
    let listed = |key: &str, kind: &str, count: u64, tier: &str, route: &str| json!({"key": key, "kind": kind, "count": count, "error": 0, "tier": tier, "route": route});
    let heavy = "0ac41b50e83894ac";
    let mid = "d90ae12520a23689";
    let light = "86bd8dc2afd22f63";
    let open = "f447a0c6c4b54285";
    let (status, body) = top(&gateway, "?window=5m&n=10").await;
    assert_eq!(status, 200, "{body}");
    // Fewer keys than counters: every count exact (error 0).
    assert_eq!(
        body,
        json!({
            "window_s": 300, "requests": 20, "refusals": 11, "error_bound": 0,
            "most_refused": [
                listed(heavy, "api_key", 7, "default", "tk_api"),
                listed(open, "keyless", 3, "keyless", "tk_open"),
                listed(mid, "api_key", 1, "default", "tk_api"),
            ],
            "most_active": [
                listed(heavy, "api_key", 10, "default", "tk_api"),
                listed(open, "keyless", 5, "keyless", "tk_open"),
                listed(mid, "api_key", 4, "default", "tk_api"),
                listed(light, "api_key", 1, "default", "tk_api"),
            ],
        })
    );
    let (_, two) = top(&gateway, "?n=2").await;
    assert_eq!(two["most_active"].as_array().unwrap().len(), 2);
    // Five minutes later the window of 5 m has left minute 10 behind; one
    // of 10 m still holds it.
    gateway.clock.advance(std::time::Duration::from_secs(300));
    let (_, later) = top(&gateway, "?window=5m").await;
    assert_eq!(
        (later["requests"].clone(), later["most_active"].clone()),
        (json!(0), json!([]))
    );
    let (_, longer) = top(&gateway, "?window=10m").await;
    assert_eq!(longer["requests"], 20);
    // Bad queries: 400, and no key ever appears.
    for query in [
        "?window=2h",
        "?window=soon",
        "?window=500ms",
        "?n=0",
        "?n=1001",
        "?colour=red",
    ] {
        let (status, body) = top(&gateway, query).await;
        assert_eq!(status, 400, "{query}: {body}");
    }
    let text = longer.to_string();
    assert!(
        !text.contains("sk_") && !text.contains("127.0.0.1"),
        "{text}"
    );
    let anonymous = gateway
        .client
        .get(gateway.admin_url("/admin/top"))
        .send()
        .await
        .unwrap();
    assert_eq!(anonymous.status(), 401);
}

/// `GET /admin/top{query}` with the admin token: its status and body.
async fn top(gateway: &Gateway, query: &str) -> (u16, Value) {
    let response = gateway
        .admin(reqwest::Method::GET, &format!("/admin/top{query}"), None)
        .await;
    let status = response.status().as_u16();
    (status, response.json::<Value>().await.unwrap())
}

#[tokio::test]
async fn turned_off_the_top_keys_are_not_counted() {
    let gateway = Gateway::start(
        &config("").replace("[admin]\n", "[admin]\ntop_keys = false\n"),
        0,
    )
    .await;
    let (status, body) = top(&gateway, "").await;
    assert_eq!(status, 404, "{body}");
    assert_eq!(
        body["detail"],
        "the top keys are not counted: [admin] top_keys = false"
    );
}

/// Two gateways sharing one budget on Redis each list the requests they
/// decided, not the other's: the top keys are counted per gateway, in
/// memory (CONFIG.md). `sk_a` (Python: `sha256(b"plan\0sk_a")[:16]`) twice
/// through each, under a shared plan of 3 a minute: its fourth, through the
/// second gateway, is refused; `sk_b` once through the second.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[cfg_attr(not(has_redis), ignore = "set REDIS_URL=redis://127.0.0.1:6379 to run")]
async fn each_gateway_on_redis_lists_its_own_top_keys() {
    use tollgate_test_support::redis as redis_support;
    let url = redis_support::require_redis_url();
    let prefix = redis_support::prefix("top-keys");
    let upstream = Upstream::start().await;
    let settings = config(&format!(
        "[store]\nurl = \"{url}\"\nprefix = \"{prefix}\"\ntimeout = \"2s\"\ntime = \"local\"\n\
         [limits.default_policy]\nalgorithm = \"fixed_window\"\nlimit = 3\nwindow_s = 60\n\
         [[routes]]\nname = \"tk_shared\"\nprefix = \"/\"\nupstream = \"http://{}\"\n",
        upstream.address
    ));
    let start = || async {
        let config = tollgate_gateway::ServeConfig::from_toml_str(&settings).unwrap();
        Gateway::start_on_redis(config, 600, &url, &prefix).await
    };
    let (first, second) = (start().await, start().await);
    let statuses = [
        first.status("/x", "sk_a").await,
        first.status("/x", "sk_a").await,
        second.status("/x", "sk_a").await,
        second.status("/x", "sk_a").await,
        second.status("/x", "sk_b").await,
    ];
    assert_eq!(statuses, [200, 200, 200, 429, 200]);
    let (sk_a, sk_b) = ("19b10fb0f2540938", "7906cd67a7574c7d");
    let listed = |key: &str, count: u64| json!({"key": key, "kind": "api_key", "count": count, "error": 0, "tier": "default", "route": "tk_shared"});
    let (_, mine) = top(&first, "?window=5m").await;
    assert_eq!(
        mine,
        json!({
            "window_s": 300, "requests": 2, "refusals": 0, "error_bound": 0,
            "most_refused": [],
            "most_active": [listed(sk_a, 2)],
        })
    );
    let (_, theirs) = top(&second, "?window=5m").await;
    assert_eq!(
        theirs,
        json!({
            "window_s": 300, "requests": 3, "refusals": 1, "error_bound": 0,
            "most_refused": [listed(sk_a, 1)],
            "most_active": [listed(sk_a, 2), listed(sk_b, 1)],
        })
    );
    redis_support::cleanup(&url, &prefix);
}
