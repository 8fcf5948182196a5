//! Requests whose limits sit in different Redis Cluster slots (a plan and a
//! route budget keyed by different keys): one script cannot touch them all, so
//! the request is decided in steps that keep it all or nothing.
//!
//! 1. Every limit is checked, nothing taken (one script call per limit, all at
//!    once).
//! 2. If one has nothing left, nothing is taken: the limits with nothing left
//!    report their refusal (with its `retry_after`, read without writing), the
//!    others what they have left: what one script deciding them together
//!    answers. (If a limit that had nothing left has room by the time its
//!    refusal is read, because another request gave a unit back, the steps
//!    start again, up to three times.)
//! 3. Otherwise one unit is taken from each limit in turn, in the order of
//!    their hash tags (the same order on every gateway, so that requests
//!    racing for the last units of two limits do not each win one). If a
//!    limit refuses (another gateway took its last unit since the check), or
//!    a call fails, the units taken so far are given back (`lua/refund.lua`)
//!    and the request is refused.
//!
//! The caller runs [`acquire`] as a task of its own, so that units taken are
//! given back even when the caller stops waiting. One unit can still be kept:
//! when a charge call fails after the script ran (its answer lost, or late
//! past the response timeout), the unit it took is not known and so not given
//! back.

use std::sync::Arc;

use futures_util::future::join_all;
use redis::Script;
use tollgate_core::StoreError;

use crate::batch::{self, LimitCall, Request};
use crate::connection::{self, Connection};
use crate::script::{Outcome, Reply};

/// How many times the steps start again when a limit that had nothing left
/// at the check has room by the time its refusal is read.
const ATTEMPTS: usize = 3;

/// The scripts and settings a split request runs with.
#[derive(Clone)]
pub(crate) struct Scripts {
    pub(crate) acquire: Arc<Script>,
    pub(crate) refund: Arc<Script>,
    /// Microseconds as text; empty for Redis's `TIME`.
    pub(crate) now: String,
    pub(crate) minimum_ttl: u64,
}

/// Decides one unit of `limits`, all or nothing, one script call per limit.
pub(crate) async fn acquire(
    connection: Connection,
    scripts: Scripts,
    limits: Vec<LimitCall>,
) -> Result<Reply, StoreError> {
    let everyone: Vec<usize> = (0..limits.len()).collect();
    let mut attempt = 0;
    loop {
        attempt += 1;
        let checks = match each(&connection, &scripts, &limits, &everyone, 0, false).await? {
            Ok(checks) => checks,
            Err(reply) => return Ok(reply),
        };
        let refused: Vec<usize> = (0..limits.len())
            .filter(|&position| checks[position].remaining < 1)
            .collect();
        if refused.is_empty() {
            return charge(&connection, &scripts, &limits, checks).await;
        }
        // The refusals, read without writing: taking a unit here could keep
        // one for a request that is refused.
        let refusals = match each(&connection, &scripts, &limits, &refused, 1, false).await? {
            Ok(refusals) => refusals,
            Err(reply) => return Ok(reply),
        };
        // A limit that had nothing left has room now (another request gave a
        // unit back): decide again.
        if refusals.iter().any(|refusal| refusal.allowed > 0) && attempt < ATTEMPTS {
            continue;
        }
        let mut outcomes = checks;
        for (position, refusal) in refused.into_iter().zip(refusals) {
            // A refusal read as allowed (room came back on the last attempt)
            // is reported with what it has, nothing taken.
            outcomes[position] = Outcome {
                allowed: 0,
                remaining: refusal.remaining + refusal.allowed,
                ..refusal
            };
        }
        return Ok(Reply::Decided(outcomes));
    }
}

/// Takes one unit from every limit in turn (in hash tag order); gives back
/// what was taken when one refuses or a call fails. `checks`: what each limit
/// had left, reported for the limits not reached.
async fn charge(
    connection: &Connection,
    scripts: &Scripts,
    limits: &[LimitCall],
    checks: Vec<Outcome>,
) -> Result<Reply, StoreError> {
    let mut order: Vec<usize> = (0..limits.len()).collect();
    order.sort_by(|&a, &b| limits[a].names.hash_tag().cmp(limits[b].names.hash_tag()));
    let mut outcomes = checks;
    let mut taken: Vec<usize> = Vec::new();
    for position in order {
        let charged = each(connection, scripts, limits, &[position], 1, true).await;
        let outcome = match charged {
            Ok(Ok(mut charged)) => charged.pop(),
            Ok(Err(reply)) => {
                give_back(connection, scripts, limits, &taken, &outcomes).await;
                return Ok(reply);
            }
            Err(error) => {
                give_back(connection, scripts, limits, &taken, &outcomes).await;
                return Err(error);
            }
        };
        let Some(outcome) = outcome else {
            give_back(connection, scripts, limits, &taken, &outcomes).await;
            return Err(unexpected());
        };
        outcomes[position] = outcome;
        if outcome.allowed == 1 {
            taken.push(position);
            continue;
        }
        // Refused: give back what was taken, and refuse.
        give_back(connection, scripts, limits, &taken, &outcomes).await;
        for position in taken {
            let charge = outcomes[position];
            outcomes[position] = Outcome {
                allowed: 0,
                remaining: charge.remaining + 1,
                retry_after: 0,
                ..charge
            };
        }
        return Ok(Reply::Decided(outcomes));
    }
    Ok(Reply::Decided(outcomes))
}

/// Gives back the unit taken from each limit at `positions`.
async fn give_back(
    connection: &Connection,
    scripts: &Scripts,
    limits: &[LimitCall],
    positions: &[usize],
    outcomes: &[Outcome],
) {
    let refunds = positions.iter().map(|&position| {
        refund(
            connection,
            scripts,
            &limits[position],
            outcomes[position].counted_at,
        )
    });
    for result in join_all(refunds).await {
        if let Err(error) = result {
            tracing::warn!(%error, "a unit taken by a refused request could not be given back");
        }
    }
}

/// `units` of the limits at `positions`, each in its own call, all at once:
/// their outcomes in that order, or the reply that ends the request (a tier
/// that changed, with its index in `limits`; a failure).
async fn each(
    connection: &Connection,
    scripts: &Scripts,
    limits: &[LimitCall],
    positions: &[usize],
    units: u64,
    write: bool,
) -> Result<Result<Vec<Outcome>, Reply>, StoreError> {
    let calls = positions.iter().map(|&position| async move {
        let request = Request {
            limits: vec![limits[position].clone()],
            units,
            write,
        };
        let mut connection = connection.clone();
        batch::call(
            &mut connection,
            &scripts.acquire,
            &scripts.now,
            scripts.minimum_ttl,
            &[&request],
        )
        .await
    });
    let mut outcomes = Vec::with_capacity(positions.len());
    for (&position, replies) in positions.iter().zip(join_all(calls).await) {
        match replies?.pop() {
            Some(Reply::Decided(mut decided)) if decided.len() == 1 => {
                outcomes.extend(decided.pop());
            }
            Some(Reply::Tier { tier, .. }) => {
                return Ok(Err(Reply::Tier {
                    index: position,
                    tier,
                }));
            }
            Some(failed @ Reply::Failed(_)) => return Ok(Err(failed)),
            _ => return Err(unexpected()),
        }
    }
    Ok(Ok(outcomes))
}

fn unexpected() -> StoreError {
    StoreError::Unavailable("unexpected reply from the script".into())
}

/// Gives back one unit taken from `limit`, counted at `counted_at`.
async fn refund(
    connection: &Connection,
    scripts: &Scripts,
    limit: &LimitCall,
    counted_at: u64,
) -> Result<u64, StoreError> {
    let rule = &limit.rule;
    let mut connection = connection.clone();
    scripts
        .refund
        .key(&limit.names.state)
        .key(&limit.names.log)
        .arg(&scripts.now)
        .arg(rule.algorithm)
        .arg(rule.limit)
        .arg(rule.window)
        .arg(rule.burst)
        .arg(&rule.version)
        .arg(counted_at)
        .arg(1)
        .arg(scripts.minimum_ttl)
        .invoke_async(&mut connection)
        .await
        .map_err(|error| connection::unavailable(&error))
}

#[cfg(test)]
mod tests {
    //! The refund script against a real Redis (`REDIS_URL`), on the caller's
    //! time: what is given back is what a later decision sees.

    use std::sync::Arc;
    use std::time::Duration;

    use tollgate_core::Policy;

    use super::*;
    use crate::connection::Target;
    use crate::keys::{KeyNames, Space};
    use crate::plans::ScriptRule;
    use crate::script;

    /// 2026-12-01T00:00:10Z in microseconds.
    const T: u64 = 1_796_083_210_000_000;
    const SECOND: u64 = 1_000_000;

    fn connection() -> Option<Connection> {
        let in_ci = std::env::var("CI").is_ok_and(|value| value == "true");
        match std::env::var("REDIS_URL") {
            Ok(url) if !url.is_empty() => {
                let target = Target::Standalone(url);
                Some(Connection::open(&target, Duration::from_secs(2)).unwrap().0)
            }
            _ if in_ci => panic!("REDIS_URL is not set: CI must provide a Redis"),
            _ => {
                eprintln!("skipped: set REDIS_URL to run the refund tests");
                None
            }
        }
    }

    fn limit(test: &str, policy: Policy) -> LimitCall {
        let started = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |since| since.as_nanos());
        let prefix = format!("tollgate-test-{}-{started}-refund", std::process::id());
        LimitCall {
            names: Arc::new(KeyNames::new(&prefix, Space::Policy, test)),
            tier: None,
            rule: Arc::new(ScriptRule::new(policy, format!("p-{test}")).unwrap()),
        }
    }

    struct Harness {
        connection: Connection,
        acquire: Arc<Script>,
        refund: Arc<Script>,
    }

    impl Harness {
        /// Takes `units` at `now` (0: only reads).
        async fn take(&self, limit: &LimitCall, now: u64, units: u64) -> Outcome {
            let request = Request {
                limits: vec![limit.clone()],
                units,
                write: units > 0,
            };
            let mut connection = self.connection.clone();
            let now = now.to_string();
            let mut replies = batch::call(
                &mut connection,
                &self.acquire,
                &now,
                600 * SECOND,
                &[&request],
            )
            .await
            .unwrap();
            match replies.pop() {
                Some(Reply::Decided(outcomes)) => outcomes[0],
                other => panic!("{other:?}"),
            }
        }

        /// Gives back one unit taken at `at`, at `now`.
        async fn give_back(&self, limit: &LimitCall, now: u64, at: u64) -> u64 {
            let now = now.to_string();
            let scripts = Scripts {
                acquire: Arc::clone(&self.acquire),
                refund: Arc::clone(&self.refund),
                now,
                minimum_ttl: 600 * SECOND,
            };
            refund(&self.connection, &scripts, limit, at).await.unwrap()
        }

        async fn drop_keys(&self, limit: &LimitCall) {
            let mut connection = self.connection.clone();
            let _: i64 = redis::cmd("DEL")
                .arg(&limit.names.state)
                .arg(&limit.names.log)
                .query_async(&mut connection)
                .await
                .unwrap();
        }
    }

    fn harness() -> Option<Harness> {
        Some(Harness {
            connection: connection()?,
            acquire: Arc::new(script::acquire()),
            refund: Arc::new(script::refund()),
        })
    }

    #[tokio::test]
    async fn a_fixed_window_gets_its_unit_back_within_the_window_only() {
        let Some(harness) = harness() else { return };
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
    async fn a_late_unit_is_given_back_where_it_was_counted() {
        let Some(harness) = harness() else { return };
        // A clock behind the one that wrote the state: the fixed window counts
        // the unit in the stored (later) window, the sliding log in its newest
        // run; each answers where, and the refund finds it there.
        let fixed = limit("late-fixed", Policy::fixed_window(5, 60).unwrap());
        let next = T + 60 * SECOND;
        harness.take(&fixed, next, 1).await;
        let late = harness.take(&fixed, T, 1).await;
        assert_eq!(
            late.counted_at, 1_796_083_260_000_000,
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
    async fn a_token_bucket_gets_its_token_back_until_it_is_full() {
        let Some(harness) = harness() else { return };
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
    async fn a_sliding_log_gets_back_the_unit_of_its_run() {
        let Some(harness) = harness() else { return };
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
