//! One call of the acquire script (`lua/acquire.lua`, its Lua twin): the
//! requests it carries, each a list of [`ScriptLimit`]s; the arguments they
//! become ([`invoke`]); the flat reply read back ([`read_replies`]). Each
//! limit's rule runs `lua/fixed_window.lua`, `lua/sliding_log.lua` or
//! `lua/token_bucket.lua` (`lua/fixed_window.lua` counting refused units
//! for [`COUNTING_FIXED_WINDOW`](crate::protocol::COUNTING_FIXED_WINDOW)).
//! The codes of both directions are the constants of
//! [`protocol`](crate::protocol).
//! Every call goes through here: the batcher's shared calls, a lone request's
//! call, each step of a split request, `inspect`'s read.

use std::collections::HashMap;
use std::sync::Arc;

use redis::{Script, Value};
use tollgate_core::{PolicyError, PreparedPolicy, StoreError};

use crate::connection::{self, Connection};
use crate::keys::KeyNames;
use crate::plans::{Plans, ScriptRule};
use crate::protocol::{
    DECIDED, FAILED, NO_TIER, OUTCOME_FIELDS, READ_ONLY, SLIDING_LOG, TIER_CHANGED, WRITE,
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
    /// Envoy descriptor's limit), asked for `units`.
    pub(crate) fn policy(
        names: Arc<KeyNames>,
        policy: &PreparedPolicy,
        units: u64,
    ) -> Result<Self, PolicyError> {
        Ok(ScriptLimit {
            names,
            tier: None,
            rule: Arc::new(ScriptRule::for_prepared(policy)?),
            units: units.min(MAX_SCRIPT_UNITS),
        })
    }

    /// The same limit asked for `units` instead.
    pub(crate) fn with_units(&self, units: u64) -> Self {
        ScriptLimit {
            units: units.min(MAX_SCRIPT_UNITS),
            ..self.clone()
        }
    }

    /// Moves a plan to `tier` (the one the script found it on) and its rule.
    pub(crate) fn move_to(&mut self, tier: Arc<str>, plans: &Plans) {
        self.rule = Arc::clone(plans.rule_for(&tier));
        self.tier = Some(tier);
    }
}

/// One request: its limits (each with its units), whether it writes.
#[derive(Clone, Debug)]
pub(crate) struct Request {
    pub(crate) limits: Vec<ScriptLimit>,
    pub(crate) write: bool,
}

/// Runs `requests` in one call of the acquire `script` at `now`
/// ([`REDIS_TIME`](crate::protocol::REDIS_TIME): Redis's time). The rules of
/// the call are sent once each, the requests' limits name them by number
/// (see `lua/acquire.lua`).
pub(crate) async fn invoke(
    connection: &mut Connection,
    script: &Script,
    now: &str,
    minimum_ttl: u64,
    requests: &[&Request],
) -> Result<Vec<Reply>, StoreError> {
    let mut rules: HashMap<&str, usize> = HashMap::new();
    let mut distinct: Vec<&ScriptRule> = Vec::new();
    for limit in requests.iter().flat_map(|request| &request.limits) {
        rules.entry(limit.rule.version.as_str()).or_insert_with(|| {
            distinct.push(&limit.rule);
            distinct.len()
        });
    }
    let mut invocation = script.prepare_invoke();
    invocation.arg(now).arg(minimum_ttl).arg(distinct.len());
    for rule in &distinct {
        invocation.arg(&rule.fields());
    }
    invocation.arg(requests.len());
    for request in requests {
        invocation
            .arg(request.limits.len())
            .arg(if request.write { WRITE } else { READ_ONLY });
        for limit in &request.limits {
            let names = &limit.names;
            invocation
                .key(&names.state)
                .arg(rules.get(limit.rule.version.as_str()).copied().unwrap_or(0))
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
        .map(|request| request.limits.len())
        .collect();
    read_replies(&reply, &shapes).ok_or_else(unexpected)
}

/// The error of a reply that is not of the shape the script answers.
pub(crate) fn unexpected() -> StoreError {
    StoreError::Unavailable("unexpected reply from the script".into())
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
    /// The plan of limit `index` (0-based) is on `tier`, not the one sent.
    Tier {
        index: usize,
        tier: String,
    },
    /// The request failed inside the script (the others of the call did not).
    Failed(String),
}

/// Reads the acquire script's flat reply for requests of `shapes[i]` limits
/// each: per request a status ([`DECIDED`], [`TIER_CHANGED`], [`FAILED`]) and
/// its fields. `None` when the reply is not of that shape.
pub(crate) fn read_replies(value: &Value, shapes: &[usize]) -> Option<Vec<Reply>> {
    let Value::Array(items) = value else {
        return None;
    };
    let mut items = items.iter();
    let mut replies = Vec::with_capacity(shapes.len());
    for &limits in shapes {
        let reply = match integer(items.next()?)? {
            DECIDED => Reply::Decided(
                (0..limits)
                    .map(|_| {
                        let mut fields = [0; OUTCOME_FIELDS];
                        for field in &mut fields {
                            *field = integer(items.next()?)?;
                        }
                        let [counted_at, allowed, remaining, retry_after, reset_after] = fields;
                        Some(Outcome {
                            counted_at,
                            allowed,
                            remaining,
                            retry_after,
                            reset_after,
                        })
                    })
                    .collect::<Option<Vec<_>>>()?,
            ),
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
            _ => return None,
        };
        replies.push(reply);
    }
    items.next().is_none().then_some(replies)
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
mod tests {
    use super::*;

    #[test]
    fn reads_every_shape_of_reply() {
        let reply = Value::Array(vec![
            Value::Int(0),
            Value::Int(1_800_000_000_000_000),
            Value::Int(1),
            Value::Int(4),
            Value::Int(0),
            Value::Int(60_000_000),
            Value::Int(1),
            Value::Int(2),
            Value::BulkString(b"pro".to_vec()),
            Value::Int(2),
            Value::BulkString(b"WRONGTYPE".to_vec()),
        ]);
        assert_eq!(
            read_replies(&reply, &[1, 2, 1]),
            Some(vec![
                Reply::Decided(vec![Outcome {
                    counted_at: 1_800_000_000_000_000,
                    allowed: 1,
                    remaining: 4,
                    retry_after: 0,
                    reset_after: 60_000_000
                }]),
                Reply::Tier {
                    index: 1,
                    tier: "pro".into()
                },
                Reply::Failed("WRONGTYPE".into()),
            ])
        );
        // Too short, too long, an unknown status, a negative number.
        assert_eq!(read_replies(&reply, &[2, 2, 1]), None);
        assert_eq!(read_replies(&reply, &[1, 2]), None);
        assert_eq!(read_replies(&Value::Array(vec![Value::Int(3)]), &[1]), None);
        let negative = Value::Array(vec![Value::Int(0), Value::Int(5), Value::Int(-1)]);
        assert_eq!(read_replies(&negative, &[1]), None);
        assert_eq!(read_replies(&Value::Int(3), &[1]), None);
    }
}
