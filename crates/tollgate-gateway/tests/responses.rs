//! `[responses] rate_limit_headers`, over real HTTP: each set sends its
//! headers and no others, on an admitted response, a refusal and the
//! decision endpoint's answer; a refusal keeps its `Retry-After` and
//! problem+json body whatever the set. The plan: a fixed window of 2 per
//! 60 s, the clock at the start of a minute, so the second request leaves
//! `r=0;t=60` and the third waits 60 s.

use tollgate_test_support::gateway::{self, Gateway, header};
use tollgate_test_support::loopback::Upstream;

const START_S: u64 = 6_000_000_000;

const IETF: [&str; 2] = ["ratelimit-policy", "ratelimit"];
const X_RATELIMIT: [&str; 3] = [
    "x-ratelimit-limit",
    "x-ratelimit-remaining",
    "x-ratelimit-reset",
];

fn config(upstream: &Upstream, set: &str) -> String {
    gateway::config(&format!(
        "[limits.default_policy]\nalgorithm = \"fixed_window\"\nlimit = 2\nwindow_s = 60\n\
         [responses]\nrate_limit_headers = \"{set}\"\n\
         [forward_auth]\npath = \"/_decide\"\n\
         [[routes]]\nname = \"resp_{set}\"\nprefix = \"/\"\nupstream = \"http://{}\"\n",
        upstream.address
    ))
}

/// The rate-limit headers `response` carries, of the five.
fn sent(response: &reqwest::Response) -> Vec<&'static str> {
    IETF.iter()
        .chain(&X_RATELIMIT)
        .copied()
        .filter(|name| response.headers().contains_key(*name))
        .collect()
}

/// The values a fixed window of 2 per 60 s shows with `remaining` left, by
/// name: each header's value by hand.
fn value(name: &str, remaining: u64) -> String {
    match name {
        "ratelimit-policy" => "\"default\";q=2;w=60".to_owned(),
        "ratelimit" => format!("\"default\";r={remaining};t=60"),
        "x-ratelimit-limit" => "2".to_owned(),
        "x-ratelimit-remaining" => remaining.to_string(),
        "x-ratelimit-reset" => "60".to_owned(),
        other => panic!("not a rate-limit header: {other}"),
    }
}

async fn each_response_carries_its_set(set: &str, expected: &[&'static str]) {
    let upstream = Upstream::start().await;
    let gateway = Gateway::start(&config(&upstream, set), START_S).await;
    let first = gateway.get("/x", "sk_a").await;
    assert_eq!(first.status(), 200, "{set}");
    assert_eq!(sent(&first), expected, "{set}");
    for name in expected {
        assert_eq!(header(&first, name), Some(value(name, 1)), "{set} {name}");
    }
    // The decision endpoint answers as proxying does.
    let decided = gateway
        .client
        .get(gateway.url("/_decide"))
        .header("authorization", "Bearer sk_a")
        .header("x-forwarded-uri", "/x")
        .send()
        .await
        .unwrap();
    assert_eq!(decided.status(), 200, "{set}");
    assert_eq!(sent(&decided), expected, "{set}");
    for name in expected {
        assert_eq!(header(&decided, name), Some(value(name, 0)), "{set} {name}");
    }
    let refused = gateway.get("/x", "sk_a").await;
    assert_eq!(refused.status(), 429, "{set}");
    assert_eq!(sent(&refused), expected, "{set}");
    for name in expected {
        assert_eq!(header(&refused, name), Some(value(name, 0)), "{set} {name}");
    }
    assert_eq!(header(&refused, "retry-after").as_deref(), Some("60"));
    let body: serde_json::Value = refused.json().await.unwrap();
    assert_eq!(body["retry_after"], 60);
    assert_eq!(upstream.requests(), 1, "{set}");
}

#[tokio::test]
async fn all_sends_every_header() {
    each_response_carries_its_set("all", &[IETF.as_slice(), &X_RATELIMIT].concat()).await;
}

#[tokio::test]
async fn ietf_sends_the_drafts_fields_only() {
    each_response_carries_its_set("ietf", &IETF).await;
}

#[tokio::test]
async fn x_ratelimit_sends_the_x_headers_only() {
    each_response_carries_its_set("x-ratelimit", &X_RATELIMIT).await;
}

#[tokio::test]
async fn none_sends_no_rate_limit_header() {
    each_response_carries_its_set("none", &[]).await;
}
