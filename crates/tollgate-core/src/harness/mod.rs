//! The operations harness behind `tollgate run`: a JSON array of operations
//! applied in order to a fresh [`Limiter`], one [`Output`] per operation, as
//! `tests/conformance/CONTRACT.md` specifies.

mod argument;
mod document;
mod operation;
mod output;
mod read;
mod signature;

use serde_json::Value;

use crate::config::{ConfigError, LimiterConfig};
use crate::decision::Decision;
use crate::limiter::Limiter;
use crate::resolution::Resolution;

use operation::Operation;
pub use output::Output;
use read::ReadOperation;

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
        let mut read = ReadOperation::new();
        // Writing a JSON value cannot fail; if it did, the operation would
        // stay malformed.
        let text = serde_json::value::to_raw_value(operation).ok();
        if let Some(text) = &text {
            read.read_text(text);
        }
        self.apply_read(&read)
    }

    pub(super) fn apply_read(&mut self, operation: &ReadOperation<'_>) -> Output {
        match Operation::parse(operation, self.latest) {
            Ok(operation) => self.execute(operation),
            Err(error) => Output::Error(format!("error: {error}")),
        }
    }

    /// Runs a whole document, a JSON array of operations, writing the JSON array
    /// of outputs to `out`. The array is read one operation at a time, and of
    /// an operation only the arguments it takes are kept, so memory holds the
    /// input, one operation and the outputs, never a parsed copy of the input.
    /// Any JSON is accepted inside the array: any nesting depth, any number
    /// however long or large (a value that is no operation, or no argument of
    /// its operation, is just a wrong one, answered with its error).
    ///
    /// # Errors
    ///
    /// [`InputError`] when `input` is not one JSON array; `out` is then
    /// incomplete and should be discarded.
    pub fn run(&mut self, input: &[u8], out: &mut Vec<u8>) -> Result<(), InputError> {
        // JSON is UTF-8: checked once for the whole input, not string by string.
        let input = std::str::from_utf8(input).map_err(|error| not_utf8(input, &error))?;
        document::run(self, input, out)?;
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

/// The error for input that is not UTF-8, placed as serde_json places its
/// errors: `invalid UTF-8 at line L column C` (the column counts bytes).
fn not_utf8(input: &[u8], error: &std::str::Utf8Error) -> InputError {
    let before = &input[..error.valid_up_to()];
    let line = before.iter().filter(|byte| **byte == b'\n').count() + 1;
    let column = before
        .iter()
        .rev()
        .take_while(|byte| **byte != b'\n')
        .count()
        + 1;
    InputError(serde::de::Error::custom(format!(
        "invalid UTF-8 at line {line} column {column}"
    )))
}

/// `retry_after` in the harness's unit, whole seconds (exact at this resolution).
fn seconds(decision: &Decision) -> u64 {
    decision.retry_after.as_secs()
}
