//! The operations harness behind `tollgate run`: a JSON array of operations
//! applied in order to a fresh [`Limiter`], one [`Output`] per operation, as
//! `tests/conformance/CONTRACT.md` specifies.

mod argument;
mod operation;
mod output;

use std::fmt;

use serde::de::{Deserializer as _, SeqAccess, Visitor};
use serde_json::Value;

use crate::config::{ConfigError, LimiterConfig};
use crate::decision::Decision;
use crate::limiter::Limiter;
use crate::resolution::Resolution;

use argument::{Argument, OperationSeed};
use operation::Operation;
pub use output::Output;

/// A limiter driven by JSON operations, with the contract's clock: timestamps in
/// whole seconds that never go backwards.
///
/// ```
/// use serde_json::json;
/// use tollgate_core::{LimiterConfig, Harness};
///
/// let mut harness = Harness::new(&LimiterConfig::default()).unwrap();
/// let output = harness.apply(&json!(["request", "Bearer sk_a", 120]));
/// assert_eq!(
///     serde_json::to_value(output).unwrap(),
///     json!({"allowed": true, "remaining": 4, "retry_after": 0})
/// );
/// ```
#[derive(Debug)]
pub struct Harness {
    limiter: Limiter,
    /// The latest timestamp accepted, in seconds.
    latest: Option<u64>,
}

/// The input is not a JSON array (or not JSON at all); the message says where.
#[derive(Debug, thiserror::Error)]
#[error("input is not a JSON array of operations: {0}")]
pub struct InputError(serde_json::Error);

impl From<serde_json::Error> for InputError {
    fn from(error: serde_json::Error) -> Self {
        InputError(error)
    }
}

impl Harness {
    /// A fresh harness over a limiter built from `config`, counting seconds.
    ///
    /// # Errors
    ///
    /// [`ConfigError`] when the configuration is invalid.
    pub fn new(config: &LimiterConfig) -> Result<Self, ConfigError> {
        Ok(Harness {
            limiter: Limiter::new(config, Resolution::Seconds)?,
            latest: None,
        })
    }

    /// Applies one operation. An operation that returns an error changes nothing.
    pub fn apply(&mut self, operation: &Value) -> Output {
        let (name, arguments) = split(operation);
        self.apply_arguments(name, &arguments)
    }

    fn apply_arguments(&mut self, name: Option<&str>, arguments: &[Argument<'_>]) -> Output {
        match Operation::parse(name, arguments, self.latest) {
            Ok(operation) => self.execute(operation),
            Err(error) => Output::Error(format!("error: {error}")),
        }
    }

    /// Runs a whole document, a JSON array of operations, writing the JSON array
    /// of outputs to `out`. The array is read one operation at a time, so memory
    /// holds one operation and the outputs, never the whole parsed input. Any
    /// nesting depth is accepted (an argument nested too deep is just a wrong
    /// argument).
    ///
    /// # Errors
    ///
    /// [`InputError`] when `input` is not one JSON array; `out` is then
    /// incomplete and should be discarded.
    pub fn run(&mut self, input: &[u8], out: &mut Vec<u8>) -> Result<(), InputError> {
        let mut deserializer = serde_json::Deserializer::from_slice(input);
        // Any depth is a valid array; the stack grows on the heap as needed.
        deserializer.disable_recursion_limit();
        serde_stacker::Deserializer::new(&mut deserializer)
            .deserialize_seq(Operations { harness: self, out })?;
        deserializer.end()?;
        Ok(())
    }

    fn execute(&mut self, operation: Operation<'_>) -> Output {
        let limiter = &self.limiter;
        match operation {
            Operation::Request { key, now } => {
                self.latest = Some(now);
                let decision = limiter.request(key.as_str(), now);
                Output::Request {
                    allowed: decision.is_allowed(),
                    remaining: decision.remaining,
                    retry_after: seconds(&decision),
                }
            }
            Operation::RequestBatch { key, now, units } => {
                self.latest = Some(now);
                let decision = limiter.request_batch(key.as_str(), now, units);
                Output::Batch {
                    allowed: decision.allowed,
                    rejected: decision.rejected,
                    remaining: decision.remaining,
                    retry_after: seconds(&decision),
                }
            }
            Operation::Configure(policy) => match limiter.configure(policy) {
                Ok(policy) => Output::Policy(policy),
                Err(reason) => Output::Error(format!("error: invalid policy: {reason}")),
            },
            Operation::Reset(key) => {
                Output::Reset(limiter.reset(key.as_str(), self.latest.unwrap_or(0)))
            }
            Operation::Stats { now } => {
                self.latest = Some(now);
                let stats = limiter.stats(now);
                Output::Stats {
                    tracked_keys: stats.tracked_keys,
                    allowed: stats.allowed,
                    rejected: stats.rejected,
                }
            }
            Operation::AssignTier { key, tier } => match limiter.assign_tier(key.as_str(), tier) {
                Ok(()) => Output::Tier(tier.to_owned()),
                Err(unknown) => Output::Error(format!("error: {unknown}")),
            },
        }
    }
}

/// `retry_after` in the harness's unit, whole seconds (exact at this resolution).
fn seconds(decision: &Decision) -> u64 {
    decision.retry_after.as_secs()
}

/// The top-level array, applied element by element as it is read.
struct Operations<'a> {
    harness: &'a mut Harness,
    out: &'a mut Vec<u8>,
}

impl<'de> Visitor<'de> for Operations<'_> {
    type Value = ();

    fn expecting(&self, formatter: &mut fmt::Formatter<'_>) -> fmt::Result {
        formatter.write_str("a JSON array of operations")
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut operations: A) -> Result<(), A::Error> {
        self.out.push(b'[');
        let mut first = true;
        let mut arguments = Vec::new();
        while let Some(name) = operations.next_element_seed(OperationSeed {
            arguments: &mut arguments,
        })? {
            if !first {
                self.out.push(b',');
            }
            first = false;
            let output = self.harness.apply_arguments(name.as_deref(), &arguments);
            serde_json::to_writer(&mut *self.out, &output).map_err(serde::de::Error::custom)?;
        }
        self.out.extend_from_slice(b"]\n");
        Ok(())
    }
}

/// An operation's name and arguments: `None` for the name when `operation` is
/// not an array starting with a string.
fn split(operation: &Value) -> (Option<&str>, Vec<Argument<'_>>) {
    match operation.as_array().and_then(|items| items.split_first()) {
        Some((Value::String(name), arguments)) => (
            Some(name.as_str()),
            arguments.iter().map(Argument::from_value).collect(),
        ),
        _ => (None, Vec::new()),
    }
}
