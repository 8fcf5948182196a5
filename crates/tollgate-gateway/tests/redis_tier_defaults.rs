//! A plan's settings besides its policies (`[limits.tier_defaults.NAME]`)
//! and `[host] max_in_flight` (issue #26) on Redis and on a Redis Cluster:
//! the scenarios of `tier_scenarios/` (as `tier_defaults.rs` runs them in
//! memory), each tier's delay found by the acquire script's call (sent
//! again with the found tier's delay when the tier changed), each slot a
//! lease in Redis. Ignored without `REDIS_URL` (`REDIS_CLUSTER_URL` for
//! the cluster), as the other Redis tests are.

mod tier_scenarios;

use tollgate_test_support::gateway::Gateway;
use tollgate_test_support::loopback::Upstream;
use tollgate_test_support::redis as redis_support;

/// The scenarios on the Redis (or cluster) at `url`, routes named `name_*`.
async fn scenarios_on(url: &str, name: &str) {
    let store = |prefix: &str| {
        format!(
            "[store]\nurl = \"{url}\"\nprefix = \"{prefix}\"\ntimeout = \"2s\"\ntime = \"local\"\n"
        )
    };
    let upstream = Upstream::start().await;
    let prefix = redis_support::prefix(&format!("{name}_wait"));
    let waiting = tier_scenarios::waiting(&upstream, name, &store(&prefix));
    let config = tollgate_gateway::ServeConfig::from_toml_str(&waiting).unwrap();
    let gateway = Gateway::start_on_redis(config, 0, url, &prefix).await;
    tier_scenarios::a_key_waits_up_to_its_tiers_delay(&gateway, &upstream, name).await;
    redis_support::cleanup(url, &prefix);
    let upstream = Upstream::start().await;
    let prefix = redis_support::prefix(&format!("{name}_slots"));
    let slots = tier_scenarios::slots(&upstream, name, &store(&prefix));
    let config = tollgate_gateway::ServeConfig::from_toml_str(&slots).unwrap();
    let gateway = Gateway::start_on_redis(config, 0, url, &prefix).await;
    tier_scenarios::tiers_and_the_host_set_the_concurrency_limit(&gateway, &upstream, name).await;
    redis_support::cleanup(url, &prefix);
    let upstream = Upstream::start().await;
    let prefix = redis_support::prefix(&format!("{name}_both"));
    let both = tier_scenarios::both(&upstream, name, &store(&prefix));
    let config = tollgate_gateway::ServeConfig::from_toml_str(&both).unwrap();
    let gateway = Gateway::start_on_redis(config, 0, url, &prefix).await;
    tier_scenarios::a_turn_refused_its_slot_is_given_back(&gateway, &upstream, name).await;
    redis_support::cleanup(url, &prefix);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[cfg_attr(not(has_redis), ignore = "set REDIS_URL=redis://127.0.0.1:6379 to run")]
async fn tier_defaults_on_redis() {
    let url = redis_support::require_redis_url();
    scenarios_on(&url, "rtd").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[cfg_attr(
    not(has_redis_cluster),
    ignore = "set REDIS_CLUSTER_URL to run (.ci/redis-cluster start DIR prints one)"
)]
async fn tier_defaults_on_a_redis_cluster() {
    let url = redis_support::require_cluster_url();
    scenarios_on(&url, "ctd").await;
}
