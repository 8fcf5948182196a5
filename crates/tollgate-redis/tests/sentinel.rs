//! Redis Sentinel (issue #28): the store on
//! `redis-sentinel://HOST:PORT,.../MASTER` reaches the primary three
//! sentinels name, through a failover made by `SENTINEL FAILOVER` and then
//! through one forced by killing the primary, while requests flow. Debian's
//! redis-server runs the primary, its replica and the three sentinels
//! (`--sentinel`) on loopback. Checked: limits keep working after each
//! failover (on the state the replica had); no request waits past the
//! store's timeout; while there is no primary the store answers with an
//! error, which the failure policy then decides.

use std::time::{Duration, Instant};

use tollgate_core::{Limit, LimiterConfig, Policy, Store};
use tollgate_redis::{RedisConfig, RedisStore};
use tollgate_test_support::redis as support;
use tollgate_test_support::redis::{Sentinels, query, wait_until};

/// The store's timeout: every call answers within it (and a little).
const TIMEOUT: Duration = Duration::from_millis(300);
/// What a call may take past the timeout on a busy machine.
const SLACK: Duration = Duration::from_millis(400);

/// One decision of key `k`, timed: `Ok(remaining)` or `Err` (the store's
/// error, which the failure policy answers).
async fn decide(store: &RedisStore) -> (Result<u64, String>, Duration) {
    let started = Instant::now();
    let answer = store
        .acquire(&[Limit::Plan("sk_sentinel")])
        .await
        .map(|decisions| decisions[0].decision.remaining.unwrap_or(0))
        .map_err(|error| error.to_string());
    (answer, started.elapsed())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[cfg_attr(
    not(has_redis),
    ignore = "set REDIS_URL=redis://127.0.0.1:6379 to run (needs redis-server too)"
)]
async fn the_store_follows_the_primary_through_failovers() {
    let mut deployment = Sentinels::start();
    let (primary, replica) = (deployment.primary, deployment.replica);
    let url = deployment.url();
    let mut config = RedisConfig::new(&url);
    config.prefix = format!("tollgate-test-sentinel-{}", std::process::id());
    config.timeout = TIMEOUT;
    let limits = LimiterConfig {
        default_policy: Policy::fixed_window(1000, 3600).unwrap(),
        ..LimiterConfig::default()
    };
    let store = RedisStore::connect(config, &limits).unwrap();

    // On the first primary: 5 decisions.
    let mut remaining = Vec::new();
    for _ in 0..5 {
        let (answer, _) = decide(&store).await;
        remaining.push(answer.unwrap());
    }
    // Replicated before the failover (WAIT: the replica has every write).
    deployment.replicate(primary);

    // A failover asked for, requests flowing: each answers within the
    // timeout, and once the replica is the primary they are decided again,
    // on the state it had.
    deployment.fail_over();
    let mut decided_on_the_new = None;
    for _ in 0..200 {
        let (answer, took) = decide(&store).await;
        assert!(took <= TIMEOUT + SLACK, "a decision took {took:?}");
        if deployment.primary_named_by(0) == Some(replica)
            && let Ok(left) = answer
        {
            decided_on_the_new = Some(left);
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let left = decided_on_the_new.expect("decided on the new primary");
    // 1000 a window: every request so far was counted at most once, and
    // none of the five made before the failover was lost.
    assert!(left < remaining[4], "{left} left after {remaining:?}");
    // Once the old primary is a replica, every decision is the new
    // primary's: the script runs there, never on the old one (a replica
    // does not count replicated effects as script calls).
    wait_until("the old primary turning replica", || {
        let role: redis::RedisResult<Vec<redis::Value>> = query(primary, &mut redis::cmd("ROLE"));
        role.is_ok_and(
            |role| matches!(role.first(), Some(redis::Value::BulkString(kind)) if kind == b"slave"),
        )
    });
    let url_of = |port: u16| format!("redis://127.0.0.1:{port}");
    let (old_before, new_before) = (
        support::script_calls(&url_of(primary)),
        support::script_calls(&url_of(replica)),
    );
    for _ in 0..5 {
        let (answer, took) = decide(&store).await;
        assert!(took <= TIMEOUT + SLACK, "a decision took {took:?}");
        answer.unwrap();
    }
    assert_eq!(support::script_calls(&url_of(primary)), old_before);
    assert!(support::script_calls(&url_of(replica)) >= new_before + 5);

    // The new primary killed: until the sentinels promote the old one (a
    // replica now), calls fail within the timeout (the failure policy
    // answers them); then they are decided again.
    deployment.replicate(replica);
    deployment.kill(replica);
    let mut failed = 0;
    let mut decided_again = None;
    for _ in 0..400 {
        let (answer, took) = decide(&store).await;
        assert!(took <= TIMEOUT + SLACK, "a decision took {took:?}");
        match answer {
            Err(_) => failed += 1,
            Ok(left) if deployment.primary_named_by(1) == Some(primary) => {
                decided_again = Some(left);
                break;
            }
            Ok(_) => {}
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert!(failed > 0, "no call failed while there was no primary");
    let again = decided_again.expect("decided on the promoted replica");
    assert!(again < 1000, "the key's count survived: {again} left");
}
