//! Malformed and oversized requests over real gRPC: each gets the Go
//! service's error (gRPC `UNKNOWN` with its message), tonic's `OUT_OF_RANGE`
//! for a message past grpc-go's 4 MiB bound (grpc-go says
//! `RESOURCE_EXHAUSTED`; to Envoy both are a failed call), or an answer;
//! never a panic (the server still answers afterwards, and no `internal
//! error`).

use std::time::Duration;

use envoy_types::pb::envoy::extensions::common::ratelimit::v3::{
    RateLimitDescriptor, rate_limit_descriptor::Entry, rate_limit_descriptor::RateLimitOverride,
};
use envoy_types::pb::envoy::service::ratelimit::v3::RateLimitRequest;
use envoy_types::pb::envoy::service::ratelimit::v3::rate_limit_service_client::RateLimitServiceClient;
use tollgate_rls::Rls;
use tollgate_test_support::rls;
use tonic::transport::Channel;

const CONFIG: &str = "\
domain: rl
descriptors:
  - key: foo
    rate_limit: {unit: day, requests_per_unit: 1000000}
";

async fn start() -> (Rls, tempfile::TempDir, RateLimitServiceClient<Channel>) {
    let directory = tempfile::tempdir().unwrap();
    std::fs::write(directory.path().join("rl.yaml"), CONFIG).unwrap();
    let mut arguments = rls::arguments();
    arguments.config = Some(directory.path().to_owned());
    let rls = Rls::start_polling(&arguments, Duration::from_millis(100))
        .await
        .unwrap();
    let address = format!("http://{}", rls.server().grpc_address().unwrap());
    // The client may send and receive as much as the test needs; the server
    // keeps its own 4 MiB bound.
    let client = RateLimitServiceClient::connect(address)
        .await
        .unwrap()
        .max_decoding_message_size(64 << 20)
        .max_encoding_message_size(64 << 20);
    (rls, directory, client)
}

fn entry(key: &str, value: &str) -> Entry {
    Entry {
        key: key.to_owned(),
        value: value.to_owned(),
    }
}

fn request(domain: &str, descriptors: Vec<Vec<Entry>>) -> RateLimitRequest {
    RateLimitRequest {
        domain: domain.to_owned(),
        descriptors: descriptors
            .into_iter()
            .map(|entries| RateLimitDescriptor {
                entries,
                ..RateLimitDescriptor::default()
            })
            .collect(),
        hits_addend: 0,
    }
}

#[tokio::test]
async fn malformed_requests_get_the_go_services_errors() {
    let (rls, _directory, mut client) = start().await;
    let refused = |domain: &str, descriptors| request(domain, descriptors);

    let cases = [
        (
            refused("", vec![vec![entry("foo", "a")]]),
            "rate limit domain must not be empty",
        ),
        (
            refused("rl", vec![]),
            "rate limit descriptor list must not be empty",
        ),
    ];
    for (request, message) in cases {
        let status = client.should_rate_limit(request).await.unwrap_err();
        assert_eq!(
            (status.code(), status.message()),
            (tonic::Code::Unknown, message)
        );
    }

    // An override with unit UNKNOWN (the Go service panics in
    // `UnitToDivider`): refused with a message.
    let mut with_override = request("rl", vec![vec![entry("foo", "a")]]);
    with_override.descriptors[0].limit = Some(RateLimitOverride {
        requests_per_unit: 1,
        unit: 0,
    });
    let status = client.should_rate_limit(with_override).await.unwrap_err();
    assert_eq!(
        (status.code(), status.message()),
        (
            tonic::Code::Unknown,
            "descriptor 0: rate limit override has no unit"
        )
    );

    // An entry without a key, and a descriptor without entries, match no
    // limit: OK, as in the Go service.
    let answer = client
        .should_rate_limit(request("rl", vec![vec![entry("", "a")], vec![]]))
        .await
        .unwrap()
        .into_inner();
    assert_eq!(answer.overall_code, 1);
    assert_eq!(answer.statuses.len(), 2);
    assert!(
        answer
            .statuses
            .iter()
            .all(|s| s.code == 1 && s.current_limit.is_none())
    );

    // The service still answers, and no call panicked.
    let fine = client
        .should_rate_limit(request("rl", vec![vec![entry("foo", "a")]]))
        .await
        .unwrap()
        .into_inner();
    assert_eq!(fine.overall_code, 1);
    let stats = rls.service().stats();
    assert_eq!(
        stats["ratelimit.service.call.should_rate_limit.service_error"],
        3
    );
    rls::stop(rls).await;
}

#[tokio::test]
async fn large_requests_are_answered_or_refused_by_size() {
    let (rls, _directory, mut client) = start().await;

    // 5,000 descriptors: one status each.
    let many: Vec<Vec<Entry>> = (0..5_000)
        .map(|i| vec![entry("foo", &format!("v{i}"))])
        .collect();
    let answer = client
        .should_rate_limit(request("rl", many))
        .await
        .unwrap()
        .into_inner();
    assert_eq!(answer.overall_code, 1);
    assert_eq!(answer.statuses.len(), 5_000);
    assert_eq!(answer.statuses[4_999].limit_remaining, 999_999);

    // A 3 MiB value fits in grpc-go's 4 MiB message bound: answered.
    let big = "v".repeat(3 << 20);
    let answer = client
        .should_rate_limit(request("rl", vec![vec![entry("foo", &big)]]))
        .await
        .unwrap()
        .into_inner();
    assert_eq!(answer.overall_code, 1);
    assert_eq!(answer.statuses[0].limit_remaining, 999_999);

    // 5 MiB: refused before decoding, as grpc-go refuses it (with its own
    // code).
    let huge = "v".repeat(5 << 20);
    let status = client
        .should_rate_limit(request("rl", vec![vec![entry("foo", &huge)]]))
        .await
        .unwrap_err();
    assert_eq!(status.code(), tonic::Code::OutOfRange, "{status:?}");
    assert!(
        status.message().contains("the limit is: 4194304 bytes"),
        "{status:?}"
    );

    // Still serving.
    let fine = client
        .should_rate_limit(request("rl", vec![vec![entry("foo", "a")]]))
        .await
        .unwrap()
        .into_inner();
    assert_eq!(fine.overall_code, 1);
    rls::stop(rls).await;
}
