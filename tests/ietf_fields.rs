//! One policy, the same IETF RateLimit fields from every adapter: the
//! gateway (`tollgate serve`, a route budget), the tower layer and
//! `tollgate rls` (the IETF extension), all written by core's one writer.
//!
//! The policy: a token bucket of 60 per 60 s with a burst of 5, named
//! `orders`. It advertises its burst over the time an empty bucket takes to
//! fill: `q=5`, `w = 5 * 60 / 60 = 5` s. After one request at a standing
//! clock, 4 tokens are left, and the bucket is whole again once one token has
//! come back, 60 / 60 = 1 s later: `r=4;t=1`.
//!
//! The gateway and `tollgate rls` also carry the request's other limits in
//! the same Lists; each test finds the `orders` item among them.

use serde_json::{Value, json};
use tollgate_core::ManualClock;
use tollgate_test_support::gateway::{Gateway, config};
use tollgate_test_support::loopback::Upstream;
use tollgate_tower::{Budget, HostLimits, KeySelector, Tenant};
use tower::{Service, ServiceExt};

const POLICY: &str = "\"orders\";q=5;w=5";
const STATE: &str = "\"orders\";r=4;t=1";

/// The item of a List field that names `name`.
fn item<'a>(list: &'a str, name: &str) -> Option<&'a str> {
    list.split(", ")
        .find(|item| item.starts_with(&format!("\"{name}\";")))
}

async fn tower_fields(route: &str) -> (String, String) {
    let limits = HostLimits::builder()
        .clock(ManualClock::new(0))
        .build()
        .unwrap();
    let layer = limits
        .route(route)
        .budget(Budget::new(60, 5).unwrap())
        .unwrap()
        .key(KeySelector::Tenant);
    let mut service =
        tower::ServiceBuilder::new()
            .layer(layer)
            .service_fn(|_request: http::Request<()>| async {
                Ok::<_, std::convert::Infallible>(http::Response::new(()))
            });
    let mut request = http::Request::new(());
    request.extensions_mut().insert(Tenant("acme".to_owned()));
    let response = service.ready().await.unwrap().call(request).await.unwrap();
    let field = |name: &str| response.headers()[name].to_str().unwrap().to_owned();
    (field("ratelimit-policy"), field("ratelimit"))
}

#[tokio::test]
async fn the_tower_layer_writes_the_fields() {
    assert_eq!(
        tower_fields("orders").await,
        (POLICY.to_owned(), STATE.to_owned())
    );
}

#[tokio::test]
async fn the_gateway_writes_the_same_fields_for_its_route_budget() {
    let upstream = Upstream::start().await;
    let gateway = Gateway::start(
        &config(&format!(
            "[[routes]]\nname = \"orders\"\nprefix = \"/orders\"\nupstream = \"http://{}\"\n\
             rpm = 60\nburst = 5\nkey = \"principal\"\n",
            upstream.address
        )),
        600,
    )
    .await;
    let response = gateway.get("/orders", "sk_ietf").await;
    assert_eq!(response.status(), 200);
    let field = |name: &str| response.headers()[name].to_str().unwrap().to_owned();
    let (policy, state) = (field("ratelimit-policy"), field("ratelimit"));
    assert_eq!(item(&policy, "orders"), Some(POLICY), "{policy}");
    assert_eq!(item(&state, "orders"), Some(STATE), "{state}");
}

/// `tollgate rls`'s answer to one hit of `key` (IETF extension on), through
/// its steps harness on a clock standing at 1,000 s.
fn rls_fields(key: &str) -> Vec<(String, String)> {
    let config = "domain: d\ndescriptors:\n  - key: orders\n    rate_limit: {name: orders, \
                  algorithm: token_bucket, requests_per_unit: 60, window: 60s, burst: 5}\n  \
                  - key: cafe\n    rate_limit: {name: \"caf\u{e9}\", algorithm: token_bucket, \
                  requests_per_unit: 60, window: 60s, burst: 5}\n";
    let settings = tollgate_rls::ServiceSettings {
        extensions: tollgate_rls::Extensions {
            ietf_headers: true,
            ..tollgate_rls::Extensions::default()
        },
        ..tollgate_rls::ServiceSettings::default()
    };
    let steps = json!([{"now": 1000, "request": {"domain": "d", "descriptors": [
        {"entries": [{"key": key, "value": "x"}]}
    ]}}]);
    let output = tollgate_rls::harness::run(
        vec![("d.yaml".to_owned(), config.to_owned())],
        settings,
        tollgate_rls::LoaderOptions {
            merge_domains: false,
            extensions: true,
        },
        &serde_json::to_vec(&steps).unwrap(),
    )
    .unwrap();
    let output: Value = serde_json::from_slice(&output).unwrap();
    output[0]["response"]["responseHeadersToAdd"]
        .as_array()
        .unwrap()
        .iter()
        .map(|header| {
            (
                header["key"].as_str().unwrap().to_owned(),
                header["value"].as_str().unwrap().to_owned(),
            )
        })
        .collect()
}

#[test]
fn the_rate_limit_service_writes_the_same_fields() {
    assert_eq!(
        rls_fields("orders"),
        [
            ("RateLimit-Policy".to_owned(), POLICY.to_owned()),
            ("RateLimit".to_owned(), STATE.to_owned()),
        ]
    );
}

#[tokio::test]
async fn a_name_outside_printable_ascii_is_written_alike() {
    // 'é' is outside printable ASCII: each such character becomes '_'.
    let (policy, state) = tower_fields("caf\u{e9}").await;
    assert_eq!(policy, "\"caf_\";q=5;w=5");
    assert_eq!(state, "\"caf_\";r=4;t=1");
    assert_eq!(
        rls_fields("cafe"),
        [
            ("RateLimit-Policy".to_owned(), policy),
            ("RateLimit".to_owned(), state),
        ]
    );
}
