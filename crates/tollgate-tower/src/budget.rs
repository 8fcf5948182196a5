//! A route's budget: requests per minute and burst, as a token bucket.

use serde::Deserialize;
use tollgate_core::{MAX_VALUE, Policy};

/// A token-bucket budget: refills at `rpm / 60` tokens per second up to `burst`
/// tokens; each request takes one token. In JSON: `{"rpm": 60, "burst": 5}`;
/// `burst` may be left out, and is then `rpm`.
///
/// ```
/// use tollgate_tower::Budget;
///
/// let budget = Budget::new(60, 5).unwrap();
/// assert_eq!((budget.rpm(), budget.burst()), (60, 5));
/// assert!(Budget::new(0, 5).is_err());
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Deserialize)]
#[serde(try_from = "BudgetDocument")]
pub struct Budget {
    rpm: u64,
    burst: u64,
}

/// A budget field outside 1..=2^63-1.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("{field} must be an integer from 1 to 2^63-1, got {value}")]
pub struct BudgetError {
    /// `rpm` or `burst`.
    pub field: &'static str,
    /// The value given.
    pub value: u64,
}

impl Budget {
    /// `rpm` requests per minute with bursts of up to `burst` requests.
    ///
    /// # Errors
    ///
    /// [`BudgetError`] when either is 0 or above 2^63-1.
    pub fn new(rpm: u64, burst: u64) -> Result<Self, BudgetError> {
        for (field, value) in [("rpm", rpm), ("burst", burst)] {
            if !(1..=MAX_VALUE).contains(&value) {
                return Err(BudgetError { field, value });
            }
        }
        Ok(Budget { rpm, burst })
    }

    /// Tokens refilled per minute.
    pub fn rpm(&self) -> u64 {
        self.rpm
    }

    /// The bucket's capacity, in tokens (requests).
    pub fn burst(&self) -> u64 {
        self.burst
    }

    /// The engine policy: a token bucket of `rpm` tokens per 60 s, `burst` deep.
    pub fn policy(&self) -> Policy {
        Policy::token_bucket(self.rpm, 60, self.burst).expect("a budget is a valid token bucket")
    }

    /// Seconds for an empty bucket to fill again, rounded up: after that long
    /// without a request a key's state equals a fresh one and can be forgotten.
    pub(crate) fn seconds_to_fill(&self) -> u64 {
        self.policy().counted_span_s().min(MAX_VALUE)
    }
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct BudgetDocument {
    rpm: u64,
    #[serde(default)]
    burst: Option<u64>,
}

impl TryFrom<BudgetDocument> for Budget {
    type Error = BudgetError;

    fn try_from(document: BudgetDocument) -> Result<Self, BudgetError> {
        Budget::new(document.rpm, document.burst.unwrap_or(document.rpm))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn burst_defaults_to_rpm() {
        let budget: Budget = serde_json::from_str(r#"{"rpm": 90}"#).unwrap();
        assert_eq!((budget.rpm(), budget.burst()), (90, 90));
        let budget: Budget = serde_json::from_str(r#"{"rpm": 90, "burst": 4}"#).unwrap();
        assert_eq!((budget.rpm(), budget.burst()), (90, 4));
        assert!(serde_json::from_str::<Budget>(r#"{"burst": 4}"#).is_err());
    }

    #[test]
    fn time_to_fill_rounds_up() {
        assert_eq!(Budget::new(60, 5).unwrap().seconds_to_fill(), 5);
        assert_eq!(Budget::new(7, 7).unwrap().seconds_to_fill(), 60);
        assert_eq!(Budget::new(7, 1).unwrap().seconds_to_fill(), 9); // 60/7 = 8.57
        assert_eq!(Budget::new(MAX_VALUE, 1).unwrap().seconds_to_fill(), 1);
        assert_eq!(
            Budget::new(1, MAX_VALUE).unwrap().seconds_to_fill(),
            MAX_VALUE
        );
    }
}
