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
//!    a call fails, the units taken so far are given back
//!    ([`refund`], `lua/refund.lua`) and the request is
//!    refused.
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

use crate::call::{self, Outcome, Reply, Request, ScriptLimit, unexpected};
use crate::connection::Connection;
use crate::refund;

/// How many times the steps start again when a limit that had nothing left
/// at the check has room by the time its refusal is read.
const ATTEMPTS: usize = 3;

/// The scripts and settings a split request runs with.
#[derive(Clone)]
pub(crate) struct Scripts {
    pub(crate) acquire: Arc<Script>,
    pub(crate) refund: Arc<Script>,
    /// Microseconds as text; [`REDIS_TIME`](crate::protocol::REDIS_TIME) for
    /// Redis's `TIME`.
    pub(crate) now: String,
    pub(crate) minimum_ttl: u64,
}

/// Decides one unit of `limits`, all or nothing, one script call per limit.
pub(crate) async fn acquire(
    connection: Connection,
    scripts: Scripts,
    limits: Vec<ScriptLimit>,
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
    limits: &[ScriptLimit],
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
    limits: &[ScriptLimit],
    positions: &[usize],
    outcomes: &[Outcome],
) {
    let refunds = positions.iter().map(|&position| {
        refund::refund(
            connection,
            &scripts.refund,
            &scripts.now,
            scripts.minimum_ttl,
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
    limits: &[ScriptLimit],
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
        call::invoke(
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
