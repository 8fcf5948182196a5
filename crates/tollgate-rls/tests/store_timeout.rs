//! A Redis that stops answering (paused with SIGSTOP): every decision gives
//! up after `TOLLGATE_STORE_TIMEOUT` (50 ms by default, not the Go service's
//! 10 s `REDIS_TIMEOUT`), and the service answers as
//! `TOLLGATE_STORE_FAILURE` says (fail_open: OK; fail_closed: OVER_LIMIT;
//! unset: the Go service's error), counting each failure. Once Redis
//! resumes, decisions are the store's again.
//!
//! The test runs its own `redis-server` on a free loopback port (so pausing
//! it disturbs nothing else). It is a Redis test: it runs when `REDIS_URL`
//! is set (and always under `CI=true`; the build script's cfg `has_redis`),
//! shows as ignored otherwise, and fails when it cannot start its server.

use std::time::{Duration, Instant};

use envoy_types::pb::envoy::extensions::common::ratelimit::v3::{
    RateLimitDescriptor, rate_limit_descriptor::Entry,
};
use envoy_types::pb::envoy::service::ratelimit::v3::RateLimitRequest;
use envoy_types::pb::envoy::service::ratelimit::v3::rate_limit_service_client::RateLimitServiceClient;
use tollgate_core::FailurePolicy;
use tollgate_rls::Rls;
use tollgate_rls::settings::Secret;
use tollgate_test_support::redis::{OwnRedis, Stalled};
use tollgate_test_support::rls;
use tonic::transport::Channel;

async fn start(
    url: &str,
    policy: Option<FailurePolicy>,
) -> (Rls, RateLimitServiceClient<Channel>, tempfile::TempDir) {
    let mut arguments = rls::arguments();
    arguments.redis_url = Some(Secret::new(url));
    // A REDIS_TIMEOUT far longer than the test waits: only
    // TOLLGATE_STORE_TIMEOUT (50 ms by default) can answer a paused Redis.
    arguments.redis_timeout = Duration::from_secs(3600);
    arguments.store_failure = policy;
    // On a manual clock at noon: no day's window ends during the test.
    let (rls, directory) = rls::start_at_noon(
        "domain: rl\ndescriptors:\n  - key: foo\n    rate_limit: {unit: day, requests_per_unit: 100}\n",
        arguments,
    )
    .await;
    let address = format!("http://{}", rls.server().grpc_address().unwrap());
    let client = RateLimitServiceClient::connect(address).await.unwrap();
    (rls, client, directory)
}

fn request(value: &str) -> RateLimitRequest {
    RateLimitRequest {
        domain: "rl".to_owned(),
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

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[cfg_attr(
    not(has_redis),
    ignore = "set REDIS_URL=redis://127.0.0.1:6379 to run (needs redis-server too)"
)]
async fn a_paused_redis_fails_open_closed_or_as_the_go_service() {
    let redis = OwnRedis::start();
    let servers = [redis.url()];
    let url = redis.url();
    let (open, mut open_client, _open_dir) = start(&url, Some(FailurePolicy::FailOpen)).await;
    let (closed, mut closed_client, _closed_dir) =
        start(&url, Some(FailurePolicy::FailClosed)).await;
    let (go, mut go_client, _go_dir) = start(&url, None).await;

    // Redis answering: decided by the store. The three services share one
    // Redis, one prefix and so one key: after these three calls, 3 of the
    // 100 a day are used.
    for client in [&mut open_client, &mut closed_client, &mut go_client] {
        let answer = client
            .should_rate_limit(request("a"))
            .await
            .unwrap()
            .into_inner();
        assert_eq!(answer.overall_code, 1);
        assert!(answer.statuses[0].current_limit.is_some());
    }

    let stalled = Stalled::stop(&servers);
    let paused = async {
        let answer = open_client
            .should_rate_limit(request("a"))
            .await
            .unwrap()
            .into_inner();
        assert_eq!(answer.overall_code, 1, "fail_open: OK");
        assert_eq!(answer.statuses[0].current_limit, None);
        let answer = closed_client
            .should_rate_limit(request("a"))
            .await
            .unwrap()
            .into_inner();
        assert_eq!(answer.overall_code, 2, "fail_closed: OVER_LIMIT");
        assert_eq!(answer.statuses[0].code, 2);
        assert_eq!(answer.statuses[0].limit_remaining, 0);
        let error = go_client.should_rate_limit(request("a")).await.unwrap_err();
        assert_eq!(error.code(), tonic::Code::Unknown, "{error:?}");
    };
    // A generous guard, not a measure: the three answers come after the
    // store's timeout, or after REDIS_TIMEOUT's hour if that were applied.
    tokio::time::timeout(Duration::from_secs(60), paused)
        .await
        .expect("the store waited for REDIS_TIMEOUT, not TOLLGATE_STORE_TIMEOUT");

    let error_stat = "ratelimit.service.call.should_rate_limit.redis_error";
    let open_stats = open.service().stats();
    assert_eq!(open_stats["ratelimit.service.store_failure.fail_open"], 1);
    assert_eq!(open_stats[error_stat], 1);
    let closed_stats = closed.service().stats();
    assert_eq!(
        closed_stats["ratelimit.service.store_failure.fail_closed"],
        1
    );
    assert_eq!(closed_stats[error_stat], 1);
    let go_stats = go.service().stats();
    assert_eq!(go_stats[error_stat], 1);
    assert!(!go_stats.keys().any(|name| name.contains("store_failure")));

    drop(stalled);
    // A bounded wait for the store to answer again. The three calls made
    // while Redis was paused were answered by their failure policy and use
    // no budget, though Redis may run them once it resumes; so do the calls
    // answered OVER_LIMIT while it catches up. The first call decided by the
    // store is the 4th counted: 96 of the 100 left.
    let deadline = Instant::now() + Duration::from_secs(5);
    loop {
        let answer = closed_client
            .should_rate_limit(request("a"))
            .await
            .unwrap()
            .into_inner();
        if answer.overall_code == 1 {
            assert!(answer.statuses[0].current_limit.is_some());
            assert_eq!(answer.statuses[0].limit_remaining, 96);
            break;
        }
        assert!(Instant::now() < deadline, "Redis did not answer again");
    }
    for rls in [open, closed, go] {
        rls::stop(rls).await;
    }
}
