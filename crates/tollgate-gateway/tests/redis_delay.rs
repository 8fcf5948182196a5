//! Waiting instead of refusing (a route's `delay`, issue #26) on Redis and
//! on a Redis Cluster: the scenarios of `delay_scenarios/` (as `delay.rs`
//! runs them in memory), each request reserved by the acquire script in
//! the same call as its decision, each reservation given back through the
//! refund script, on the gateway's manual clock. Ignored without
//! `REDIS_URL` (`REDIS_CLUSTER_URL` for the cluster), as the other Redis
//! tests are.

mod delay_scenarios;

use std::time::Duration;

use tollgate_test_support::gateway::Gateway;
use tollgate_test_support::loopback::Upstream;
use tollgate_test_support::redis as redis_support;

/// The scenarios on the Redis (or cluster) at `url`, routes named `name_*`.
async fn scenarios_on(url: &str, name: &str) {
    let prefix = redis_support::prefix(name);
    let upstream = Upstream::start().await;
    let store = format!(
        "[store]\nurl = \"{url}\"\nprefix = \"{prefix}\"\ntimeout = \"2s\"\ntime = \"local\"\n"
    );
    let config = tollgate_gateway::ServeConfig::from_toml_str(&delay_scenarios::routes(
        &upstream, name, &store,
    ))
    .unwrap();
    let gateway = Gateway::start_on_redis(config, 0, url, &prefix).await;
    delay_scenarios::twelve_requests_queue_at_the_rate(&gateway, &upstream).await;
    delay_scenarios::a_client_gone_while_it_waits_gives_its_turn_back(&gateway, &upstream).await;
    delay_scenarios::at_most_max_waiting_requests_wait(&gateway, &upstream).await;
    if !url.starts_with("redis-cluster://") {
        a_turn_booked_after_its_client_left_is_given_back(&gateway, url).await;
    }
    redis_support::cleanup(url, &prefix);
}

/// A request whose client leaves while Redis has not yet answered (paused
/// for 600 ms; the client gives up after 200 ms) has its turn booked by
/// the script once Redis runs it; the gateway gives it back as soon as the
/// answer comes to nobody. Without that, the next request's turn would be
/// 2 s away (refused, on a clock that stands still) forever; with it, 1 s,
/// within the delay.
async fn a_turn_booked_after_its_client_left_is_given_back(gateway: &Gateway, url: &str) {
    let get = |timeout: Duration| {
        gateway
            .client
            .get(gateway.url("/late/x"))
            .timeout(timeout)
            .send()
    };
    let ten_seconds = Duration::from_secs(10);
    assert_eq!(get(ten_seconds).await.unwrap().status(), 200);
    let mut connection = redis::Client::open(url).unwrap().get_connection().unwrap();
    redis::cmd("CLIENT")
        .arg("PAUSE")
        .arg(600)
        .arg("ALL")
        .query::<()>(&mut connection)
        .unwrap();
    let gone = get(Duration::from_millis(200)).await;
    assert!(gone.unwrap_err().is_timeout());
    // Until the turn is given back, a request's turn is 2 s away: refused,
    // taking nothing. Then one waits 1 s and passes.
    let mut statuses = Vec::new();
    for _ in 0..100 {
        let status = get(ten_seconds).await.unwrap().status().as_u16();
        statuses.push(status);
        if status == 200 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert_eq!(statuses.last(), Some(&200), "{statuses:?}");
    assert!(
        statuses[..statuses.len() - 1]
            .iter()
            .all(|status| *status == 429)
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[cfg_attr(not(has_redis), ignore = "set REDIS_URL=redis://127.0.0.1:6379 to run")]
async fn requests_wait_their_turn_on_redis() {
    scenarios_on(&redis_support::require_redis_url(), "dl_redis").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[cfg_attr(
    not(has_redis_cluster),
    ignore = "set REDIS_CLUSTER_URL=redis-cluster://127.0.0.1:7000 to run (.ci/redis-cluster start DIR)"
)]
async fn requests_wait_their_turn_on_a_redis_cluster() {
    scenarios_on(&redis_support::require_cluster_url(), "dl_cluster").await;
}
