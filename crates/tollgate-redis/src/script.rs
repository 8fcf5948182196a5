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

/// Reads a reply; `None` when it is not of the script's shape.
pub(crate) fn read_reply(value: &Value) -> Option<Reply> {
    let Value::Array(items) = value else {
        return None;
    };
    if let [Value::BulkString(tag), message] = items.as_slice()
        && tag.as_slice() == b"error"
    {
        return Some(Reply::Failed(text(message)?));
    }
    if let [Value::BulkString(tag), index, tier] = items.as_slice()
        && tag.as_slice() == b"tier"
    {
        let index = usize::try_from(integer(index)?).ok()?.checked_sub(1)?;
        return Some(Reply::Tier {
            index,
            tier: text(tier)?,
        });
    }
    items
        .iter()
        .map(|item| match item {
            Value::Array(numbers) if numbers.len() == 4 => Some(Outcome {
                allowed: integer(&numbers[0])?,
                remaining: integer(&numbers[1])?,
                retry_after: integer(&numbers[2])?,
                reset_after: integer(&numbers[3])?,
            }),
            _ => None,
        })
        .collect::<Option<Vec<_>>>()
        .map(Reply::Decided)
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
    fn reads_both_shapes_of_reply() {
        let decided = Value::Array(vec![Value::Array(vec![
            Value::Int(1),
            Value::Int(4),
            Value::Int(0),
            Value::Int(60_000_000),
        ])]);
        assert_eq!(
            read_reply(&decided),
            Some(Reply::Decided(vec![Outcome {
                allowed: 1,
                remaining: 4,
                retry_after: 0,
                reset_after: 60_000_000
            }]))
        );
        let tier = Value::Array(vec![
            Value::BulkString(b"tier".to_vec()),
            Value::Int(2),
            Value::BulkString(b"pro".to_vec()),
        ]);
        assert_eq!(
            read_reply(&tier),
            Some(Reply::Tier {
                index: 1,
                tier: "pro".into()
            })
        );
        assert_eq!(read_reply(&Value::Int(3)), None);
        assert_eq!(read_reply(&Value::Array(vec![Value::Int(-1)])), None);
    }
}
