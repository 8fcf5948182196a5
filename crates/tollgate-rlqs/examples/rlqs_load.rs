//! The report load generator of `bench/rlqs.sh`: `--streams` streams, as
//! many Envoys, each reporting the same `--buckets` buckets (`{key:
//! bucket-N}`) in every report, closed loop: a stream sends its next report
//! when the answer to its last has come. Counts the reports answered in
//! `--seconds` after a `--warmup`, and prints one line of `name=value`
//! fields: `reports_per_second` and `bucket_reports_per_second` (reports ×
//! buckets).
//!
//! `cargo run --release -p tollgate-rlqs --example rlqs_load -- --target http://127.0.0.1:8081`

use std::collections::HashMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use clap::Parser;
use envoy_types::pb::envoy::service::rate_limit_quota::v3::rate_limit_quota_service_client::RateLimitQuotaServiceClient;
use envoy_types::pb::envoy::service::rate_limit_quota::v3::rate_limit_quota_usage_reports::BucketQuotaUsage;
use envoy_types::pb::envoy::service::rate_limit_quota::v3::{BucketId, RateLimitQuotaUsageReports};
use tokio::sync::mpsc;
use tokio_stream::wrappers::ReceiverStream;

#[derive(Parser)]
struct Arguments {
    /// The server, `http://host:port`.
    #[arg(long)]
    target: String,
    /// Streams (Envoys).
    #[arg(long, default_value_t = 50)]
    streams: usize,
    /// Buckets in each report (the same for every stream).
    #[arg(long, default_value_t = 20)]
    buckets: usize,
    /// Streams per HTTP/2 connection.
    #[arg(long, default_value_t = 10)]
    streams_per_connection: usize,
    /// Seconds counted.
    #[arg(long, default_value_t = 5)]
    seconds: u64,
    /// Seconds before counting.
    #[arg(long, default_value_t = 1)]
    warmup: u64,
}

fn report(buckets: usize) -> RateLimitQuotaUsageReports {
    RateLimitQuotaUsageReports {
        domain: "bench".to_owned(),
        bucket_quota_usages: (0..buckets)
            .map(|index| BucketQuotaUsage {
                bucket_id: Some(BucketId {
                    bucket: HashMap::from([("key".to_owned(), format!("bucket-{index}"))]),
                }),
                time_elapsed: None,
                num_requests_allowed: 100,
                num_requests_denied: 0,
            })
            .collect(),
    }
}

#[tokio::main]
async fn main() {
    let arguments = Arguments::parse();
    let counted = Arc::new(AtomicU64::new(0));
    let counting = Arc::new(AtomicBool::new(false));
    let mut tasks = Vec::new();
    let mut client = None;
    for index in 0..arguments.streams {
        if index % arguments.streams_per_connection.max(1) == 0 {
            client = Some(
                RateLimitQuotaServiceClient::connect(arguments.target.clone())
                    .await
                    .expect("the server answers"),
            );
        }
        let mut client = client.clone().expect("a client");
        let (counted, counting) = (Arc::clone(&counted), Arc::clone(&counting));
        let message = report(arguments.buckets);
        tasks.push(tokio::spawn(async move {
            let (reports, outgoing) = mpsc::channel(1);
            reports
                .send(message.clone())
                .await
                .expect("the stream is open");
            let mut answers = client
                .stream_rate_limit_quotas(ReceiverStream::new(outgoing))
                .await
                .expect("a stream")
                .into_inner();
            while let Ok(Some(_)) = answers.message().await {
                if counting.load(Ordering::Relaxed) {
                    counted.fetch_add(1, Ordering::Relaxed);
                }
                if reports.send(message.clone()).await.is_err() {
                    return;
                }
            }
        }));
    }
    tokio::time::sleep(Duration::from_secs(arguments.warmup)).await;
    counting.store(true, Ordering::Relaxed);
    let start = Instant::now();
    tokio::time::sleep(Duration::from_secs(arguments.seconds)).await;
    counting.store(false, Ordering::Relaxed);
    let reports = counted.load(Ordering::Relaxed) as f64 / start.elapsed().as_secs_f64();
    println!(
        "streams={} buckets={} reports_per_second={:.0} bucket_reports_per_second={:.0}",
        arguments.streams,
        arguments.buckets,
        reports,
        reports * arguments.buckets as f64
    );
    for task in tasks {
        task.abort();
    }
}
