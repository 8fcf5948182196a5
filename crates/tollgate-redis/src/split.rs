//! Requests whose limits sit in different Redis Cluster slots (a plan and a
//! route budget keyed by different keys, Envoy descriptors): one script cannot
//! touch them all, so the request is decided in steps that keep core's rule
//! (`Limiter::acquire_units`): the all-or-nothing limits (those whose rule
//! does not count refused units, asked for some units) all or nothing; the
//! limits counting refused units charged whatever the others decide; looks
//! (0 units) only read.
//!
//! 1. Every limit is checked, nothing taken (one script call per limit, all at
//!    once). A look's check is its answer.
//! 2. If an all-or-nothing limit has less left than its units, nothing is
//!    taken from them: those report their refusal (with its `retry_after`,
//!    read without writing), the others what they have left: what one script
//!    deciding them together answers. (If a limit that had too little left
//!    has room by the time its refusal is read, because another request gave
//!    units back, the steps start again, up to three times.)
//! 3. Otherwise each all-or-nothing limit's units are taken in turn, in the
//!    order of their hash tags (the same order on every gateway, so that
//!    requests racing for the last units of two limits do not each win one).
//!    If a limit refuses (another gateway took its last units since the
//!    check), or a call fails, the units taken so far are given back
//!    ([`refund`], `lua/refund.lua`) and the request is refused.
//! 4. Then the limits counting refused units are charged, all at once, each
//!    alone. If one of them fails (or its plan's tier changed), what the
//!    request took is given back, theirs too; otherwise they keep it.
//!
//! Every step's calls carry the caller's deadline ([`Scripts::by`], on Redis's
//! clock: see [`call::decide`]), not one of their own: a step that Redis runs
//! after the caller stopped waiting (a node that stalled, the steps before it
//! slow) charges nothing, fails, and the units the steps before it took are
//! given back. Refunds have no deadline: run late, they still give back.
//! The caller runs [`acquire`] as a task of its own, so that units taken are
//! given back even when the caller stops waiting. Units can still be kept:
//! when a charge call fails after the script ran (its answer lost, or late
//! past the response timeout, although it ran by its deadline), what it took
//! is not known and so not given back.

use std::sync::Arc;
use std::time::Instant;

use futures_util::future::join_all;
use redis::Script;
use tollgate_core::StoreError;

use crate::call::{self, Outcome, Reply, Request, ScriptLimit, unexpected};
use crate::connection::Connection;
use crate::context::redis_clock::RedisClock;
use crate::refund;

/// How many times the steps start again when a limit that had nothing left
/// at the check has room by the time its refusal is read.
const ATTEMPTS: usize = 3;

/// The scripts and settings a split request runs with.
#[derive(Clone)]
pub(crate) struct Scripts {
    pub(crate) acquire: Arc<Script>,
    pub(crate) refund: Arc<Script>,
    /// Redis's clocks, for the deadlines.
    pub(crate) clock: Arc<RedisClock>,
    /// Microseconds as text; [`REDIS_TIME`](crate::protocol::REDIS_TIME) for
    /// Redis's `TIME`.
    pub(crate) now: String,
    /// When the caller stops waiting: the deadline of every step's calls.
    pub(crate) by: Instant,
    pub(crate) minimum_ttl: u64,
}

/// What a step asks of each limit it calls.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Ask {
    /// Nothing: a check.
    Nothing,
    /// The limit's own units.
    Units,
}

/// Decides `limits`, each with its units, by core's rule, one script call
/// per limit.
pub(crate) async fn acquire(
    connection: Connection,
    scripts: Scripts,
    limits: Vec<ScriptLimit>,
) -> Result<Reply, StoreError> {
    let everyone: Vec<usize> = (0..limits.len()).collect();
    // Asked for units and all or nothing; the limits counting refused units
    // asked for some; the looks are neither.
    let (counting, together): (Vec<usize>, Vec<usize>) = everyone
        .iter()
        .copied()
        .filter(|&position| limits[position].units > 0)
        .partition(|&position| limits[position].rule.counts_refused());
    let mut attempt = 0;
    let outcomes = loop {
        attempt += 1;
        let checks = match each(
            &connection,
            &scripts,
            &limits,
            &everyone,
            Ask::Nothing,
            false,
        )
        .await?
        {
            Ok(checks) => checks,
            Err(reply) => return Ok(reply),
        };
        let refused: Vec<usize> = together
            .iter()
            .copied()
            .filter(|&position| checks[position].remaining < limits[position].units)
            .collect();
        if refused.is_empty() {
            match charge(&connection, &scripts, &limits, &together, checks).await? {
                Reply::Decided(outcomes) => break outcomes,
                other => return Ok(other),
            }
        }
        // The refusals, read without writing: taking units here could keep
        // them for a request that is refused.
        let refusals =
            match each(&connection, &scripts, &limits, &refused, Ask::Units, false).await? {
                Ok(refusals) => refusals,
                Err(reply) => return Ok(reply),
            };
        // A limit that had too little left has room now (another request
        // gave units back): decide again.
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
        break outcomes;
    };
    if counting.is_empty() {
        return Ok(Reply::Decided(outcomes));
    }
    // The limits counting refused units, whatever the others decided.
    let calls = counting
        .iter()
        .map(|&position| one(&connection, &scripts, &limits, position, Ask::Units, true));
    let charged = join_all(calls).await;
    let mut outcomes = outcomes;
    // What the request took, to give back if this step fails: the
    // all-or-nothing limits' units, and the counting limits charged here.
    let mut taken: Vec<usize> = together
        .iter()
        .copied()
        .filter(|&position| outcomes[position].allowed > 0)
        .collect();
    let mut failure: Option<Result<Reply, StoreError>> = None;
    for (&position, result) in counting.iter().zip(charged) {
        match result {
            Ok(Ok(outcome)) => {
                outcomes[position] = outcome;
                taken.push(position);
            }
            Ok(Err(reply)) => {
                failure.get_or_insert(Ok(reply));
            }
            Err(error) => {
                failure.get_or_insert(Err(error));
            }
        }
    }
    match failure {
        None => Ok(Reply::Decided(outcomes)),
        Some(failure) => {
            give_back(&connection, &scripts, &limits, &taken, &outcomes).await;
            failure
        }
    }
}

/// Takes the units of every limit at `positions` in turn (in hash tag
/// order); gives back what was taken when one refuses or a call fails.
/// `checks`: what each limit had left, reported for the limits not reached.
async fn charge(
    connection: &Connection,
    scripts: &Scripts,
    limits: &[ScriptLimit],
    positions: &[usize],
    checks: Vec<Outcome>,
) -> Result<Reply, StoreError> {
    let mut order: Vec<usize> = positions.to_vec();
    order.sort_by(|&a, &b| limits[a].names.hash_tag().cmp(limits[b].names.hash_tag()));
    let mut outcomes = checks;
    let mut taken: Vec<usize> = Vec::new();
    for position in order {
        let charged = each(connection, scripts, limits, &[position], Ask::Units, true).await;
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
        // A limit of several units is all or nothing in its own call too.
        if outcome.allowed == limits[position].units {
            taken.push(position);
            continue;
        }
        // Refused: give back what was taken, and refuse.
        give_back(connection, scripts, limits, &taken, &outcomes).await;
        for position in taken {
            let charge = outcomes[position];
            outcomes[position] = Outcome {
                allowed: 0,
                remaining: charge.remaining + limits[position].units,
                retry_after: 0,
                ..charge
            };
        }
        return Ok(Reply::Decided(outcomes));
    }
    Ok(Reply::Decided(outcomes))
}

/// Gives back the units taken from each limit at `positions`.
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

/// What `ask` says of the limits at `positions`, each in its own call, all
/// at once: their outcomes in that order, or the reply that ends the request
/// (a tier that changed, with its index in `limits`; a failure).
async fn each(
    connection: &Connection,
    scripts: &Scripts,
    limits: &[ScriptLimit],
    positions: &[usize],
    ask: Ask,
    write: bool,
) -> Result<Result<Vec<Outcome>, Reply>, StoreError> {
    let calls = positions
        .iter()
        .map(|&position| one(connection, scripts, limits, position, ask, write));
    let mut outcomes = Vec::with_capacity(positions.len());
    for result in join_all(calls).await {
        match result? {
            Ok(outcome) => outcomes.push(outcome),
            Err(reply) => return Ok(Err(reply)),
        }
    }
    Ok(Ok(outcomes))
}

/// What `ask` says of the limit at `position`, in a call of its own by the
/// caller's deadline: its outcome, or the reply that ends the request (a
/// tier that changed, with its index in `limits`; a failure). A call Redis
/// ran past the deadline is an error.
async fn one(
    connection: &Connection,
    scripts: &Scripts,
    limits: &[ScriptLimit],
    position: usize,
    ask: Ask,
    write: bool,
) -> Result<Result<Outcome, Reply>, StoreError> {
    let limit = &limits[position];
    let request = Request {
        limits: vec![match ask {
            Ask::Nothing => limit.with_units(0),
            Ask::Units => limit.clone(),
        }],
        write,
        max_wait: None,
    };
    let mut connection = connection.clone();
    let mut replies = call::decide(
        &mut connection,
        &scripts.acquire,
        &scripts.clock,
        &scripts.now,
        scripts.minimum_ttl,
        &[(&request, scripts.by)],
    )
    .await?;
    match replies.pop() {
        Some(Reply::Decided(mut decided)) if decided.len() == 1 => {
            decided.pop().map(Ok).ok_or_else(unexpected)
        }
        Some(Reply::Tier { tier, .. }) => Ok(Err(Reply::Tier {
            index: position,
            tier,
        })),
        Some(failed @ Reply::Failed(_)) => Ok(Err(failed)),
        Some(Reply::Expired) => Err(call::expired()),
        _ => Err(unexpected()),
    }
}
