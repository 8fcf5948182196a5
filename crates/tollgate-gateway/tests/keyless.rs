//! Routes without an API key (`api_key = "optional"` and `"none"`), keyed
//! per client IP behind trusted proxies or not, and `cost` (issue #26), in
//! memory: the scenarios of `keyless_scenarios/`, and what only memory
//! shows (metrics, refusals at load). A real upstream and HTTP client, the
//! gateway in process on a manual clock.

mod keyless_scenarios;

use tollgate_test_support::gateway::{Gateway, config};
use tollgate_test_support::loopback::Upstream;

#[tokio::test]
async fn keyless_routes_and_costs_in_memory() {
    let upstream = Upstream::start().await;
    let name = "kl_mem";
    let gateway = Gateway::start(&keyless_scenarios::routes(&upstream, name, ""), 0).await;
    keyless_scenarios::a_route_without_keys_is_limited_per_client_ip(&gateway, &upstream, name)
        .await;
    keyless_scenarios::an_optional_key_adds_the_plan(&gateway, &upstream, name).await;
    keyless_scenarios::a_cost_is_charged_to_every_limit(&gateway, &upstream, name).await;
    // Keyless requests are counted under their own key_kind and tier.
    let denials = |route: &str| {
        [
            ("plugin", "tollgate"),
            ("route", route),
            ("key_kind", "keyless"),
        ]
        .map(|(label, value)| (label, value.to_owned()))
    };
    for (route, refused) in [
        ("kl_mem_public", 2.0),
        ("kl_mem_mixed", 1.0),
        ("kl_mem_open", 2.0),
    ] {
        let labels = denials(route);
        let labels: Vec<(&str, &str)> = labels.iter().map(|(l, v)| (*l, v.as_str())).collect();
        assert_eq!(
            gateway
                .route_sample("api_rate_limit_exceeded_total", &labels)
                .await,
            Some(refused),
            "{route}"
        );
    }
    let decisions = gateway
        .route_sample(
            "tollgate_decisions_total",
            &[
                ("outcome", "allowed"),
                ("tier", "keyless"),
                ("route", "kl_mem_public"),
            ],
        )
        .await;
    // Two keyless requests and one whose key was not read.
    assert_eq!(decisions, Some(3.0));
    let plan_refusals = gateway
        .route_sample(
            "api_rate_limit_exceeded_total",
            &[
                ("plugin", "tollgate"),
                ("route", "kl_mem_heavy"),
                ("key_kind", "api_key"),
            ],
        )
        .await;
    assert_eq!(plan_refusals, Some(2.0));
}

#[tokio::test]
async fn behind_a_trusted_proxy_the_forwarded_client_picks_the_budget() {
    let upstream = Upstream::start().await;
    let gateway = Gateway::start(
        &config(&format!(
            "[client_ip]\ntrusted_proxies = [\"127.0.0.1/32\"]\n\
             [[routes]]\nname = \"kl_proxy\"\nprefix = \"/\"\nupstream = \"http://{}\"\n\
             api_key = \"none\"\nrpm = 1\nburst = 1\n",
            upstream.address
        )),
        0,
    )
    .await;
    let from = |client: &'static str| {
        gateway
            .client
            .get(gateway.url("/x"))
            .header("x-forwarded-for", client)
            .send()
    };
    assert_eq!(from("192.0.2.1").await.unwrap().status(), 200);
    assert_eq!(from("192.0.2.1").await.unwrap().status(), 429);
    // Another client behind the same proxy has its own budget; a client
    // that claims a hop beyond an untrusted one is that hop.
    assert_eq!(from("192.0.2.2").await.unwrap().status(), 200);
    assert_eq!(from("192.0.2.1, 192.0.2.3").await.unwrap().status(), 200);
    assert_eq!(from("192.0.2.1, 192.0.2.3").await.unwrap().status(), 429);
    assert_eq!(upstream.requests(), 3);
}

#[test]
fn keyless_routes_without_a_keyless_budget_are_refused_at_load() {
    let refused = |route: &str, rest: &str| {
        tollgate_gateway::ServeConfig::from_toml_str(&format!(
            "{rest}\n[[routes]]\nname = \"r\"\nprefix = \"/r\"\nupstream = \"http://h:1\"\n{route}"
        ))
        .unwrap_err()
        .to_string()
    };
    assert_eq!(
        refused("api_key = \"optional\"\nrpm = 5\nkey = \"principal\"", ""),
        "route r (/r): api_key = \"optional\" holds a request without a key to the route's \
         budget, which cannot then be keyed by the API key (principal) or its tenant: key it by \
         \"ip\" or \"header:NAME\""
    );
    assert!(refused("api_key = \"optional\"\nrpm = 5", "").contains("cannot then be keyed"));
    assert!(refused("api_key = \"none\"\nrpm = 5\nkey = \"tenant\"", "").contains("its tenant"));
    assert_eq!(
        refused("api_key = \"optional\"", ""),
        "route r (/r): api_key = \"optional\" lets a request without a key through unlimited: \
         give the route rpm keyed by \"ip\" or \"header:NAME\", or set [host] ip"
    );
    assert!(refused("api_key = \"maybe\"", "").contains("unknown variant `maybe`"));
    assert_eq!(
        refused("cost = 6", ""),
        "route r (/r): cost = 6 is more than the default policy allows at once (5): no \
         request could pass"
    );
    assert!(
        refused("cost = 3\nrpm = 60\nburst = 2", "")
            .contains("more than the route's burst allows at once (2)")
    );
    assert!(refused("cost = 0", "").contains("cost must be 1 to 4294967296"));
    assert!(refused("cost = 4294967297", "").contains("cost must be 1 to 4294967296"));
    assert!(
        refused("cost = 3", "[host]\nip = { rpm = 60, burst = 2 }")
            .contains("more than host.ip's burst allows at once (2)")
    );
    assert_eq!(
        refused(
            "",
            "[limits.tiers.keyless]\nalgorithm = \"fixed_window\"\nlimit = 1\nwindow_s = 1"
        ),
        "limits.tiers.keyless: the tier name keyless is reserved for requests without a key"
    );
    // A route that reads no keys is held to no plan: only its own budget
    // bounds its cost.
    let config = tollgate_gateway::ServeConfig::from_toml_str(
        "[[routes]]\nname = \"r\"\nprefix = \"/r\"\nupstream = \"http://h:1\"\n\
         api_key = \"none\"\nrpm = 600\nburst = 100\ncost = 50",
    );
    assert!(config.is_ok(), "{config:?}");
}

#[tokio::test]
async fn a_keyless_refusal_says_which_budget() {
    let upstream = Upstream::start().await;
    let gateway = Gateway::start(&keyless_scenarios::routes(&upstream, "kl_say", ""), 0).await;
    for _ in 0..3 {
        gateway
            .client
            .get(gateway.url("/public"))
            .send()
            .await
            .unwrap();
    }
    let refused = gateway
        .client
        .get(gateway.url("/public"))
        .send()
        .await
        .unwrap();
    assert_eq!(refused.status(), 429);
    let problem: serde_json::Value = refused.json().await.unwrap();
    assert!(
        problem["detail"]
            .as_str()
            .unwrap()
            .contains("kl_say_public"),
        "{problem}"
    );
}

#[tokio::test]
async fn the_decision_endpoint_holds_keyless_routes_to_their_budget() {
    let upstream = Upstream::start().await;
    let gateway = Gateway::start(
        &config(&format!(
            "[forward_auth]\npath = \"/_decide\"\n\
             [[routes]]\nname = \"kl_decide\"\nprefix = \"/public\"\nupstream = \"http://{}\"\n\
             api_key = \"none\"\nrpm = 60\nburst = 1\n",
            upstream.address
        )),
        0,
    )
    .await;
    let decide = || {
        gateway
            .client
            .get(gateway.url("/_decide"))
            .header("x-forwarded-uri", "/public/status")
            .send()
    };
    let allowed = decide().await.unwrap();
    assert_eq!(allowed.status(), 200);
    assert_eq!(
        tollgate_test_support::gateway::header(&allowed, "ratelimit").as_deref(),
        Some("\"kl_decide\";r=0;t=1")
    );
    assert_eq!(decide().await.unwrap().status(), 429);
    assert_eq!(upstream.requests(), 0, "a decision forwards nothing");
}
