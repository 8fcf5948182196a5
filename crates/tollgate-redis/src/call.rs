//! One call of the acquire script (`lua/acquire.lua`, its Lua twin): the
//! requests it carries, each a list of [`ScriptLimit`]s and (when it may
//! write) a deadline; the arguments they become ([`decide`], [`invoke`] for
//! reads); the flat reply read back ([`read_replies`]). Each
//! limit's rule runs `lua/fixed_window.lua`, `lua/counting_window.lua` (for
//! [`COUNTING_FIXED_WINDOW`](crate::protocol::COUNTING_FIXED_WINDOW)),
//! `lua/sliding_log.lua` or `lua/token_bucket.lua`.
//! The codes of both directions are the constants of
//! [`protocol`](crate::protocol).
//! Every call goes through here: the batcher's shared calls, a lone request's
//! call, each step of a split request, `inspect`'s read.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Instant;

use redis::{Script, Value};
use tollgate_core::StoreError;

use crate::connection::{self, Connection};
use crate::context::redis_clock::{Node, RedisClock};
use crate::keys::KeyNames;
use crate::plans::{Plans, ScriptRule};
use crate::protocol::{
    DECIDED, EXPIRED, FAILED, NO_DEADLINE, NO_TIER, NO_WAIT, OUTCOME_FIELDS, READ_ONLY, RESERVED,
    SLIDING_LOG, TIER_CHANGED, WRITE,
};

/// One limit of a request as the scripts take it: the Redis keys of its
/// limited key, the tier its plan is expected on, the rule it is held to and
/// the units the request asks of it.
#[derive(Clone, Debug)]
pub(crate) struct ScriptLimit {
    pub(crate) names: Arc<KeyNames>,
    /// The tier the plan is expected on; `None` for a policy limit (sent as
    /// [`NO_TIER`], which no tier is named).
    pub(crate) tier: Option<Arc<str>>,
    pub(crate) rule: Arc<ScriptRule>,
    /// The units asked of it, at most [`MAX_SCRIPT_UNITS`] (0: a look).
    pub(crate) units: u64,
}

/// The most units one limit takes in a script call (the scripts' exact
/// range); more are sent as this many: no limit is larger and a counting
/// window's count stops there, so no decision changes.
pub(crate) const MAX_SCRIPT_UNITS: u64 = 1 << 52;

impl ScriptLimit {
    /// The plan whose keys are `names`, expected on `tier`: held to that
    /// tier's rule in `plans`, asked for `units`.
    pub(crate) fn plan(names: Arc<KeyNames>, tier: Arc<str>, plans: &Plans, units: u64) -> Self {
        ScriptLimit {
            names,
            rule: Arc::clone(plans.rule_for(&tier)),
            tier: Some(tier),
            units: units.min(MAX_SCRIPT_UNITS),
        }
    }

    /// A limit held to a policy given with the request (a route budget, an
    /// Envoy descriptor's limit), its `rule` ([`ScriptRule::for_prepared`],
    /// kept by [`Context::policy_rule`](crate::context::Context::policy_rule)),
    /// asked for `units`.
    pub(crate) fn policy(names: Arc<KeyNames>, rule: Arc<ScriptRule>, units: u64) -> Self {
        ScriptLimit {
            names,
            tier: None,
            rule,
            units: units.min(MAX_SCRIPT_UNITS),
        }
    }

    /// The same limit asked for `units` instead.
    pub(crate) fn with_units(&self, units: u64) -> Self {
        ScriptLimit {
            units: units.min(MAX_SCRIPT_UNITS),
            ..self.clone()
        }
    }

    /// The further policies of a plan limit on its tier's list (none for a
    /// policy limit or a one-policy plan), each with its name: held to its
    /// rule on the plan key's state with `:NAME` after it (the same hash
    /// tag, so one script call decides them all), asked the same units,
    /// with no tier to check (the plan's own limit checks it, and a change
    /// of tier answers for the whole request).
    pub(crate) fn further(&self, plans: &Plans) -> Vec<(Arc<str>, ScriptLimit)> {
        let Some(tier) = &self.tier else {
            return Vec::new();
        };
        plans
            .list_for(tier)
            .further
            .iter()
            .map(|further| {
                let limit = ScriptLimit {
                    names: Arc::new(self.names.further(&further.name)),
                    tier: None,
                    rule: Arc::clone(&further.rule),
                    units: self.units,
                };
                (Arc::clone(&further.name), limit)
            })
            .collect()
    }

    /// Moves a plan to `tier` (the one the script found it on) and its rule.
    pub(crate) fn move_to(&mut self, tier: Arc<str>, plans: &Plans) {
        self.rule = Arc::clone(plans.rule_for(&tier));
        self.tier = Some(tier);
    }
}

/// One request: its limits (each with its units), whether it writes, and how
/// long it may wait rather than be refused.
#[derive(Clone, Debug)]
pub(crate) struct Request {
    pub(crate) limits: Vec<ScriptLimit>,
    pub(crate) write: bool,
    /// Microseconds it may wait for its turn (`reserve` in
    /// `lua/acquire.lua`, core's `Limiter::reserve_units`), answered by
    /// [`Reply::Reserved`]; `None` (sent as [`NO_WAIT`]) for a request decided
    /// at once.
    pub(crate) max_wait: Option<u64>,
}

/// Runs `requests`, each with the instant its caller stops waiting, in one
/// call of the acquire `script` at `now` ([`REDIS_TIME`]: Redis's time):
/// each request is decided only if Redis runs the call by its deadline (its
/// caller's, on Redis's own clock, a margin earlier: see [`RedisClock`]), and
/// is [`Reply::Expired`] otherwise, having done nothing. The node's clock is
/// learnt first when it is not known yet (a `TIME`), and again from the reply.
///
/// [`REDIS_TIME`]: crate::protocol::REDIS_TIME
///
/// # Errors
///
/// [`StoreError::Unavailable`] when Redis fails or the reply is not the
/// script's.
pub(crate) async fn decide(
    connection: &mut Connection,
    script: &Script,
    clock: &RedisClock,
    now: &str,
    minimum_ttl: u64,
    requests: &[(&Request, Instant)],
) -> Result<Vec<Reply>, StoreError> {
    let first_key = requests
        .iter()
        .flat_map(|(request, _)| &request.limits)
        .map(|limit| limit.names.state.as_str())
        .next()
        .unwrap_or_default();
    let node = Node::of(connection, first_key);
    let offset = clock.offset(connection, node).await?;
    let deadlines: Vec<String> = requests
        .iter()
        .map(|&(_, by)| clock.deadline(offset, by).to_string())
        .collect();
    let sent = Instant::now();
    let timed: Vec<(&Request, &str)> = requests
        .iter()
        .zip(&deadlines)
        .map(|(&(request, _), deadline)| (request, deadline.as_str()))
        .collect();
    let (time, replies) = call(connection, script, now, minimum_ttl, &timed).await?;
    clock.learn(node, sent, Instant::now(), time);
    Ok(replies)
}

/// Runs `requests`, which only read (`inspect`), in one call of the acquire
/// `script` at `now`, with no deadline: the script refuses a request that
/// writes without one ([`Reply::Failed`]).
///
/// # Errors
///
/// [`StoreError::Unavailable`] when Redis fails or the reply is not the
/// script's.
pub(crate) async fn invoke(
    connection: &mut Connection,
    script: &Script,
    now: &str,
    minimum_ttl: u64,
    requests: &[&Request],
) -> Result<Vec<Reply>, StoreError> {
    let untimed: Vec<(&Request, &str)> = requests
        .iter()
        .map(|&request| (request, NO_DEADLINE))
        .collect();
    let (_, replies) = call(connection, script, now, minimum_ttl, &untimed).await?;
    Ok(replies)
}

/// One call of the acquire script: `requests` with their deadlines as the
/// script takes them. The rules of the call are sent once each, the
/// requests' limits name them by number (see `lua/acquire.lua`). Redis's
/// `TIME` when it ran, and the replies.
async fn call(
    connection: &mut Connection,
    script: &Script,
    now: &str,
    minimum_ttl: u64,
    requests: &[(&Request, &str)],
) -> Result<(u64, Vec<Reply>), StoreError> {
    // A rule is named by its version and its limit: windows counting refused
    // units share a version across limits (a changed limit keeps the count).
    let mut rules: HashMap<(&str, u64), usize> = HashMap::new();
    let mut distinct: Vec<&ScriptRule> = Vec::new();
    for limit in requests.iter().flat_map(|(request, _)| &request.limits) {
        rules.entry(limit.rule.name()).or_insert_with(|| {
            distinct.push(&limit.rule);
            distinct.len()
        });
    }
    let mut invocation = script.prepare_invoke();
    invocation.arg(now).arg(minimum_ttl).arg(distinct.len());
    // A waiting request's turn is charged up to its wait ahead.
    let horizon = requests
        .iter()
        .filter_map(|(request, _)| request.max_wait)
        .max()
        .unwrap_or(0);
    for rule in &distinct {
        invocation.arg(&rule.fields(now, horizon));
    }
    invocation.arg(requests.len());
    for &(request, deadline) in requests {
        invocation
            .arg(request.limits.len())
            .arg(if request.write { WRITE } else { READ_ONLY })
            .arg(deadline);
        match request.max_wait {
            Some(max_wait) => invocation.arg(max_wait),
            None => invocation.arg(NO_WAIT),
        };
        for limit in &request.limits {
            let names = &limit.names;
            invocation
                .key(&names.state)
                .arg(rules.get(&limit.rule.name()).copied().unwrap_or(0))
                .arg(limit.units.min(MAX_SCRIPT_UNITS));
            if limit.rule.algorithm == SLIDING_LOG {
                invocation.key(&names.log);
            }
            match &limit.tier {
                Some(expected) => {
                    invocation.key(&names.tier).arg(&**expected);
                }
                None => {
                    invocation.arg(NO_TIER);
                }
            }
        }
    }
    let reply: Value = invocation
        .invoke_async(connection)
        .await
        .map_err(|error| connection::unavailable(&error, connection.is_cluster()))?;
    let shapes: Vec<usize> = requests
        .iter()
        .map(|(request, _)| request.limits.len())
        .collect();
    read_replies(&reply, &shapes).ok_or_else(unexpected)
}

/// The error of a reply that is not of the shape the script answers.
pub(crate) fn unexpected() -> StoreError {
    StoreError::Unavailable("unexpected reply from the script".into())
}

/// The error of a request Redis ran past its deadline ([`Reply::Expired`]).
pub(crate) fn expired() -> StoreError {
    StoreError::Unavailable(
        "Redis ran the call after its deadline (it had stalled); nothing was charged".into(),
    )
}

/// What one limit decided, in microseconds.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Outcome {
    /// The time the units count at, in microseconds: the window's start
    /// (fixed window), the run's time (sliding log), the decision's time
    /// (token bucket). A refund names it.
    pub(crate) counted_at: u64,
    pub(crate) allowed: u64,
    pub(crate) remaining: u64,
    pub(crate) retry_after: u64,
    pub(crate) reset_after: u64,
}

/// The acquire script's reply to one request.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum Reply {
    Decided(Vec<Outcome>),
    /// A request that may wait: its wait (µs; 0 when refused or served at
    /// once) and its outcomes, each counted at the time it is served.
    Reserved {
        wait: u64,
        outcomes: Vec<Outcome>,
    },
    /// The plan of limit `index` (0-based) is on `tier`, not the one sent.
    Tier {
        index: usize,
        tier: String,
    },
    /// The request failed inside the script (the others of the call did
    /// not), or could not be read from the call's arguments (then neither
    /// could those after it, which fail too).
    Failed(String),
    /// Redis ran the call past the request's deadline: its caller has given
    /// up, and nothing was read or written.
    Expired,
}

/// Reads the acquire script's flat reply for requests of `shapes[i]` limits
/// each: Redis's `TIME` (µs) when it ran, then per request a status
/// ([`DECIDED`], [`RESERVED`], [`TIER_CHANGED`], [`FAILED`], [`EXPIRED`]) and its fields (a
/// decided request's outcomes as one text: [`OUTCOME_FIELDS`] numbers per
/// limit, separated by single spaces). `None` when the reply is not of that
/// shape.
pub(crate) fn read_replies(value: &Value, shapes: &[usize]) -> Option<(u64, Vec<Reply>)> {
    let Value::Array(items) = value else {
        return None;
    };
    let mut items = items.iter();
    let time = integer(items.next()?)?;
    let mut replies = Vec::with_capacity(shapes.len());
    for &limits in shapes {
        let reply = match integer(items.next()?)? {
            DECIDED => Reply::Decided(outcomes(items.next()?, limits)?),
            RESERVED => Reply::Reserved {
                wait: integer(items.next()?)?,
                outcomes: outcomes(items.next()?, limits)?,
            },
            TIER_CHANGED => {
                // The script counts limits from 1.
                let index = usize::try_from(integer(items.next()?)?)
                    .ok()?
                    .checked_sub(1)?;
                Reply::Tier {
                    index,
                    tier: text(items.next()?)?,
                }
            }
            FAILED => Reply::Failed(text(items.next()?)?),
            EXPIRED => Reply::Expired,
            _ => return None,
        };
        replies.push(reply);
    }
    items.next().is_none().then_some((time, replies))
}

/// The `limits` outcomes of a decided request, from the text the script
/// sends them in: [`OUTCOME_FIELDS`] decimal numbers per limit, each
/// separated from the next by one space, nothing else.
fn outcomes(value: &Value, limits: usize) -> Option<Vec<Outcome>> {
    let Value::BulkString(bytes) = value else {
        return None;
    };
    if limits == 0 {
        // A request of no limits (none is sent today): an empty text.
        return bytes.is_empty().then(Vec::new);
    }
    let mut numbers = bytes.split(|&byte| byte == b' ').map(decimal);
    let mut outcomes = Vec::with_capacity(limits);
    for _ in 0..limits {
        let mut fields = [0; OUTCOME_FIELDS];
        for field in &mut fields {
            *field = numbers.next()??;
        }
        let [counted_at, allowed, remaining, retry_after, reset_after] = fields;
        outcomes.push(Outcome {
            counted_at,
            allowed,
            remaining,
            retry_after,
            reset_after,
        });
    }
    numbers.next().is_none().then_some(outcomes)
}

/// A number in decimal digits only (no sign, no spaces), within `u64`.
fn decimal(digits: &[u8]) -> Option<u64> {
    if digits.is_empty() {
        return None;
    }
    digits.iter().try_fold(0u64, |number, &digit| {
        if !digit.is_ascii_digit() {
            return None;
        }
        number.checked_mul(10)?.checked_add(u64::from(digit - b'0'))
    })
}

fn integer(value: &Value) -> Option<u64> {
    match value {
        Value::Int(number) => u64::try_from(*number).ok(),
        _ => None,
    }
}

fn text(value: &Value) -> Option<String> {
    match value {
        Value::BulkString(bytes) => String::from_utf8(bytes.clone()).ok(),
        Value::SimpleString(text) => Some(text.clone()),
        _ => None,
    }
}

#[cfg(test)]
mod tests;
