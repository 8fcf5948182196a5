//! The listeners of `tollgate rls` as Envoy's protocol and the Go service's
//! HTTP endpoints define them: gRPC `ShouldRateLimit` with the `envoy-types`
//! client, `grpc.health.v1` (service `ratelimit`), `/json`, `/healthcheck`,
//! and malformed input answered with the Go service's errors.

use envoy_types::pb::envoy::extensions::common::ratelimit::v3::{
    RateLimitDescriptor, rate_limit_descriptor::Entry,
};
use envoy_types::pb::envoy::service::ratelimit::v3::RateLimitRequest;
use envoy_types::pb::envoy::service::ratelimit::v3::rate_limit_service_client::RateLimitServiceClient;
use tollgate_rls::Rls;
use tollgate_test_support::rls;
use tonic_health::pb::HealthCheckRequest;
use tonic_health::pb::health_client::HealthClient;

const CONFIG: &str = "\
domain: rl
descriptors:
  - key: foo
    rate_limit: {unit: day, requests_per_unit: 1}
";

async fn start() -> (Rls, tempfile::TempDir) {
    rls::start_at_noon(CONFIG, rls::arguments()).await
}

fn request(domain: &str, value: &str) -> RateLimitRequest {
    RateLimitRequest {
        domain: domain.to_owned(),
        descriptors: vec![RateLimitDescriptor {
            entries: vec![Entry {
                key: "foo".to_owned(),
                value: value.to_owned(),
            }],
            ..RateLimitDescriptor::default()
        }],
        hits_addend: 0,
    }
}

#[tokio::test]
async fn grpc_answers_and_reports_health() {
    let (rls, _directory) = start().await;
    let address = format!("http://{}", rls.server().grpc_address().unwrap());
    let mut client = RateLimitServiceClient::connect(address.clone())
        .await
        .unwrap();
    let first = client
        .should_rate_limit(request("rl", "a"))
        .await
        .unwrap()
        .into_inner();
    assert_eq!(first.overall_code, 1);
    assert_eq!(
        first.statuses[0]
            .current_limit
            .as_ref()
            .unwrap()
            .requests_per_unit,
        1
    );
    let second = client
        .should_rate_limit(request("rl", "a"))
        .await
        .unwrap()
        .into_inner();
    assert_eq!(second.overall_code, 2);

    let refused = client
        .should_rate_limit(request("", "a"))
        .await
        .unwrap_err();
    assert_eq!(refused.code(), tonic::Code::Unknown);
    assert_eq!(refused.message(), "rate limit domain must not be empty");

    let channel = tonic::transport::Channel::from_shared(address)
        .unwrap()
        .connect()
        .await
        .unwrap();
    let mut health = HealthClient::new(channel);
    for service in ["ratelimit", ""] {
        let status = health
            .check(HealthCheckRequest {
                service: service.to_owned(),
            })
            .await
            .unwrap()
            .into_inner()
            .status;
        assert_eq!(status, 1, "{service:?} is SERVING");
    }
    rls::stop(rls).await;
}

#[tokio::test]
async fn json_and_healthcheck_answer_as_the_go_service() {
    let (rls, _directory) = start().await;
    let http = rls.server().http_address().unwrap();
    let client = reqwest::Client::new();
    let body = r#"{"domain": "rl", "descriptors": [{"entries": [{"key": "foo", "value": "j"}]}]}"#;
    let first = client
        .post(format!("http://{http}/json"))
        .body(body)
        .send()
        .await
        .unwrap();
    assert_eq!(first.status(), 200);
    assert_eq!(first.headers()["content-type"], "application/json");
    let json: serde_json::Value = first.json().await.unwrap();
    assert_eq!(json["overallCode"], "OK");
    assert_eq!(json["statuses"][0]["currentLimit"]["unit"], "DAY");
    let second = client
        .post(format!("http://{http}/json"))
        .body(body)
        .send()
        .await
        .unwrap();
    assert_eq!(second.status(), 429);
    let json: serde_json::Value = second.json().await.unwrap();
    assert_eq!(json["overallCode"], "OVER_LIMIT");

    // 400 with the Go service's status text, then why (which it only logs);
    // never a value of the body (a descriptor's value may be a key).
    for (bad, why) in [
        (
            "{",
            "the body is not a RateLimitRequest (JSON line 1, column 1)",
        ),
        ("[]", "rate limit domain must not be empty"),
        (
            r#"{"domain": "sk_live_secret", "descriptors": 5}"#,
            "the body is not a RateLimitRequest (JSON line 1, column 45)",
        ),
        (r#"{"domain": ""}"#, "rate limit domain must not be empty"),
        // An unknown field, found as its name ends (column 7).
        (
            r#"{"nope": 1}"#,
            "the body is not a RateLimitRequest (JSON line 1, column 7)",
        ),
    ] {
        let answer = client
            .post(format!("http://{http}/json"))
            .body(bad)
            .send()
            .await
            .unwrap();
        assert_eq!(answer.status(), 400, "{bad}");
        assert_eq!(
            answer.text().await.unwrap(),
            format!("Bad Request: {why}\n")
        );
    }
    let too_big = vec![b' '; tollgate_rls::server::MAX_JSON_BODY_BYTES + 1];
    let answer = client
        .post(format!("http://{http}/json"))
        .body(too_big)
        .send()
        .await
        .unwrap();
    assert_eq!(answer.status(), 400);

    let health = client
        .get(format!("http://{http}/healthcheck"))
        .send()
        .await
        .unwrap();
    assert_eq!(health.status(), 200);
    assert_eq!(health.text().await.unwrap(), "OK");
    let missing = client
        .get(format!("http://{http}/nothing"))
        .send()
        .await
        .unwrap();
    assert_eq!(missing.status(), 404);

    let debug = rls.server().debug_address().unwrap();
    let stats = client
        .get(format!("http://{debug}/stats"))
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    assert!(
        stats.contains("ratelimit.service.rate_limit.rl.foo.total_hits: 2\n"),
        "{stats}"
    );
    let config = client
        .get(format!("http://{debug}/rlconfig"))
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    assert_eq!(
        config,
        "rl.foo: unit=DAY requests_per_unit=1, shadow_mode: false, quota_mode: false\n"
    );
    rls::stop(rls).await;
}

#[tokio::test]
async fn json_says_why_while_no_configuration_is_loaded() {
    // A YAML that does not load: the service starts without a
    // configuration, and /json says so in the Go service's words.
    let (rls, _directory) = rls::start_at_noon("domain: [", rls::arguments()).await;
    let http = rls.server().http_address().unwrap();
    let answer = reqwest::Client::new()
        .post(format!("http://{http}/json"))
        .body(r#"{"domain": "rl", "descriptors": [{"entries": [{"key": "foo", "value": "j"}]}]}"#)
        .send()
        .await
        .unwrap();
    assert_eq!(answer.status(), 400);
    assert_eq!(
        answer.text().await.unwrap(),
        "Bad Request: no rate limit configuration loaded\n"
    );
    rls::stop(rls).await;
}
