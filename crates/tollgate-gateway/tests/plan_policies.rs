//! `tollgate serve` end to end with a plan of several policies ("2 per
//! second and 5 per minute"): every policy listed in `RateLimit-Policy`, the
//! binding one in `RateLimit`, `X-RateLimit-*` and `Retry-After`, a refusal
//! using nothing of any; the admin API reading and writing lists. A real
//! upstream on 127.0.0.1, the gateway in process on a manual clock, a real
//! HTTP client; in memory here, on Redis in `redis_plan_policies.rs` (the
//! scenarios are `plan_scenarios/`).

mod plan_scenarios;

use plan_scenarios::{
    the_admin_api_reads_and_writes_lists, the_binding_policy_speaks, two_policies,
};
use tollgate_test_support::gateway::Gateway;
use tollgate_test_support::loopback::Upstream;

#[tokio::test]
async fn in_memory_the_binding_policy_speaks_for_a_plan_of_two() {
    let upstream = Upstream::start().await;
    let gateway = Gateway::start(&two_policies(&upstream, "pp_memory", ""), 120).await;
    the_binding_policy_speaks(&gateway, &upstream, "sk_plan").await;
    the_admin_api_reads_and_writes_lists(&gateway, "sk_other").await;
}
