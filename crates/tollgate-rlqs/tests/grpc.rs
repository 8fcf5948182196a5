//! `StreamRateLimitQuotas` on the wire, with tonic's client and the
//! `envoy-types` messages: the answers to well-formed reports, the reports
//! Envoy 1.40 sends although the proto forbids them, malformed ones, and
//! the `/metrics` and `/rlqs` pages. The server's demand is read on a manual
//! clock.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use envoy_types::pb::envoy::r#type::v3::rate_limit_strategy::{BlanketRule, Strategy};
use envoy_types::pb::envoy::service::rate_limit_quota::v3::rate_limit_quota_response::bucket_action::BucketAction;
use envoy_types::pb::envoy::service::rate_limit_quota::v3::rate_limit_quota_service_client::RateLimitQuotaServiceClient;
use envoy_types::pb::envoy::service::rate_limit_quota::v3::rate_limit_quota_usage_reports::BucketQuotaUsage;
use envoy_types::pb::envoy::service::rate_limit_quota::v3::{
    BucketId, RateLimitQuotaResponse, RateLimitQuotaUsageReports,
};
use tokio::sync::mpsc;
use tokio_stream::wrappers::ReceiverStream;
use tollgate_core::ManualClock;
use tollgate_rlqs::{Rlqs, RlqsArguments};
use tollgate_test_support::rlqs;
use tonic::Streaming;

const YAML: &str = "
domain: edge
descriptors:
  - key: name
    value: shared
    rate_limit: {unit: second, requests_per_unit: 100}
  - key: route
    value: search
    descriptors:
      - key: tenant
        detailed_metric: true
        rate_limit: {unit: minute, requests_per_unit: 600}
";

async fn start(
    adjust: impl FnOnce(&mut RlqsArguments),
) -> (Rlqs, tempfile::TempDir, Arc<ManualClock>) {
    let clock = Arc::new(ManualClock::new(1_000_000_000_000));
    let (rlqs, directory) = rlqs::start(YAML, clock.clone(), adjust).await;
    (rlqs, directory, clock)
}

/// An open stream: its reports' sender and its answers.
struct Stream {
    reports: mpsc::Sender<RateLimitQuotaUsageReports>,
    answers: Streaming<RateLimitQuotaResponse>,
}

async fn open(rlqs: &Rlqs) -> Stream {
    let address = format!("http://{}", rlqs.listening().grpc.unwrap());
    let mut client = RateLimitQuotaServiceClient::connect(address).await.unwrap();
    let (reports, outgoing) = mpsc::channel(16);
    let answers = client
        .stream_rate_limit_quotas(ReceiverStream::new(outgoing))
        .await
        .unwrap()
        .into_inner();
    Stream { reports, answers }
}

fn usage(entries: &[(&str, &str)], allowed: u64, denied: u64) -> BucketQuotaUsage {
    BucketQuotaUsage {
        bucket_id: Some(BucketId {
            bucket: entries
                .iter()
                .map(|&(key, value)| (key.to_owned(), value.to_owned()))
                .collect::<HashMap<_, _>>(),
        }),
        time_elapsed: None,
        num_requests_allowed: allowed,
        num_requests_denied: denied,
    }
}

fn report(domain: &str, usages: Vec<BucketQuotaUsage>) -> RateLimitQuotaUsageReports {
    RateLimitQuotaUsageReports {
        domain: domain.to_owned(),
        bucket_quota_usages: usages,
    }
}

/// What an answer assigns: per bucket action, `(max_tokens,
/// tokens_per_fill, fill_interval seconds, ttl seconds)` for a token
/// bucket, or the blanket rule's name.
fn describe(answer: &RateLimitQuotaResponse) -> Vec<String> {
    answer
        .bucket_action
        .iter()
        .map(|action| match action.bucket_action.as_ref().unwrap() {
            BucketAction::AbandonAction(_) => "abandon".to_owned(),
            BucketAction::QuotaAssignmentAction(assignment) => {
                let ttl = assignment.assignment_time_to_live.unwrap().seconds;
                match assignment
                    .rate_limit_strategy
                    .as_ref()
                    .unwrap()
                    .strategy
                    .as_ref()
                    .unwrap()
                {
                    Strategy::TokenBucket(bucket) => format!(
                        "bucket {} {} {}s ttl {ttl}s",
                        bucket.max_tokens,
                        bucket.tokens_per_fill.unwrap().value,
                        bucket.fill_interval.unwrap().seconds
                    ),
                    Strategy::BlanketRule(rule) => format!(
                        "{} ttl {ttl}s",
                        BlanketRule::try_from(*rule).unwrap().as_str_name()
                    ),
                    Strategy::RequestsPerTimeUnit(_) => "requests per time unit".to_owned(),
                }
            }
        })
        .collect()
}

async fn next(stream: &mut Stream) -> Vec<String> {
    let answer = tokio::time::timeout(Duration::from_secs(5), stream.answers.message())
        .await
        .expect("an answer within 5 s")
        .unwrap()
        .unwrap();
    describe(&answer)
}

async fn page(rlqs: &Rlqs, path: &str) -> String {
    let address = rlqs.listening().debug.unwrap();
    reqwest::get(format!("http://{address}{path}"))
        .await
        .unwrap()
        .text()
        .await
        .unwrap()
}

#[tokio::test]
async fn each_report_is_answered_with_an_assignment_per_bucket() {
    let (rlqs, _directory, _clock) = start(|_| {}).await;
    let mut stream = open(&rlqs).await;
    stream
        .reports
        .send(report(
            "edge",
            vec![
                usage(&[("name", "shared")], 40, 10),
                usage(&[("tenant", "acme"), ("route", "search")], 3, 0),
                usage(&[("name", "nothing")], 1, 0),
            ],
        ))
        .await
        .unwrap();
    // Alone: all of 100 a second (burst 100). 600 a minute is a counted
    // fixed window: at 1,000 s the window [960 s, 1,020 s) has 20 s left and
    // 597 of its 600 (3 reported): 597 × 60 / 20 = 1,791 a minute, a burst
    // of a second of it (29.85, so 30). No descriptor: ALLOW_ALL. TTL 15 s.
    assert_eq!(
        next(&mut stream).await,
        vec![
            "bucket 100 100 1s ttl 15s",
            "bucket 30 1791 60s ttl 15s",
            "ALLOW_ALL ttl 15s"
        ]
    );
    let json: serde_json::Value = serde_json::from_str(&page(&rlqs, "/rlqs").await).unwrap();
    let buckets: Vec<&str> = json["buckets"]
        .as_array()
        .unwrap()
        .iter()
        .map(|bucket| bucket["bucket"].as_str().unwrap())
        .collect();
    // Values only where detailed_metric says so.
    assert_eq!(
        buckets,
        vec!["name=*", "name=*", "route=search,tenant=acme"]
    );
    let metrics = page(&rlqs, "/metrics").await;
    for line in [
        "# HELP tollgate_rlqs_streams ",
        "tollgate_rlqs_streams{domain=\"edge\"} 1",
        "tollgate_rlqs_buckets{domain=\"edge\"} 3",
        "tollgate_rlqs_reported_allowed_total{domain=\"edge\"} 44",
        "tollgate_rlqs_reported_denied_total{domain=\"edge\"} 10",
        "tollgate_rlqs_assignments_total{domain=\"edge\"} 3",
    ] {
        assert!(metrics.contains(line), "{line} not in\n{metrics}");
    }
    assert!(!metrics.contains("acme"), "a bucket's value in /metrics");
    rlqs.shutdown_within(Duration::from_millis(200)).await;
}

#[tokio::test]
async fn reports_envoy_sends_though_the_proto_forbids_them_are_taken() {
    let (rlqs, _directory, _clock) = start(|_| {}).await;
    let mut stream = open(&rlqs).await;
    // No buckets (Envoy holding none), then counts near 2^64 with no
    // time_elapsed: the stream stays open and the second is answered.
    stream.reports.send(report("edge", vec![])).await.unwrap();
    stream
        .reports
        .send(report(
            "edge",
            vec![usage(&[("name", "shared")], u64::MAX, u64::MAX)],
        ))
        .await
        .unwrap();
    assert_eq!(next(&mut stream).await, vec!["bucket 100 100 1s ttl 15s"]);
    let metrics = page(&rlqs, "/metrics").await;
    assert!(
        metrics.contains(&format!(
            "tollgate_rlqs_reported_allowed_total{{domain=\"edge\"}} {}",
            u64::MAX
        )),
        "{metrics}"
    );
    rlqs.shutdown_within(Duration::from_millis(200)).await;
}

#[tokio::test]
async fn malformed_buckets_are_left_out_and_counted() {
    let (rlqs, _directory, _clock) = start(|_| {}).await;
    let mut stream = open(&rlqs).await;
    let many: Vec<(String, String)> = (0..1000)
        .map(|index| (format!("key{index}"), "v".to_owned()))
        .collect();
    let many: Vec<(&str, &str)> = many.iter().map(|(k, v)| (k.as_str(), v.as_str())).collect();
    let long = "v".repeat(1 << 20);
    stream
        .reports
        .send(report(
            "edge",
            vec![
                usage(&[], 1, 0),
                usage(&many, 1, 0),
                usage(&[("name", &long)], 1, 0),
                usage(&[("name", "shared")], 1, 0),
            ],
        ))
        .await
        .unwrap();
    assert_eq!(next(&mut stream).await, vec!["bucket 100 100 1s ttl 15s"]);
    let metrics = page(&rlqs, "/metrics").await;
    assert!(
        metrics.contains("tollgate_rlqs_refused_total{domain=\"edge\"} 3"),
        "{metrics}"
    );
    rlqs.shutdown_within(Duration::from_millis(200)).await;
}

#[tokio::test]
async fn a_report_without_a_domain_ends_its_stream_with_invalid_argument() {
    let (rlqs, _directory, _clock) = start(|_| {}).await;
    let mut stream = open(&rlqs).await;
    stream
        .reports
        .send(report("", vec![usage(&[("name", "shared")], 1, 0)]))
        .await
        .unwrap();
    let status = tokio::time::timeout(Duration::from_secs(5), stream.answers.message())
        .await
        .unwrap()
        .unwrap_err();
    assert_eq!(status.code(), tonic::Code::InvalidArgument);
    assert_eq!(status.message(), "a usage report has no domain");
    rlqs.shutdown_within(Duration::from_millis(200)).await;
}

#[tokio::test]
async fn buckets_past_the_cap_are_refused_and_not_kept() {
    let (rlqs, _directory, _clock) = start(|arguments| {
        arguments.max_buckets_per_stream = 2;
    })
    .await;
    let mut stream = open(&rlqs).await;
    let usages = (0..5)
        .map(|index| usage(&[("name", &format!("invented-{index}"))], 1, 0))
        .collect();
    stream.reports.send(report("edge", usages)).await.unwrap();
    assert_eq!(
        next(&mut stream).await,
        vec![
            "ALLOW_ALL ttl 15s",
            "ALLOW_ALL ttl 15s",
            "DENY_ALL ttl 15s",
            "DENY_ALL ttl 15s",
            "DENY_ALL ttl 15s"
        ]
    );
    let metrics = page(&rlqs, "/metrics").await;
    assert!(
        metrics.contains("tollgate_rlqs_buckets{domain=\"edge\"} 2"),
        "{metrics}"
    );
    assert!(
        metrics.contains("tollgate_rlqs_over_cap_total{domain=\"edge\"} 3"),
        "{metrics}"
    );
    rlqs.shutdown_within(Duration::from_millis(200)).await;
}

#[tokio::test]
async fn a_closed_streams_part_goes_to_the_others_at_once() {
    let (rlqs, _directory, clock) = start(|_| {}).await;
    let mut first = open(&rlqs).await;
    let mut second = open(&rlqs).await;
    let shared = || report("edge", vec![usage(&[("name", "shared")], 250, 0)]);
    first.reports.send(shared()).await.unwrap();
    assert_eq!(next(&mut first).await, vec!["bucket 100 100 1s ttl 15s"]);
    // The second gets what the first leaves: nothing, for now.
    second.reports.send(shared()).await.unwrap();
    assert_eq!(next(&mut second).await, vec!["DENY_ALL ttl 15s"]);
    // 5 s later the first reports again, 50 a second like the second: 50 of
    // 100, freeing 50, sent to the second at once.
    clock.advance(Duration::from_secs(5));
    first.reports.send(shared()).await.unwrap();
    assert_eq!(next(&mut first).await, vec!["bucket 50 50 1s ttl 15s"]);
    assert_eq!(next(&mut second).await, vec!["bucket 50 50 1s ttl 15s"]);
    // The second's stream ends: its 50 go back to the first at once.
    drop(second);
    assert_eq!(next(&mut first).await, vec!["bucket 100 100 1s ttl 15s"]);
    rlqs.shutdown_within(Duration::from_millis(200)).await;
}

#[tokio::test]
async fn a_bucket_listed_twice_in_a_report_counts_once() {
    let (rlqs, _directory, _clock) = start(|_| {}).await;
    let mut stream = open(&rlqs).await;
    stream
        .reports
        .send(report(
            "edge",
            vec![
                usage(&[("name", "shared")], 200, 0),
                usage(&[("name", "shared")], 50, 0),
            ],
        ))
        .await
        .unwrap();
    // One bucket, one answer; its counts added: 250 over 5 s, 50 a second.
    assert_eq!(next(&mut stream).await, vec!["bucket 100 100 1s ttl 15s"]);
    let page: serde_json::Value = serde_json::from_str(&page(&rlqs, "/rlqs").await).unwrap();
    assert_eq!(page["buckets"][0]["streams"][0]["demand_per_s"], 50.0);
    rlqs.shutdown_within(Duration::from_millis(200)).await;
}

#[tokio::test]
async fn streams_past_the_cap_are_refused_with_resource_exhausted() {
    let (rlqs, _directory, _clock) = start(|arguments| {
        arguments.max_streams = 1;
    })
    .await;
    let mut first = open(&rlqs).await;
    first
        .reports
        .send(report("edge", vec![usage(&[("name", "shared")], 1, 0)]))
        .await
        .unwrap();
    assert_eq!(next(&mut first).await, vec!["bucket 100 100 1s ttl 15s"]);
    let address = format!("http://{}", rlqs.listening().grpc.unwrap());
    let mut client = RateLimitQuotaServiceClient::connect(address).await.unwrap();
    let (_reports, outgoing) = mpsc::channel::<RateLimitQuotaUsageReports>(1);
    let refused = client
        .stream_rate_limit_quotas(ReceiverStream::new(outgoing))
        .await
        .unwrap_err();
    assert_eq!(refused.code(), tonic::Code::ResourceExhausted);
    let metrics = page(&rlqs, "/metrics").await;
    assert!(
        metrics.contains("tollgate_rlqs_refused_streams_total 1"),
        "{metrics}"
    );
    assert!(
        metrics.contains("tollgate_rlqs_config_loaded 1"),
        "{metrics}"
    );
    rlqs.shutdown_within(Duration::from_millis(200)).await;
}
