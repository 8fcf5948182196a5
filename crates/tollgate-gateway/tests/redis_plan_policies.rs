//! `tollgate serve` end to end on Redis with a plan of several policies:
//! the same requests and admin calls as `plan_policies.rs` (the scenarios
//! of `plan_scenarios/`), the limits kept in Redis (`REDIS_URL`, under a prefix of
//! this run's own) and decided on the gateway's manual clock
//! (`time = "local"`). Ignored without `REDIS_URL`, as the other Redis
//! tests are.

mod plan_scenarios;
mod support;

#[path = "../../tollgate-redis/tests/support/mod.rs"]
mod redis_support;

use support::{Gateway, Upstream};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[cfg_attr(not(has_redis), ignore = "set REDIS_URL=redis://127.0.0.1:6379 to run")]
async fn on_redis_the_binding_policy_speaks_for_a_plan_of_two() {
    let url = redis_support::require_redis_url();
    let prefix = redis_support::prefix("gateway-plans");
    let upstream = Upstream::start().await;
    let store = format!(
        "[store]\nurl = \"{url}\"\nprefix = \"{prefix}\"\ntimeout = \"2s\"\ntime = \"local\"\n"
    );
    let gateway = Gateway::start(
        &plan_scenarios::two_policies(&upstream, "pp_redis", &store),
        120,
    )
    .await;
    plan_scenarios::the_binding_policy_speaks(&gateway, &upstream, "sk_plan").await;
    plan_scenarios::the_admin_api_reads_and_writes_lists(&gateway, "sk_other").await;
    redis_support::cleanup(&url, &prefix);
}
