//! A Redis that loses the shared default policy (restarted without
//! persistence, flushed, evicted): the store notices, warns, and puts the
//! configuration's policy back under a generation past every one seen; one
//! that finds the generation gone back (the policy set again elsewhere)
//! warns too. Tier assignments are lost with the restart, as CONFIG.md says.

use std::io::Write;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tollgate_core::{Limit, LimiterConfig, Policy, Store};
use tollgate_redis::{RedisConfig, RedisStore};
use tollgate_test_support::redis as support;

/// What the store logs, as text, while the returned guard lives (this
/// thread only: the test's runtime, and the tasks the store spawns on it).
fn capture_logs() -> (Arc<Mutex<Vec<u8>>>, tracing::subscriber::DefaultGuard) {
    #[derive(Clone)]
    struct Buffer(Arc<Mutex<Vec<u8>>>);
    impl Write for Buffer {
        fn write(&mut self, bytes: &[u8]) -> std::io::Result<usize> {
            self.0.lock().unwrap().extend_from_slice(bytes);
            Ok(bytes.len())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }
    let logs = Arc::new(Mutex::new(Vec::new()));
    let buffer = Buffer(Arc::clone(&logs));
    let subscriber = tracing_subscriber::fmt()
        .with_ansi(false)
        .with_max_level(tracing::Level::INFO)
        .with_writer(move || buffer.clone())
        .finish();
    (logs, tracing::subscriber::set_default(subscriber))
}

fn text(logs: &Mutex<Vec<u8>>) -> String {
    String::from_utf8_lossy(&logs.lock().unwrap()).into_owned()
}

/// A store on `url` under `prefix` whose configuration's default policy is
/// `policy` (and a tier `pro`), learning of changes by message, subscribing
/// again 50 ms after its channel closed.
fn store(url: &str, prefix: &str, policy: Policy) -> RedisStore {
    let limits = LimiterConfig {
        policy_lists: Default::default(),
        default_policy: policy,
        ..LimiterConfig::default()
    };
    let mut config = RedisConfig::new(url);
    config.prefix = prefix.to_owned();
    config.timeout = Duration::from_secs(5);
    config.policy_resubscribe_after = Duration::from_millis(50);
    config.policy_subscribe_timeout = Duration::from_secs(1);
    support::by_message_only(&mut config);
    RedisStore::connect(config, &limits).unwrap()
}

/// Waits (at most 30 s) until the store's task is subscribed to its channel
/// `PREFIX:config` on the server at `url`, which it does after its first
/// read of the policy.
async fn wait_until_subscribed(url: &str, prefix: &str) {
    let channel = format!("{prefix}:config");
    for _ in 0..3000 {
        let (_, count): (String, i64) = redis::cmd("PUBSUB")
            .arg("NUMSUB")
            .arg(&channel)
            .query(&mut support::connect(url))
            .unwrap();
        if count == 1 {
            return;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    panic!("the store did not subscribe to {channel}");
}

/// The fields `policy` and `generation` of `PREFIX:config`.
fn shared(url: &str, prefix: &str) -> (Option<String>, Option<String>) {
    redis::cmd("HMGET")
        .arg(format!("{prefix}:config"))
        .arg("policy")
        .arg("generation")
        .query(&mut support::connect(url))
        .unwrap()
}

#[tokio::test]
#[cfg_attr(
    not(has_redis),
    ignore = "set REDIS_URL=redis://127.0.0.1:6379 to run (needs redis-server too)"
)]
async fn a_restarted_redis_gets_the_configured_policy_back_with_a_warning() {
    let (logs, _guard) = capture_logs();
    let mut redis = support::OwnRedis::start();
    let url = redis.url();
    let prefix = support::prefix("restart");
    let configured = Policy::fixed_window(5, 60).unwrap();
    let store = store(&url, &prefix, configured);
    wait_until_subscribed(&url, &prefix).await;
    // The first read set the configured policy, under generation 0.
    assert_eq!(
        shared(&url, &prefix),
        (
            Some(r#"{"algorithm":"fixed_window","limit":5,"window_s":60}"#.to_owned()),
            Some("0".to_owned())
        )
    );
    // An operator's change (generation 1) and a tier assignment, both kept
    // only in Redis.
    let changed = Policy::sliding_log(2, 60).unwrap();
    store.configure(changed).await.unwrap();
    store.assign_tier("sk_pro", "pro").await.unwrap();
    assert_eq!(store.inspect("sk_pro").await.unwrap().tier, "pro");
    let before = store.acquire(&[Limit::Plan("sk_a")]).await.unwrap();
    assert_eq!(before[0].decision.remaining, Some(1), "2 - 1 on the change");
    let changed_generation: u64 = shared(&url, &prefix).1.unwrap().parse().unwrap();
    assert_eq!(changed_generation, 1);
    let (seconds, micros): (u64, u64) = redis::cmd("TIME")
        .query(&mut support::connect(&url))
        .unwrap();
    let before_restart = seconds * 1_000_000 + micros;

    redis.restart();

    // Once its channel is back the store finds the policy gone and sets the
    // configured one again, under a generation from Redis's clock, past the
    // one it had seen, and puts it in force.
    assert_eq!(
        support::wait_for_default_policy(&store, configured).await,
        configured
    );
    let (policy, restored) = shared(&url, &prefix);
    assert_eq!(
        policy.as_deref(),
        Some(r#"{"algorithm":"fixed_window","limit":5,"window_s":60}"#)
    );
    let restored: u64 = restored.unwrap().parse().unwrap();
    assert!(
        restored > changed_generation && restored >= before_restart,
        "{restored} after {changed_generation}, Redis's clock at {before_restart}"
    );
    let logged = text(&logs);
    assert!(
        logged.contains(
            " WARN tollgate_redis::policy_sync: the shared default policy was gone from Redis"
        ),
        "{logged}"
    );
    assert!(
        logged.contains(&format!("generation={restored}")),
        "{logged}"
    );
    // What Redis lost is lost: the tier assignment, and the state (a fresh
    // budget of 5 on the configured policy).
    assert_eq!(store.inspect("sk_pro").await.unwrap().tier, "default");
    let after = store.acquire(&[Limit::Plan("sk_a")]).await.unwrap();
    assert_eq!(after[0].decision.remaining, Some(4), "5 - 1, afresh");
}

#[tokio::test]
#[cfg_attr(not(has_redis), ignore = "set REDIS_URL=redis://127.0.0.1:6379 to run")]
async fn a_generation_gone_back_is_taken_with_a_warning() {
    let (logs, _guard) = capture_logs();
    let url = support::require_redis_url();
    let prefix = support::prefix("generation-back");
    let store = store(&url, &prefix, Policy::fixed_window(5, 60).unwrap());
    wait_until_subscribed(&url, &prefix).await;
    store
        .configure(Policy::fixed_window(6, 60).unwrap())
        .await
        .unwrap();
    store
        .configure(Policy::fixed_window(7, 60).unwrap())
        .await
        .unwrap();
    let seen: u64 = shared(&url, &prefix).1.unwrap().parse().unwrap();
    // The policy lost, and set again elsewhere before this store noticed
    // under a generation from before (an old snapshot loaded, or a tool
    // of an older build): generation 1, announced on the channel. Redis's
    // policy wins, with a warning.
    let key = format!("{prefix}:config");
    let mut connection = support::connect(&url);
    let again = Policy::fixed_window(3, 60).unwrap();
    let _: () = redis::pipe()
        .atomic()
        .del(&key)
        .hset(
            &key,
            "policy",
            r#"{"algorithm":"fixed_window","limit":3,"window_s":60}"#,
        )
        .hincr(&key, "generation", 1)
        .publish(&key, 1)
        .query(&mut connection)
        .unwrap();
    assert_eq!(support::wait_for_default_policy(&store, again).await, again);
    let logged = text(&logs);
    assert!(
        logged.contains(
            " WARN tollgate_redis::policy_sync: the shared default policy's generation went back"
        ),
        "{logged}"
    );
    assert!(logged.contains(&format!("from={seen} to=1")), "{logged}");
    support::cleanup(&url, &prefix);
}
