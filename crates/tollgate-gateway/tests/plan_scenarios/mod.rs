//! The scenarios of a plan of several policies, run by `plan_policies.rs`
//! (in memory) and `redis_plan_policies.rs` (on Redis) alike. Expected
//! values by hand.

use reqwest::Method;
use serde_json::json;
use tollgate_test_support::gateway::{Gateway, config, header};
use tollgate_test_support::loopback::Upstream;

/// The `[limits]` of a default plan of 2 per second and 5 per minute, both
/// fixed windows, and a route named `route` to `upstream`; `store` goes
/// before them (empty: in memory).
pub(crate) fn two_policies(upstream: &Upstream, route: &str, store: &str) -> String {
    config(&format!(
        "{store}\
         [[limits.default_policy]]\nname = \"second\"\nalgorithm = \"fixed_window\"\nlimit = 2\nwindow_s = 1\n\
         [[limits.default_policy]]\nname = \"minute\"\nalgorithm = \"fixed_window\"\nlimit = 5\nwindow_s = 60\n\
         [[routes]]\nname = \"{route}\"\nprefix = \"/\"\nupstream = \"http://{}\"\n",
        upstream.address
    ))
}

/// The five rate-limit headers of `response`, and its status.
async fn seen(gateway: &Gateway, key: &str) -> (u16, [Option<String>; 6]) {
    let response = gateway.get("/", key).await;
    let names = [
        "ratelimit-policy",
        "ratelimit",
        "x-ratelimit-limit",
        "x-ratelimit-remaining",
        "x-ratelimit-reset",
        "retry-after",
    ];
    (
        response.status().as_u16(),
        names.map(|name| header(&response, name)),
    )
}

fn headers(state: &str, limit: &str, remaining: &str, reset: &str) -> [Option<String>; 6] {
    [
        Some("\"second\";q=2;w=1, \"minute\";q=5;w=60".to_owned()),
        Some(state.to_owned()),
        Some(limit.to_owned()),
        Some(remaining.to_owned()),
        Some(reset.to_owned()),
        None,
    ]
}

/// The requests of one key on a gateway started at 120 s with
/// [`two_policies`]: the minute window [120, 180), second windows [120,
/// 121), [121, 122)...
pub(crate) async fn the_binding_policy_speaks(gateway: &Gateway, upstream: &Upstream, key: &str) {
    // "second" has the least left: it binds.
    assert_eq!(
        seen(gateway, key).await,
        (200, headers("\"second\";r=1;t=1", "2", "1", "1"))
    );
    assert_eq!(
        seen(gateway, key).await,
        (200, headers("\"second\";r=0;t=1", "2", "0", "1"))
    );
    // Refused by "second" for 1 s; "minute" keeps its 3.
    let mut refused = headers("\"second\";r=0;t=1", "2", "0", "1");
    refused[5] = Some("1".to_owned());
    assert_eq!(seen(gateway, key).await, (429, refused));
    gateway.clock.advance_by("1s").unwrap();
    assert_eq!(
        seen(gateway, key).await,
        (200, headers("\"second\";r=1;t=1", "2", "1", "1"))
    );
    assert_eq!(
        seen(gateway, key).await,
        (200, headers("\"second\";r=0;t=1", "2", "0", "1"))
    );
    gateway.clock.advance_by("1s").unwrap();
    // At 122 "minute" has 0 left (58 s to 180): it binds.
    assert_eq!(
        seen(gateway, key).await,
        (200, headers("\"minute\";r=0;t=58", "5", "0", "58"))
    );
    let response = gateway.get("/", key).await;
    assert_eq!(response.status(), 429);
    assert_eq!(header(&response, "retry-after").as_deref(), Some("58"));
    assert_eq!(
        header(&response, "ratelimit").as_deref(),
        Some("\"minute\";r=0;t=58")
    );
    let problem: serde_json::Value = response.json().await.unwrap();
    assert_eq!(problem["retry_after"], json!(58));
    // The detail names the tier and the policy that binds.
    assert_eq!(
        problem["detail"],
        json!("the rate limit of default (minute) is exhausted; retry in 58 s")
    );
    assert_eq!(upstream.requests(), 5, "refused requests never reach it");
}

/// The admin API on a gateway of [`two_policies`] at 122 s: the list read,
/// replaced by another, inspected; a bad list refused; the one-policy form
/// as it always was.
pub(crate) async fn the_admin_api_reads_and_writes_lists(gateway: &Gateway, key: &str) {
    let read = gateway.admin(Method::GET, "/admin/policy", None).await;
    assert_eq!(read.status(), 200);
    assert_eq!(
        read.text().await.unwrap(),
        "[{\"name\":\"second\",\"algorithm\":\"fixed_window\",\"limit\":2,\"window_s\":1},\
         {\"name\":\"minute\",\"algorithm\":\"fixed_window\",\"limit\":5,\"window_s\":60}]\n"
    );
    let list = json!([
        {"name": "burst", "algorithm": "fixed_window", "limit": 3, "window_s": 10},
        {"name": "day", "algorithm": "fixed_window", "limit": 1000, "window_s": 86400},
    ]);
    let put = gateway
        .admin(Method::PUT, "/admin/policy", Some(list.clone()))
        .await;
    assert_eq!(put.status(), 200);
    assert_eq!(put.json::<serde_json::Value>().await.unwrap(), list);
    let read = gateway.admin(Method::GET, "/admin/policy", None).await;
    assert_eq!(read.json::<serde_json::Value>().await.unwrap(), list);
    // At 122: "burst" counts in [120, 130), "day" in [0, 86400).
    let response = gateway.get("/", key).await;
    assert_eq!(response.status(), 200);
    assert_eq!(
        header(&response, "ratelimit-policy").as_deref(),
        Some("\"burst\";q=3;w=10, \"day\";q=1000;w=86400")
    );
    assert_eq!(
        header(&response, "ratelimit").as_deref(),
        Some("\"burst\";r=2;t=8")
    );
    let inspected = gateway
        .admin(Method::POST, "/admin/inspect", Some(json!({"key": key})))
        .await;
    let inspected: serde_json::Value = inspected.json().await.unwrap();
    assert_eq!(inspected["tier"], json!("default"));
    assert_eq!(inspected["remaining"], json!(2));
    assert_eq!(
        inspected["policies"],
        json!([
            {"name": "burst", "policy": list[0].as_object().map(|policy| {
                let mut policy = policy.clone();
                policy.remove("name");
                policy
            }), "tracked": true, "remaining": 2, "reset_after_s": 8},
            {"name": "day", "policy": {"algorithm": "fixed_window", "limit": 1000, "window_s": 86400},
             "tracked": true, "remaining": 999, "reset_after_s": 86278},
        ])
    );
    // A name given twice: refused, nothing changes.
    let twice = json!([
        {"name": "a", "algorithm": "fixed_window", "limit": 3, "window_s": 10},
        {"name": "a", "algorithm": "fixed_window", "limit": 4, "window_s": 10},
    ]);
    let refused = gateway
        .admin(Method::PUT, "/admin/policy", Some(twice))
        .await;
    assert_eq!(refused.status(), 400);
    let problem: serde_json::Value = refused.json().await.unwrap();
    let detail = problem["detail"].as_str().unwrap_or_default();
    assert!(
        detail.contains("policy name \"a\" is given twice"),
        "{problem}"
    );
    let read = gateway.admin(Method::GET, "/admin/policy", None).await;
    assert_eq!(read.json::<serde_json::Value>().await.unwrap(), list);
    // One policy object: the one-policy form, read back as an object.
    let one = json!({"algorithm": "fixed_window", "limit": 7, "window_s": 60});
    let put = gateway
        .admin(Method::PUT, "/admin/policy", Some(one.clone()))
        .await;
    assert_eq!(put.json::<serde_json::Value>().await.unwrap(), one);
    let read = gateway.admin(Method::GET, "/admin/policy", None).await;
    assert_eq!(read.json::<serde_json::Value>().await.unwrap(), one);
    let response = gateway.get("/", key).await;
    assert_eq!(
        header(&response, "ratelimit-policy").as_deref(),
        Some("\"default\";q=7;w=60")
    );
}
