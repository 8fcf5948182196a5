//! Giving back what a request took from one limit and must not keep: a
//! request whose limits sit in different cluster slots ([`split`](crate::split))
//! takes each all-or-nothing limit's units in turn, and gives back the units
//! taken when a later limit refuses (never a counting window's), or all the
//! units it took (a counting window's too) when a later step fails, as past
//! its deadline after a stall. A refund has no deadline: run late, it still
//! gives back. This is the Rust twin of `lua/refund.lua`: it sends the
//! limit's keys, the rule's fields as the acquire script takes them, and the
//! time the acquire script said the unit counts at.

use redis::Script;
use tollgate_core::StoreError;

use crate::call::ScriptLimit;
use crate::connection::{self, Connection};

/// Gives back the units taken from `limit` (its `units`), counted at
/// `counted_at`. `script` is the refund script, `now` the call's time
/// ([`REDIS_TIME`](crate::protocol::REDIS_TIME) for Redis's), `minimum_ttl`
/// the shortest TTL to set (µs). The units given back: `limit.units`, or 0
/// when the state has moved on (and for a window counting refused units
/// whose count reached the scripts' cap of 2^52, where what was counted is
/// no longer known).
pub(crate) async fn refund(
    connection: &Connection,
    script: &Script,
    now: &str,
    minimum_ttl: u64,
    limit: &ScriptLimit,
    counted_at: u64,
) -> Result<u64, StoreError> {
    let mut connection = connection.clone();
    script
        .key(&limit.names.state)
        .key(&limit.names.log)
        .arg(now)
        .arg(&limit.rule.fields_reaching(now, counted_at))
        .arg(counted_at)
        .arg(limit.units)
        .arg(minimum_ttl)
        .invoke_async(&mut connection)
        .await
        .map_err(|error| connection::unavailable(&error, connection.is_cluster()))
}

#[cfg(test)]
mod tests {
    //! The refund script against a real Redis (`REDIS_URL`; ignored without
    //! it), on the caller's time: what is given back is what a later
    //! decision sees.

    use std::sync::Arc;
    use std::time::{Duration, Instant};

    use tollgate_core::Policy;

    use super::*;
    use crate::call::{self, Outcome, Reply, Request};
    use crate::connection::Target;
    use crate::context::redis_clock::RedisClock;
    use crate::keys::{KeyNames, Space};
    use crate::plans::ScriptRule;
    use crate::script;

    /// 2100-01-01T00:00:10Z in microseconds: far from today, so a decision
    /// that took Redis's clock instead of the one given would show.
    const T: u64 = 4_102_444_810_000_000;
    const SECOND: u64 = 1_000_000;

    /// A connection to the Redis at `REDIS_URL`. These tests are ignored
    /// without it (the build script's `has_redis`); a test that runs fails
    /// when it is not set (under `CI=true`).
    fn connection() -> Connection {
        let url = std::env::var("REDIS_URL")
            .ok()
            .filter(|url| !url.is_empty())
            .expect("REDIS_URL is not set: under CI=true the refund tests need a Redis");
        let target = Target::Standalone(url);
        Connection::open(&target, Duration::from_secs(2)).unwrap().0
    }

    fn limit(test: &str, policy: Policy) -> ScriptLimit {
        let started = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |since| since.as_nanos());
        let prefix = format!("tollgate-test-{}-{started}-refund", std::process::id());
        ScriptLimit {
            names: Arc::new(KeyNames::new(&prefix, Space::Policy, test, None)),
            tier: None,
            rule: Arc::new(ScriptRule::new(policy, format!("p-{test}")).unwrap()),
            units: 1,
        }
    }

    struct Harness {
        connection: Connection,
        acquire: Arc<Script>,
        refund: Arc<Script>,
        clock: RedisClock,
    }

    impl Harness {
        /// Takes `units` at `now` (0: only reads).
        async fn take(&self, limit: &ScriptLimit, now: u64, units: u64) -> Outcome {
            let request = Request {
                limits: vec![limit.with_units(units)],
                write: units > 0,
                max_wait: None,
            };
            let mut connection = self.connection.clone();
            let now = now.to_string();
            // Its caller waits 2 s, on this process's clock.
            let by = Instant::now() + Duration::from_secs(2);
            let mut replies = call::decide(
                &mut connection,
                &self.acquire,
                &self.clock,
                &now,
                600 * SECOND,
                &[(&request, by)],
            )
            .await
            .unwrap();
            match replies.pop() {
                Some(Reply::Decided(outcomes)) => outcomes[0],
                other => panic!("{other:?}"),
            }
        }

        /// Gives back one unit taken at `at`, at `now`.
        async fn give_back(&self, limit: &ScriptLimit, now: u64, at: u64) -> u64 {
            let now = now.to_string();
            refund(
                &self.connection,
                &self.refund,
                &now,
                600 * SECOND,
                limit,
                at,
            )
            .await
            .unwrap()
        }

        async fn drop_keys(&self, limit: &ScriptLimit) {
            let mut connection = self.connection.clone();
            let _: i64 = redis::cmd("DEL")
                .arg(&limit.names.state)
                .arg(&limit.names.log)
                .query_async(&mut connection)
                .await
                .unwrap();
        }
    }

    fn harness() -> Harness {
        Harness {
            connection: connection(),
            acquire: Arc::new(script::acquire()),
            refund: Arc::new(script::refund()),
            clock: RedisClock::new(Duration::from_secs(2)),
        }
    }

    #[tokio::test]
    #[cfg_attr(not(has_redis), ignore = "set REDIS_URL=redis://127.0.0.1:6379 to run")]
    async fn a_fixed_window_gets_its_unit_back_within_the_window_only() {
        let harness = harness();
        let limit = limit("fixed", Policy::fixed_window(5, 60).unwrap());
        for _ in 0..3 {
            harness.take(&limit, T, 1).await;
        }
        assert_eq!(harness.give_back(&limit, T + SECOND, T).await, 1);
        assert_eq!(harness.take(&limit, T + SECOND, 0).await.remaining, 3);
        // A unit of the previous window is not given to the next.
        let next = T + 60 * SECOND;
        harness.take(&limit, next, 1).await;
        assert_eq!(harness.give_back(&limit, next, T).await, 0);
        assert_eq!(harness.take(&limit, next, 0).await.remaining, 4);
        harness.drop_keys(&limit).await;
    }

    #[tokio::test]
    #[cfg_attr(not(has_redis), ignore = "set REDIS_URL=redis://127.0.0.1:6379 to run")]
    async fn a_late_unit_is_given_back_where_it_was_counted() {
        let harness = harness();
        // A clock behind the one that wrote the state: the fixed window counts
        // the unit in the stored (later) window, the sliding log in its newest
        // run; each answers where, and the refund finds it there.
        let fixed = limit("late-fixed", Policy::fixed_window(5, 60).unwrap());
        let next = T + 60 * SECOND;
        harness.take(&fixed, next, 1).await;
        let late = harness.take(&fixed, T, 1).await;
        assert_eq!(
            late.counted_at, 4_102_444_860_000_000,
            "the next minute's start"
        );
        assert_eq!(harness.give_back(&fixed, next, late.counted_at).await, 1);
        assert_eq!(harness.take(&fixed, next, 0).await.remaining, 4);
        let log = limit("late-log", Policy::sliding_log(5, 60).unwrap());
        harness.take(&log, next, 1).await;
        let late = harness.take(&log, T, 1).await;
        assert_eq!(late.counted_at, next);
        assert_eq!(harness.give_back(&log, next, late.counted_at).await, 1);
        assert_eq!(harness.take(&log, next, 0).await.remaining, 4);
        harness.drop_keys(&fixed).await;
        harness.drop_keys(&log).await;
    }

    #[tokio::test]
    #[cfg_attr(not(has_redis), ignore = "set REDIS_URL=redis://127.0.0.1:6379 to run")]
    async fn a_token_bucket_gets_its_token_back_until_it_is_full() {
        let harness = harness();
        // One token per second, bursts of 5.
        let limit = limit("bucket", Policy::token_bucket(60, 60, 5).unwrap());
        let taken = harness.take(&limit, T, 3).await;
        assert_eq!((taken.allowed, taken.remaining), (3, 2));
        assert_eq!(harness.give_back(&limit, T, T).await, 1);
        let read = harness.take(&limit, T, 0).await;
        assert_eq!(read.remaining, 3);
        // Full again 2 s after T (two tokens missing, one per second).
        assert_eq!(read.reset_after, 2 * SECOND);
        // A full bucket has nothing to give back.
        assert_eq!(harness.give_back(&limit, T + 10 * SECOND, T).await, 0);
        assert_eq!(harness.take(&limit, T + 10 * SECOND, 0).await.remaining, 5);
        harness.drop_keys(&limit).await;
    }

    #[tokio::test]
    #[cfg_attr(not(has_redis), ignore = "set REDIS_URL=redis://127.0.0.1:6379 to run")]
    async fn a_counting_window_gets_back_what_it_counted_until_its_cap() {
        let harness = harness();
        // 5 a minute, refused units counted too: 3 + 3 counts 6.
        let policy = Policy::fixed_window_counting_refused(5, 60).unwrap();
        let counting = limit("counting", policy);
        harness.take(&counting, T, 3).await;
        let over = harness.take(&counting, T, 3).await;
        assert_eq!((over.allowed, over.remaining), (2, 0));
        // The request that counted the second 3 failed: they go back.
        let three = counting.with_units(3);
        assert_eq!(harness.give_back(&three, T, over.counted_at).await, 3);
        assert_eq!(harness.take(&counting, T, 0).await.remaining, 2, "5 - 3");
        // At the cap (2^52) the count stopped: nothing is given back.
        let capped = limit("counting-cap", policy);
        harness.take(&capped, T, 1 << 52).await;
        let at_cap = harness.take(&capped, T, 1).await;
        assert_eq!(harness.give_back(&capped, T, at_cap.counted_at).await, 0);
        harness.drop_keys(&counting).await;
        harness.drop_keys(&capped).await;
    }

    #[tokio::test]
    #[cfg_attr(not(has_redis), ignore = "set REDIS_URL=redis://127.0.0.1:6379 to run")]
    async fn a_sliding_log_gets_back_the_unit_of_its_run() {
        let harness = harness();
        let limit = limit("log", Policy::sliding_log(5, 60).unwrap());
        harness.take(&limit, T, 2).await;
        let later = T + SECOND;
        harness.take(&limit, later, 1).await;
        // The run at `later` goes: the newest is T again.
        assert_eq!(harness.give_back(&limit, later, later).await, 1);
        let read = harness.take(&limit, later, 0).await;
        assert_eq!(read.remaining, 3);
        assert_eq!(read.reset_after, 59 * SECOND, "T + 60 s - later");
        // One of the two units at T.
        assert_eq!(harness.give_back(&limit, later, T).await, 1);
        assert_eq!(harness.take(&limit, later, 0).await.remaining, 4);
        // No run at this time: nothing.
        assert_eq!(harness.give_back(&limit, later, T + 500).await, 0);
        // The last unit: the key is gone.
        assert_eq!(harness.give_back(&limit, later, T).await, 1);
        let read = harness.take(&limit, later, 0).await;
        assert_eq!((read.remaining, read.reset_after), (5, 0));
        harness.drop_keys(&limit).await;
    }
}
