//! Routes without an API key and `cost` (issue #26) on Redis and on a Redis
//! Cluster: the scenarios of `keyless_scenarios/` (as `keyless.rs` runs
//! them in memory), the limits kept in Redis under a prefix of this run's
//! own and decided on the gateway's manual clock. Ignored without
//! `REDIS_URL` (`REDIS_CLUSTER_URL` for the cluster), as the other Redis
//! tests are.

mod keyless_scenarios;

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
    let config = tollgate_gateway::ServeConfig::from_toml_str(&keyless_scenarios::routes(
        &upstream, name, &store,
    ))
    .unwrap();
    let gateway = Gateway::start_on_redis(config, 0, url, &prefix).await;
    keyless_scenarios::a_route_without_keys_is_limited_per_client_ip(&gateway, &upstream, name)
        .await;
    keyless_scenarios::an_optional_key_adds_the_plan(&gateway, &upstream, name).await;
    keyless_scenarios::a_cost_is_charged_to_every_limit(&gateway, &upstream, name).await;
    redis_support::cleanup(url, &prefix);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[cfg_attr(not(has_redis), ignore = "set REDIS_URL=redis://127.0.0.1:6379 to run")]
async fn keyless_routes_and_costs_on_redis() {
    scenarios_on(&redis_support::require_redis_url(), "kl_redis").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[cfg_attr(
    not(has_redis_cluster),
    ignore = "set REDIS_CLUSTER_URL=redis-cluster://127.0.0.1:7000 to run (.ci/redis-cluster start DIR)"
)]
async fn keyless_routes_and_costs_on_a_redis_cluster() {
    scenarios_on(&redis_support::require_cluster_url(), "kl_cluster").await;
}
