//! A test's `RedisStore`: its settings, and waiting for its default policy.

use std::sync::Arc;
use std::time::Duration;

use tollgate_core::{Clock, Policy, Store};
use tollgate_redis::{RedisConfig, TimeSource};

/// Settings for a store at `url` under `prefix` that decides on `clock` (a
/// manual clock, as the in-memory store's in the same test): a 5 s timeout
/// (a slow machine is not a store failure), and every key kept at least
/// 600 s, since Redis expires keys on its own clock, not the test's.
pub fn on_manual_clock(url: &str, prefix: &str, clock: Arc<dyn Clock>) -> RedisConfig {
    let mut config = RedisConfig::new(url);
    prefix.clone_into(&mut config.prefix);
    config.timeout = Duration::from_secs(5);
    config.time = TimeSource::Clock(clock);
    config.minimum_ttl = Duration::from_secs(600);
    config
}

/// Settings under which a store learns of a new default policy only by a
/// message on its channel (or by subscribing again after a failure): the
/// re-read after a silence waits an hour, longer than any test.
pub fn by_message_only(config: &mut RedisConfig) {
    config.policy_reread_after = Duration::from_secs(3600);
}

/// Waits until `store` has `policy` as its default policy, at most 30 s; what
/// it has at the end. Give the store [`by_message_only`] settings, so that
/// what arrives came by message (or by subscribing), never by a re-read
/// however slow the machine.
pub async fn wait_for_default_policy(store: &impl Store, policy: Policy) -> Policy {
    let mut seen = store.default_policy().await.unwrap();
    for _ in 0..3000 {
        if seen == policy {
            break;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
        seen = store.default_policy().await.unwrap();
    }
    seen
}
