//! One operation of the operations contract, read from JSON and checked in the
//! contract's order, so that the first error that applies is the one reported.

use std::fmt;
use std::num::NonZeroU64;

use super::argument::Argument;
use super::read::ReadOperation;
use super::signature::signature;
use crate::key::ApiKey;
use crate::policy::{MAX_VALUE, Policy, PolicyError};

/// A checked operation, borrowing its strings from the JSON it was read from.
#[derive(Debug, PartialEq)]
pub(crate) enum Operation<'a> {
    Request {
        key: ApiKey<'a>,
        now: u64,
    },
    RequestBatch {
        key: ApiKey<'a>,
        now: u64,
        units: NonZeroU64,
    },
    Configure(Policy),
    Reset(ApiKey<'a>),
    Stats {
        now: u64,
    },
    AssignTier {
        key: ApiKey<'a>,
        tier: &'a str,
    },
}

/// Why an operation was refused; shown after `error: `.
#[derive(Debug, PartialEq)]
pub(crate) enum OperationError {
    Malformed,
    Unknown(String),
    WrongArity(&'static str),
    MissingKey,
    InvalidTimestamp,
    Backwards,
    InvalidUnits,
    InvalidPolicy(PolicyError),
    InvalidTier,
}

impl fmt::Display for OperationError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            OperationError::Malformed => f.write_str("malformed operation"),
            OperationError::Unknown(name) => write!(f, "unknown operation: {name}"),
            OperationError::WrongArity(name) => write!(f, "wrong number of arguments: {name}"),
            OperationError::MissingKey => f.write_str("missing api key"),
            OperationError::InvalidTimestamp => f.write_str("invalid timestamp"),
            OperationError::Backwards => f.write_str("timestamp went backwards"),
            OperationError::InvalidUnits => f.write_str("invalid units"),
            OperationError::InvalidPolicy(reason) => write!(f, "invalid policy: {reason}"),
            OperationError::InvalidTier => f.write_str("invalid tier"),
        }
    }
}

impl<'a> Operation<'a> {
    /// Checks an operation as read. `latest` is the latest timestamp accepted
    /// so far, below which a timestamp has gone backwards.
    pub(crate) fn parse(
        operation: &'a ReadOperation<'_>,
        latest: Option<u64>,
    ) -> Result<Self, OperationError> {
        let name = operation.name.as_deref().ok_or(OperationError::Malformed)?;
        let (name, arity) =
            signature(name).ok_or_else(|| OperationError::Unknown(name.to_owned()))?;
        if operation.count != arity {
            return Err(OperationError::WrongArity(name));
        }
        let now = |argument: &Argument<'_>| timestamp(argument, latest);
        Ok(match (name, operation.arguments.as_slice()) {
            ("request", [key, at]) => Operation::Request {
                key: api_key(key)?,
                now: now(at)?,
            },
            ("request_batch", [key, at, units]) => {
                let key = api_key(key)?;
                let now = now(at)?;
                Operation::RequestBatch {
                    key,
                    now,
                    units: count(units).ok_or(OperationError::InvalidUnits)?,
                }
            }
            ("configure", [policy]) => {
                Operation::Configure(policy.to_policy().map_err(OperationError::InvalidPolicy)?)
            }
            ("reset", [key]) => Operation::Reset(api_key(key)?),
            ("stats", [at]) => Operation::Stats { now: now(at)? },
            ("assign_tier", [key, tier]) => Operation::AssignTier {
                key: api_key(key)?,
                tier: tier.as_str().ok_or(OperationError::InvalidTier)?,
            },
            _ => return Err(OperationError::Malformed),
        })
    }
}

fn api_key<'a>(argument: &'a Argument<'_>) -> Result<ApiKey<'a>, OperationError> {
    argument
        .as_str()
        .and_then(ApiKey::parse)
        .ok_or(OperationError::MissingKey)
}

/// A JSON integer from 0 to 2^63-1 (never a boolean, a float or a string).
fn timestamp(argument: &Argument<'_>, latest: Option<u64>) -> Result<u64, OperationError> {
    let now = argument
        .as_u64()
        .filter(|now| *now <= MAX_VALUE)
        .ok_or(OperationError::InvalidTimestamp)?;
    match latest {
        Some(latest) if now < latest => Err(OperationError::Backwards),
        _ => Ok(now),
    }
}

/// A JSON integer from 1 to 2^63-1.
fn count(argument: &Argument<'_>) -> Option<NonZeroU64> {
    argument
        .as_u64()
        .filter(|units| *units <= MAX_VALUE)
        .and_then(NonZeroU64::new)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::value::{RawValue, to_raw_value};
    use serde_json::{Value, json};

    fn read(text: &RawValue) -> ReadOperation<'_> {
        let mut operation = ReadOperation::new();
        operation.read_text(text);
        operation
    }

    fn error(op: Value) -> String {
        let text = to_raw_value(&op).unwrap();
        Operation::parse(&read(&text), Some(10))
            .unwrap_err()
            .to_string()
    }

    fn parsed(op: Value, expected: Operation<'_>) {
        let text = to_raw_value(&op).unwrap();
        assert_eq!(Operation::parse(&read(&text), None), Ok(expected));
    }

    #[test]
    fn errors_come_in_the_contract_order() {
        assert_eq!(error(json!([])), "malformed operation");
        assert_eq!(error(json!({"request": 1})), "malformed operation");
        assert_eq!(error(json!([1, "request"])), "malformed operation");
        assert_eq!(error(json!(["ping", 1])), "unknown operation: ping");
        assert_eq!(
            error(json!(["request", "", 1, 2])),
            "wrong number of arguments: request"
        );
        assert_eq!(error(json!(["request", "", -1])), "missing api key");
        assert_eq!(error(json!(["request", "k", 1.0])), "invalid timestamp");
        assert_eq!(error(json!(["request", "k", true])), "invalid timestamp");
        assert_eq!(
            error(json!(["request", "k", 9_223_372_036_854_775_808u64])),
            "invalid timestamp"
        );
        assert_eq!(
            error(json!(["request", "k", 9])),
            "timestamp went backwards"
        );
        assert_eq!(
            error(json!(["request_batch", "k", 9, 0])),
            "timestamp went backwards"
        );
        assert_eq!(error(json!(["request_batch", "k", 11, 0])), "invalid units");
        assert_eq!(
            error(json!(["request_batch", "k", 11, "1"])),
            "invalid units"
        );
        assert_eq!(error(json!(["assign_tier", null, 3])), "missing api key");
        assert_eq!(error(json!(["assign_tier", "k", 3])), "invalid tier");
        assert!(error(json!(["configure", "fixed_window"])).starts_with("invalid policy: "));
    }

    #[test]
    fn reads_every_operation() {
        let key = ApiKey::parse("sk_a").unwrap();
        parsed(
            json!([
                "request_batch",
                "Bearer sk_a",
                10,
                9_223_372_036_854_775_807u64
            ]),
            Operation::RequestBatch {
                key,
                now: 10,
                units: NonZeroU64::new(9_223_372_036_854_775_807).unwrap(),
            },
        );
        parsed(json!(["stats", 0]), Operation::Stats { now: 0 });
        parsed(
            json!(["assign_tier", "sk_a", ""]),
            Operation::AssignTier { key, tier: "" },
        );
        parsed(
            json!(["configure", {"algorithm": "sliding_log", "limit": 2, "window_s": 10}]),
            Operation::Configure(Policy::sliding_log(2, 10).unwrap()),
        );
    }
}
