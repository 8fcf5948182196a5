//! [`FailurePolicy`]: what a request gets when its limits cannot be decided
//! (the store is down or too slow), for every adapter alike.

use serde::Deserialize;

/// What a request gets when the [`Store`](crate::Store) cannot decide its
/// limits in time. In configuration files `"fail_open"` or `"fail_closed"`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum FailurePolicy {
    /// Let it through, unlimited and without rate-limit fields (the default:
    /// a rate limiter that is down should not take the API down with it).
    #[default]
    FailOpen,
    /// Refuse it (503 over HTTP): limits are never exceeded.
    FailClosed,
}

impl FailurePolicy {
    /// `fail_open` or `fail_closed`: the name in configuration files and the
    /// `policy` label of the store-failure counter.
    pub fn label(self) -> &'static str {
        match self {
            FailurePolicy::FailOpen => "fail_open",
            FailurePolicy::FailClosed => "fail_closed",
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn labels_are_the_names_in_files() {
        for (text, policy) in [
            ("\"fail_open\"", FailurePolicy::FailOpen),
            ("\"fail_closed\"", FailurePolicy::FailClosed),
        ] {
            assert_eq!(serde_json::from_str::<FailurePolicy>(text).unwrap(), policy);
            assert_eq!(format!("\"{}\"", policy.label()), text);
        }
        assert!(serde_json::from_str::<FailurePolicy>("\"fail\"").is_err());
    }
}
