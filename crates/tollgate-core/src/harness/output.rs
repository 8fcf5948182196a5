//! The JSON output of each operation, exactly as the contract prints it.

use serde::Serialize;

use crate::policy::Policy;

/// What one operation printed: one element of the output array.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[serde(untagged)]
pub enum Output {
    /// `request`: `{"allowed": bool, "remaining": int or null, "retry_after": int}`.
    Request {
        /// Whether the request was allowed.
        allowed: bool,
        /// Units left; `null` for an exempt key.
        remaining: Option<u64>,
        /// Seconds until a request would be allowed; 0 when allowed.
        retry_after: u64,
    },
    /// `request_batch`: `{"allowed", "rejected", "remaining", "retry_after"}`.
    Batch {
        /// Units allowed.
        allowed: u64,
        /// Units rejected.
        rejected: u64,
        /// Units left after the batch; `null` for an exempt key.
        remaining: Option<u64>,
        /// Seconds until one more unit would be allowed; 0 when all were allowed.
        retry_after: u64,
    },
    /// `configure`: the policy now in force.
    Policy(Policy),
    /// `reset`: whether the key had limiter state.
    Reset(bool),
    /// `stats`: `{"tracked_keys", "allowed", "rejected"}`; the totals are exact
    /// past 2^64.
    Stats {
        /// Keys holding limiter state.
        tracked_keys: u64,
        /// Units allowed since the start.
        allowed: u128,
        /// Units rejected since the start.
        rejected: u128,
    },
    /// `assign_tier`: the tier name that was passed.
    Tier(String),
    /// Any refused operation: `"error: ..."`.
    Error(String),
}
