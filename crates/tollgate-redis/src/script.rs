//! The Lua scripts, assembled from one file per algorithm, and the reading of
//! their replies.

use redis::{Script, Value};

/// The acquire script: the shared helpers, the three algorithms, the entry.
pub(crate) fn acquire() -> Script {
    Script::new(concat!(
        include_str!("../lua/common.lua"),
        include_str!("../lua/fixed_window.lua"),
        include_str!("../lua/sliding_log.lua"),
        include_str!("../lua/token_bucket.lua"),
        include_str!("../lua/acquire.lua"),
    ))
}

/// The refund script: gives back what a request took from one limit (see
/// `lua/refund.lua`).
pub(crate) fn refund() -> Script {
    Script::new(concat!(
        include_str!("../lua/common.lua"),
        include_str!("../lua/sliding_log.lua"),
        include_str!("../lua/refund.lua"),
    ))
}

/// The admin script: tier assignment and reset.
pub(crate) fn admin() -> Script {
    Script::new(include_str!("../lua/admin.lua"))
}

/// The configure script: replaces the shared default policy and bumps its
/// generation. KEYS[1]: the config hash; ARGV[1]: the policy as JSON.
pub(crate) fn configure() -> Script {
    Script::new(
        "redis.call('HSET', KEYS[1], 'policy', ARGV[1]) \
         return redis.call('HINCRBY', KEYS[1], 'generation', 1)",
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

/// The acquire script's reply.
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
/// each: per request a status (0 decided, 1 tier, 2 failed) and its fields.
/// `None` when the reply is not of that shape.
pub(crate) fn read_replies(value: &Value, shapes: &[usize]) -> Option<Vec<Reply>> {
    let Value::Array(items) = value else {
        return None;
    };
    let mut items = items.iter();
    let mut replies = Vec::with_capacity(shapes.len());
    for &limits in shapes {
        let reply = match integer(items.next()?)? {
            0 => Reply::Decided(
                (0..limits)
                    .map(|_| {
                        Some(Outcome {
                            counted_at: integer(items.next()?)?,
                            allowed: integer(items.next()?)?,
                            remaining: integer(items.next()?)?,
                            retry_after: integer(items.next()?)?,
                            reset_after: integer(items.next()?)?,
                        })
                    })
                    .collect::<Option<Vec<_>>>()?,
            ),
            1 => {
                let index = usize::try_from(integer(items.next()?)?)
                    .ok()?
                    .checked_sub(1)?;
                Reply::Tier {
                    index,
                    tier: text(items.next()?)?,
                }
            }
            2 => Reply::Failed(text(items.next()?)?),
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
