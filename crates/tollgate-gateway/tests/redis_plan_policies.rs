//! `tollgate serve` end to end on Redis with a plan of several policies:
//! the same requests and admin calls as `plan_policies.rs` (the scenarios
//! of `plan_scenarios/`), the limits kept in Redis (`REDIS_URL`, under a prefix of
//! this run's own) and decided on the gateway's manual clock, with a minimum
//! TTL of an hour (Redis expires keys on its own clock). Ignored without `REDIS_URL`, as the other Redis
//! tests are.

mod plan_scenarios;

use tollgate_test_support::gateway::Gateway;
use tollgate_test_support::loopback::Upstream;
use tollgate_test_support::redis as redis_support;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[cfg_attr(not(has_redis), ignore = "set REDIS_URL=redis://127.0.0.1:6379 to run")]
async fn on_redis_the_binding_policy_speaks_for_a_plan_of_two() {
    let url = redis_support::require_redis_url();
    let prefix = redis_support::prefix("gateway-plans");
    let upstream = Upstream::start().await;
    let store = format!(
        "[store]\nurl = \"{url}\"\nprefix = \"{prefix}\"\ntimeout = \"2s\"\ntime = \"local\"\n"
    );
    let config = tollgate_gateway::ServeConfig::from_toml_str(&plan_scenarios::two_policies(
        &upstream, "pp_redis", &store,
    ))
    .unwrap();
    // The store the configuration names, but with a minimum TTL of an hour:
    // Redis expires keys on its own clock, and the "second" policy's 1 s
    // window would otherwise give its key a 1 s TTL, which a slow run
    // outlives while the gateway's manual clock stands still.
    let gateway = Gateway::start_on_redis(config, 120, &url, &prefix).await;
    plan_scenarios::the_binding_policy_speaks(&gateway, &upstream, "sk_plan").await;
    // Every state key lives about the minimum TTL, an hour (TTLs in ms; the
    // 1 s window's own would be at most 1,000): none expires under the test.
    let ttls = redis_support::state_keys_and_ttls(&url, &prefix);
    assert!(!ttls.is_empty());
    assert!(ttls.iter().all(|(_, ttl)| *ttl > 3_000_000), "{ttls:?}");
    plan_scenarios::the_admin_api_reads_and_writes_lists(&gateway, "sk_other").await;
    redis_support::cleanup(&url, &prefix);
}
