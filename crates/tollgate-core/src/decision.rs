//! The answer to a request: how many units were allowed, what is left and when to
//! come back.

use std::time::Duration;

/// The outcome of a request or a batch of `units` requests for one key.
///
/// A batch behaves exactly like `units` consecutive single requests at the same
/// time: the first that fit are allowed, the rest rejected; `remaining` and
/// `retry_after` are what the last of them would have returned.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Decision {
    /// Units allowed, from 0 to the batch size.
    pub allowed: u64,
    /// Units rejected; a rejected unit uses no budget.
    pub rejected: u64,
    /// Units the key may still use now: whole tokens for the token bucket.
    /// `None` for an exempt key, which has no budget. 0 after a rejection.
    pub remaining: Option<u64>,
    /// How long until one more unit would be allowed; zero when every unit was
    /// allowed. Never zero after a rejection. For a fixed window counting
    /// refused units ([`crate::Policy::counts_refused`]) it is not zero
    /// exactly when the window is past its limit, a look (0 units) included.
    pub retry_after: Duration,
    /// How long until the key's whole budget is available again (the `t` of the
    /// IETF `RateLimit` field); zero when it already is.
    pub reset_after: Duration,
}

impl Decision {
    /// A decision for an exempt key: everything allowed, no budget.
    pub fn exempt(units: u64) -> Self {
        Decision {
            allowed: units,
            rejected: 0,
            remaining: None,
            retry_after: Duration::ZERO,
            reset_after: Duration::ZERO,
        }
    }

    /// Whether every unit was allowed.
    pub fn is_allowed(&self) -> bool {
        self.rejected == 0
    }

    /// `retry_after` in whole seconds, rounded up: the value of an HTTP
    /// `Retry-After` header (RFC 9110 section 10.2.3), never 0 after a rejection.
    pub fn retry_after_seconds(&self) -> u64 {
        whole_seconds_rounded_up(self.retry_after)
    }

    /// `reset_after` in whole seconds, rounded up.
    pub fn reset_after_seconds(&self) -> u64 {
        whole_seconds_rounded_up(self.reset_after)
    }

    /// Which of the decisions of one request's limits binds it, the one its
    /// `RateLimit`, `X-RateLimit-*` and `Retry-After` describe: when one
    /// refused with a wait, the longest wait (the first of equals);
    /// otherwise the least `remaining` (an exempt `None` counts as
    /// unlimited), the longer `reset_after` among equals, the first of
    /// those. `None` when there are no decisions.
    pub fn binding<'a>(decisions: impl IntoIterator<Item = &'a Decision>) -> Option<usize> {
        let mut best: Option<(usize, &Decision)> = None;
        for (index, decision) in decisions.into_iter().enumerate() {
            let better = match best {
                None => true,
                Some((_, current)) => {
                    let key = |decision: &Decision| {
                        (
                            std::cmp::Reverse(decision.retry_after),
                            decision.remaining.unwrap_or(u64::MAX),
                            std::cmp::Reverse(decision.reset_after),
                        )
                    };
                    key(decision) < key(current)
                }
            };
            if better {
                best = Some((index, decision));
            }
        }
        best.map(|(index, _)| index)
    }
}

fn whole_seconds_rounded_up(duration: Duration) -> u64 {
    let seconds = duration.as_secs();
    if duration.subsec_nanos() > 0 {
        seconds.saturating_add(1)
    } else {
        seconds
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn seconds_round_up() {
        let mut decision = Decision::exempt(1);
        decision.retry_after = Duration::from_millis(1);
        assert_eq!(decision.retry_after_seconds(), 1);
        decision.retry_after = Duration::from_secs(2);
        assert_eq!(decision.retry_after_seconds(), 2);
        decision.retry_after = Duration::new(2, 1);
        assert_eq!(decision.retry_after_seconds(), 3);
        decision.reset_after = Duration::new(u64::MAX, 1);
        assert_eq!(decision.reset_after_seconds(), u64::MAX);
    }
}
