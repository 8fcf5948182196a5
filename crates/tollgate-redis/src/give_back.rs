//! Refunds on Redis (`Store::give_back_units` of [`RedisStore`]): units given
//! back to the limits that took them (Envoy's `is_negative_hits`). The limits
//! become [`ScriptLimit`]s and go to `lua/give_back.lua`, this file's Lua
//! twin, whose rule is core's `Limiter::give_back_units`: in one call on a
//! server; on a Redis Cluster, one call per limit (keys in different slots
//! cannot share a call), so a refund is not atomic across keys there: each
//! limit is given back on its own, and a call that fails may leave the
//! others given back. A plan whose tier changed is sent again on its tier;
//! a plan of several policies gives back to each of them, in the plan's call
//! (its policies share its slot).
//!
//! Not to be confused with [`refund`](crate::refund), which undoes what the
//! cluster's split steps took.
//!
//! [`RedisStore`]: crate::RedisStore

use std::sync::{Arc, LazyLock};
use std::time::Duration;

use futures_util::future::join_all;
use redis::{Script, Value};
use tollgate_core::{Decision, Limit, LimitDecision, LimitUnits, PolicyDecision, StoreError};

use crate::call::{self, MAX_SCRIPT_UNITS, ScriptLimit};
use crate::connection::{self, Connection};
use crate::context::Context;
use crate::keys::Space;
use crate::plans::Plans;
use crate::protocol::{
    DECIDED, DEFAULT_TIER, FAILED, NO_OVERDRAFT, NO_TIER, SLIDING_LOG, TIER_CHANGED,
};

/// `lua/give_back.lua` with the helpers and algorithms it calls.
static SCRIPT: LazyLock<Script> = LazyLock::new(crate::script::give_back);

/// Numbers per limit in the script's reply: remaining, retry_after,
/// reset_after.
const LOOK_FIELDS: usize = 3;

/// What a look at a limit saw after its refund, in microseconds.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Look {
    remaining: u64,
    retry_after: u64,
    reset_after: u64,
}

/// The script's reply to one call.
#[derive(Clone, Debug, PartialEq, Eq)]
enum Reply {
    /// One look per limit, in order.
    Looked(Vec<Look>),
    /// The plan of limit `index` (0-based) is on `tier`: nothing was given
    /// back.
    Tier { index: usize, tier: String },
    /// The script refused the call (a counting window charged past its
    /// limit): its message.
    Failed(String),
}

/// Gives back each limit's units at the store's time (`context.now`), within
/// the store's timeout; `minimum_ttl` is the shortest TTL to set (µs). The
/// decisions of core's `Limiter::give_back_units` on a microsecond clock: 0
/// allowed and rejected, and what a look sees after the refund; an exempt
/// plan gets `Decision::exempt(0)`; a plan of several policies gives back the
/// units to each, its further policies' looks in `LimitDecision::further`.
///
/// # Errors
///
/// [`StoreError::Unavailable`] when Redis does not answer in time or fails,
/// or a policy cannot be computed exactly in Redis. On a cluster, limits in
/// other calls may have been given back.
pub(crate) async fn give_back(
    context: &Context,
    minimum_ttl: u64,
    limits: &[LimitUnits<'_>],
) -> Result<Vec<LimitDecision>, StoreError> {
    settle_limits(context, minimum_ttl, limits, None).await
}

/// Charges each limit its units whatever it has left, into a debt of at
/// most `overdraft` units (core's `Limiter::overdraw_units`): the same call
/// as [`give_back`] with the overdraft. A window counting refused units is
/// not charged so, and a quantity the script could not compute exactly
/// (`limit + overdraft`, or a token bucket's `(burst + overdraft) x
/// window` in µs, from 2^52) is refused: both [`StoreError::Unavailable`].
///
/// # Errors
///
/// As [`give_back`], and the above.
pub(crate) async fn overdraw(
    context: &Context,
    minimum_ttl: u64,
    limits: &[LimitUnits<'_>],
    overdraft: u64,
) -> Result<Vec<LimitDecision>, StoreError> {
    settle_limits(context, minimum_ttl, limits, Some(overdraft)).await
}

/// A refund (`overdraft` `None`) or a charge past the limit.
async fn settle_limits(
    context: &Context,
    minimum_ttl: u64,
    limits: &[LimitUnits<'_>],
    overdraft: Option<u64>,
) -> Result<Vec<LimitDecision>, StoreError> {
    let plans = context.plans.load_full();
    let mut decisions: Vec<Option<LimitDecision>> = Vec::with_capacity(limits.len());
    let mut sent = Vec::with_capacity(limits.len());
    for limit in limits {
        match limit.limit {
            Limit::Plan(key) if plans.exempt.contains(key) => {
                decisions.push(Some(LimitDecision {
                    decision: Decision::exempt(0),
                    policy: None,
                    tier: None,
                    name: None,
                    further: Vec::new(),
                }));
                continue;
            }
            Limit::Plan(key) => {
                let names = Arc::new(context.names(Space::Plan, key));
                let tier = context.remembered_tier(&names.tier);
                let tier = tier.unwrap_or_else(|| Arc::from(DEFAULT_TIER));
                sent.push(Group::new(
                    ScriptLimit::plan(names, tier, &plans, limit.units),
                    &plans,
                ));
            }
            Limit::Policy { key, policy } => {
                let names = Arc::new(context.names(Space::Policy, key));
                sent.push(Group::new(
                    ScriptLimit::policy(names, context.policy_rule(policy)?, limit.units),
                    &plans,
                ));
            }
        }
        decisions.push(None);
    }
    if let Some(overdraft) = overdraft {
        for limit in sent.iter().flat_map(Group::limits) {
            check_overdraft(&limit.rule, overdraft)?;
        }
    }
    if !sent.is_empty() {
        let looks = context
            .within(run(context, minimum_ttl, overdraft, &mut sent, &plans))
            .await?;
        let mut answered = sent.iter().zip(looks);
        for slot in decisions.iter_mut().filter(|slot| slot.is_none()) {
            let Some((group, looks)) = answered.next() else {
                return Err(call::unexpected());
            };
            *slot = Some(group.decision(&looks, &plans)?);
        }
    }
    Ok(decisions.into_iter().flatten().collect())
}

/// Whether the Redis store charges `policy` past its limit by `overdraft`
/// units ([`tollgate_core::Store::overdraw_units`]) exactly: not a window
/// counting refused units (which the scripts do not overdraw), and every
/// quantity below 2^52 (`limit + overdraft`; for a token bucket `(burst +
/// overdraft) x window` in microseconds). A gateway checks its routes'
/// `charge` with it at load.
pub fn overdraw_is_exact(policy: &tollgate_core::Policy, overdraft: u64) -> bool {
    const EXACT: u128 = 1 << 52;
    let deepest = match policy.burst() {
        Some(burst) => {
            (u128::from(burst) + u128::from(overdraft)) * u128::from(policy.window_s()) * 1_000_000
        }
        None => u128::from(policy.limit()) + u128::from(overdraft),
    };
    !policy.counts_refused() && deepest < EXACT
}

/// [`overdraw_is_exact`] as the error a call answers.
fn check_overdraft(rule: &crate::plans::ScriptRule, overdraft: u64) -> Result<(), StoreError> {
    if !overdraw_is_exact(&rule.policy, overdraft) {
        return Err(StoreError::Unavailable(if rule.policy.counts_refused() {
            "a window counting refused units is not charged after the response".to_owned()
        } else {
            format!(
                "the Redis store computes exactly up to 2^52: an overdraft of {overdraft} on \
                 this policy goes past it"
            )
        }));
    }
    Ok(())
}

/// A limit as the script gives back to it: the limit itself and, for a plan
/// of several policies, each further policy with its name (on the plan key's
/// state with `:NAME` after it, in its slot), each given back the same units,
/// as core's `Limiter::give_back_units` gives back to every policy of a plan.
struct Group {
    limit: ScriptLimit,
    further: Vec<(Arc<str>, ScriptLimit)>,
}

impl Group {
    fn new(limit: ScriptLimit, plans: &Plans) -> Group {
        let further = limit.further(plans);
        Group { limit, further }
    }

    /// The script limits of the group, the limit first.
    fn limits(&self) -> impl Iterator<Item = &ScriptLimit> {
        std::iter::once(&self.limit).chain(self.further.iter().map(|(_, limit)| limit))
    }

    fn len(&self) -> usize {
        1 + self.further.len()
    }

    /// Moves a plan to `tier` (the one the script found it on): its rule and
    /// its further policies are that tier's.
    fn move_to(&mut self, tier: Arc<str>, plans: &Plans) {
        self.limit.move_to(tier, plans);
        self.further = self.limit.further(plans);
    }

    /// The decision of core's `give_back_units` from the looks at the
    /// group's limits, in order (one per limit).
    fn decision(&self, looks: &[Look], plans: &Plans) -> Result<LimitDecision, StoreError> {
        let decision = |look: &Look| Decision {
            allowed: 0,
            rejected: 0,
            remaining: Some(look.remaining),
            retry_after: Duration::from_micros(look.retry_after),
            reset_after: Duration::from_micros(look.reset_after),
        };
        let (first, rest) = looks.split_first().ok_or_else(call::unexpected)?;
        if rest.len() != self.further.len() {
            return Err(call::unexpected());
        }
        let tier = self.limit.tier.clone();
        Ok(LimitDecision {
            decision: decision(first),
            policy: Some(self.limit.rule.policy),
            name: tier
                .as_deref()
                .and_then(|tier| plans.list_for(tier).first_name.clone()),
            further: self
                .further
                .iter()
                .zip(rest)
                .map(|((name, limit), look)| PolicyDecision {
                    name: Arc::clone(name),
                    policy: limit.rule.policy,
                    decision: decision(look),
                })
                .collect(),
            tier: tier.filter(|tier| &**tier != DEFAULT_TIER),
        })
    }
}

/// One call for every group on a server; one per group (a group shares one
/// slot), all at once, on a cluster. One look per limit of each group, in
/// order.
async fn run(
    context: &Context,
    minimum_ttl: u64,
    overdraft: Option<u64>,
    groups: &mut [Group],
    plans: &Plans,
) -> Result<Vec<Vec<Look>>, StoreError> {
    let now = (context.now)();
    if !context.connection.is_cluster() || groups.len() == 1 {
        return settle(context, &now, minimum_ttl, overdraft, groups, plans).await;
    }
    let calls = groups.iter_mut().map(|group| {
        settle(
            context,
            &now,
            minimum_ttl,
            overdraft,
            std::slice::from_mut(group),
            plans,
        )
    });
    let mut looks = Vec::new();
    for result in join_all(calls).await {
        looks.extend(result?);
    }
    Ok(looks)
}

/// One call for `groups` (all in one slot), sent again on the tier the
/// script found when a plan's tier changed. The looks of each group.
async fn settle(
    context: &Context,
    now: &str,
    minimum_ttl: u64,
    overdraft: Option<u64>,
    groups: &mut [Group],
    plans: &Plans,
) -> Result<Vec<Vec<Look>>, StoreError> {
    for _ in 0..3 {
        let limits: Vec<&ScriptLimit> = groups.iter().flat_map(Group::limits).collect();
        match call(&context.connection, now, minimum_ttl, overdraft, &limits).await? {
            Reply::Failed(message) => return Err(StoreError::Unavailable(message)),
            Reply::Looked(looks) => {
                let mut looks = looks.into_iter();
                return Ok(groups
                    .iter()
                    .map(|group| looks.by_ref().take(group.len()).collect())
                    .collect());
            }
            Reply::Tier { index, tier } => {
                // Only a group's first limit, a plan's, has a tier to check.
                let mut first = 0;
                let group = groups.iter_mut().find(|group| {
                    let found = first == index;
                    first += group.len();
                    found
                });
                let Some(group) = group else {
                    return Err(call::unexpected());
                };
                let tier: Arc<str> = Arc::from(tier.as_str());
                context.remember_tier(&group.limit.names.tier, Arc::clone(&tier));
                group.move_to(tier, plans);
            }
        }
    }
    Err(StoreError::Unavailable(
        "the tier of a key kept changing".into(),
    ))
}

/// One call of the script for `limits` at `now` (µs as text, or
/// [`REDIS_TIME`](crate::protocol::REDIS_TIME)).
async fn call(
    connection: &Connection,
    now: &str,
    minimum_ttl: u64,
    overdraft: Option<u64>,
    limits: &[&ScriptLimit],
) -> Result<Reply, StoreError> {
    let mut connection = connection.clone();
    let mut invocation = SCRIPT.prepare_invoke();
    invocation.arg(now).arg(minimum_ttl);
    match overdraft {
        Some(overdraft) => invocation.arg(overdraft),
        None => invocation.arg(NO_OVERDRAFT),
    };
    for limit in limits {
        invocation
            .key(&limit.names.state)
            .arg(&limit.rule.fields(now, 0))
            .arg(limit.units.min(MAX_SCRIPT_UNITS));
        if limit.rule.algorithm == SLIDING_LOG {
            invocation.key(&limit.names.log);
        }
        match &limit.tier {
            Some(expected) => {
                invocation.key(&limit.names.tier).arg(&**expected);
            }
            None => {
                invocation.arg(NO_TIER);
            }
        }
    }
    let reply: Value = invocation
        .invoke_async(&mut connection)
        .await
        .map_err(|error| connection::unavailable(&error, connection.is_cluster()))?;
    read_reply(&reply, limits.len()).ok_or_else(call::unexpected)
}

/// The script's reply for `limits` limits; `None` when it is not of the
/// script's shape.
fn read_reply(value: &Value, limits: usize) -> Option<Reply> {
    let Value::Array(items) = value else {
        return None;
    };
    let mut items = items.iter();
    let reply = match integer(items.next()?)? {
        DECIDED => Reply::Looked(
            (0..limits)
                .map(|_| {
                    let mut fields = [0; LOOK_FIELDS];
                    for field in &mut fields {
                        *field = integer(items.next()?)?;
                    }
                    let [remaining, retry_after, reset_after] = fields;
                    Some(Look {
                        remaining,
                        retry_after,
                        reset_after,
                    })
                })
                .collect::<Option<Vec<_>>>()?,
        ),
        FAILED => Reply::Failed(match items.next()? {
            Value::BulkString(bytes) => String::from_utf8_lossy(bytes).into_owned(),
            Value::SimpleString(text) => text.clone(),
            _ => return None,
        }),
        TIER_CHANGED => Reply::Tier {
            // The script counts limits from 1.
            index: usize::try_from(integer(items.next()?)?)
                .ok()?
                .checked_sub(1)?,
            tier: match items.next()? {
                Value::BulkString(bytes) => String::from_utf8(bytes.clone()).ok()?,
                Value::SimpleString(text) => text.clone(),
                _ => return None,
            },
        },
        _ => return None,
    };
    items.next().is_none().then_some(reply)
}

fn integer(value: &Value) -> Option<u64> {
    match value {
        Value::Int(number) => u64::try_from(*number).ok(),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_both_shapes_of_reply_and_nothing_else() {
        let looked = Value::Array(vec![
            Value::Int(0),
            Value::Int(3),
            Value::Int(0),
            Value::Int(40_000_000),
            Value::Int(5),
            Value::Int(0),
            Value::Int(0),
        ]);
        assert_eq!(
            read_reply(&looked, 2),
            Some(Reply::Looked(vec![
                Look {
                    remaining: 3,
                    retry_after: 0,
                    reset_after: 40_000_000
                },
                Look {
                    remaining: 5,
                    retry_after: 0,
                    reset_after: 0
                },
            ]))
        );
        // One limit short, one too many.
        assert_eq!(read_reply(&looked, 3), None);
        assert_eq!(read_reply(&looked, 1), None);
        let tier = Value::Array(vec![
            Value::Int(1),
            Value::Int(2),
            Value::BulkString(b"pro".to_vec()),
        ]);
        assert_eq!(
            read_reply(&tier, 2),
            Some(Reply::Tier {
                index: 1,
                tier: "pro".into()
            })
        );
        // An index of 0 (the script counts from 1), a negative number, an
        // unknown status, not an array.
        let zero = Value::Array(vec![Value::Int(1), Value::Int(0), Value::Int(7)]);
        assert_eq!(read_reply(&zero, 1), None);
        let negative = Value::Array(vec![
            Value::Int(0),
            Value::Int(-1),
            Value::Int(0),
            Value::Int(0),
        ]);
        assert_eq!(read_reply(&negative, 1), None);
        assert_eq!(read_reply(&Value::Array(vec![Value::Int(2)]), 0), None);
        assert_eq!(read_reply(&Value::Int(0), 0), None);
    }
}
