//! `[responses] rate_limit_headers`, over real HTTP: each set sends its
//! headers and no others, on an admitted response, a refusal and the
//! decision endpoint's answer; a refusal keeps its `Retry-After` and
//! problem+json body whatever the set; a response held to a plan and a
//! route budget sends the set's headers of both. The plan: a fixed window
//! of 2 per 60 s, the clock at the start of a minute, so the second request
//! leaves `r=0;t=60` and the third waits 60 s.

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

/// A plan and a route budget (`rpm = 60`: a token bucket of 60, one token a
/// second): `"ietf"` lists both, `"x-ratelimit"` gives the binding one's
/// (the plan's: 1 left of 2, against 59 of 60).
#[tokio::test]
async fn a_plan_and_a_route_budget_send_the_sets_headers_of_both() {
    for (set, route) in [("ietf", "resp_both_ietf"), ("x-ratelimit", "resp_both_x")] {
        let upstream = Upstream::start().await;
        let toml = gateway::config(&format!(
            "[limits.default_policy]\nalgorithm = \"fixed_window\"\nlimit = 2\nwindow_s = 60\n\
             [responses]\nrate_limit_headers = \"{set}\"\n\
             [[routes]]\nname = \"{route}\"\nprefix = \"/\"\nupstream = \"http://{}\"\nrpm = 60\n",
            upstream.address
        ));
        let gateway = Gateway::start(&toml, START_S).await;
        let response = gateway.get("/x", "sk_a").await;
        assert_eq!(response.status(), 200, "{set}");
        if set == "ietf" {
            assert_eq!(sent(&response), IETF);
            assert_eq!(
                header(&response, "ratelimit-policy").as_deref(),
                Some(format!("\"default\";q=2;w=60, \"{route}\";q=60;w=60").as_str())
            );
            assert_eq!(
                header(&response, "ratelimit").as_deref(),
                Some(format!("\"default\";r=1;t=60, \"{route}\";r=59;t=1").as_str())
            );
        } else {
            assert_eq!(sent(&response), X_RATELIMIT);
            for name in X_RATELIMIT {
                assert_eq!(header(&response, name), Some(value(name, 1)), "{name}");
            }
        }
    }
}

/// A reload changes the set at once, and keeps the key's state: the second
/// request after `"all"`, under `"none"`, sends no header, and the third,
/// under `"ietf"`, shows the two used.
#[tokio::test]
async fn a_reload_changes_the_set() {
    let upstream = Upstream::start().await;
    let path = std::path::PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("responses-reload.toml");
    std::fs::write(&path, config(&upstream, "all")).unwrap();
    let loaded = tollgate_gateway::ServeConfig::from_file(&path).unwrap();
    let gateway = Gateway::start_with(loaded, Some(path.clone()), START_S).await;
    let first = gateway.get("/x", "sk_a").await;
    assert_eq!(sent(&first), [IETF.as_slice(), &X_RATELIMIT].concat());
    std::fs::write(&path, config(&upstream, "none")).unwrap();
    gateway.running.reload().unwrap();
    let second = gateway.get("/x", "sk_a").await;
    assert_eq!(second.status(), 200);
    assert_eq!(sent(&second), Vec::<&str>::new());
    std::fs::write(&path, config(&upstream, "ietf")).unwrap();
    gateway.running.reload().unwrap();
    let third = gateway.get("/x", "sk_a").await;
    assert_eq!(third.status(), 429);
    assert_eq!(sent(&third), IETF);
    assert_eq!(
        header(&third, "ratelimit").as_deref(),
        Some("\"default\";r=0;t=60")
    );
}
