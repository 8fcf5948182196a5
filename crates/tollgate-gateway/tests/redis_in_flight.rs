//! A route's concurrency limit (`max_in_flight`, issue #26) on Redis and on
//! a Redis Cluster: the scenarios of `in_flight_scenarios/` (as
//! `in_flight.rs` runs them in memory), each slot a lease in Redis (two
//! held slots are two leases of one key, looked at on one server), and no
//! lease left in Redis at the end. Ignored without `REDIS_URL`
//! (`REDIS_CLUSTER_URL` for the cluster), as the other Redis tests are.
//! (Three gateway processes on one Redis, and one killed: the workspace's
//! `tests/gateway_in_flight.rs`.)

mod in_flight_scenarios;

use tollgate_test_support::gateway::Gateway;
use tollgate_test_support::loopback::Upstream;
use tollgate_test_support::redis as redis_support;
use tollgate_test_support::wait::until;

/// The scenarios on the Redis (or cluster) at `url`, routes named `name_*`.
async fn scenarios_on(url: &str, name: &str) {
    let prefix = redis_support::prefix(name);
    let store = format!(
        "[store]\nurl = \"{url}\"\nprefix = \"{prefix}\"\ntimeout = \"2s\"\ntime = \"local\"\n"
    );
    let upstream = Upstream::start().await;
    let config = in_flight_scenarios::routes(&upstream, name, &store);
    let config = tollgate_gateway::ServeConfig::from_toml_str(&config).unwrap();
    let gateway = Gateway::start_on_redis(config, 0, url, &prefix).await;
    // On a cluster the lease's node is not known here: its leases are
    // looked at on one server only.
    let leases = (!url.starts_with("redis-cluster://")).then_some((url, prefix.as_str()));
    in_flight_scenarios::a_key_holds_at_most_max_in_flight(&gateway, &upstream, name, leases).await;
    in_flight_scenarios::slots_and_rates_are_all_or_nothing(&gateway, &upstream, name).await;
    in_flight_scenarios::a_client_gone_mid_body_gives_its_slot_back(&gateway).await;
    in_flight_scenarios::keyless_requests_count_per_client_ip(&gateway, &upstream).await;
    in_flight_scenarios::a_concurrency_refusal_has_the_route_s_status(&gateway, &upstream, name)
        .await;
    let ending = in_flight_scenarios::ending_routes(&upstream, name, &store);
    let ending = tollgate_gateway::ServeConfig::from_toml_str(&ending).unwrap();
    let ending = Gateway::start_on_redis(ending, 0, url, &prefix).await;
    in_flight_scenarios::a_response_that_ends_badly_gives_its_slot_back(&ending, &upstream).await;
    no_lease_is_left(url, &prefix).await;
    redis_support::cleanup(url, &prefix);
}

/// Waits until no lease is left under `prefix` (a key's
/// leases are `PREFIX:{DIGEST}:f`), on the server or on every node of a
/// cluster: every slot's release has reached Redis.
async fn no_lease_is_left(url: &str, prefix: &str) {
    until("no lease left in Redis", || {
        redis_support::state_keys_and_ttls(url, prefix)
            .iter()
            .all(|(key, _)| !key.ends_with(":f"))
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[cfg_attr(not(has_redis), ignore = "set REDIS_URL=redis://127.0.0.1:6379 to run")]
async fn slots_are_held_until_responses_end_on_redis() {
    scenarios_on(&redis_support::require_redis_url(), "if_redis").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[cfg_attr(
    not(has_redis_cluster),
    ignore = "set REDIS_CLUSTER_URL=redis-cluster://127.0.0.1:7000 to run (.ci/redis-cluster start DIR)"
)]
async fn slots_are_held_until_responses_end_on_a_redis_cluster() {
    scenarios_on(&redis_support::require_cluster_url(), "if_cluster").await;
}
