//! The token bucket as a count of tokens refilled at each request: `burst`
//! tokens when new, `limit / W` tokens more per tick, never more than
//! `burst`, one token per unit.
//!
//! Counted exactly in integers: a token is `W` units of 1/W token, so `d`
//! ticks refill `d * limit` of them. The model keeps the missing amount (how
//! far below full the bucket is) as of its latest request. A request older
//! than that is answered from the same refill line drawn backwards: the
//! bucket then lacked `(latest - now) * limit` more, so an older `now`
//! never finds more tokens, and what it takes is taken from the bucket as of
//! its latest request.

use super::{Batch, Model, Single, saturate};

/// The token bucket: `burst` tokens at most, refilled at `limit` per
/// `window` ticks.
#[derive(Clone, Debug)]
pub struct TokenBucketModel {
    /// The tokens a window refills.
    pub limit: u64,
    /// The window, in the same unit as `now`.
    pub window: u64,
    /// The most tokens the bucket holds.
    pub burst: u64,
    /// How far below full the bucket was at `latest`, in 1/W token.
    missing: u128,
    latest: Option<u64>,
}

impl TokenBucketModel {
    /// `limit` per `window`, `burst` deep, full.
    pub fn new(limit: u64, window: u64, burst: u64) -> Self {
        TokenBucketModel {
            limit,
            window,
            burst,
            missing: 0,
            latest: None,
        }
    }

    /// A full bucket, in 1/W token.
    fn full(&self) -> u128 {
        u128::from(self.burst) * u128::from(self.window)
    }

    /// How far below full the bucket is at `now`.
    fn missing_at(&self, now: u64) -> u128 {
        let limit = u128::from(self.limit);
        match self.latest {
            None => 0,
            Some(latest) if now >= latest => self
                .missing
                .saturating_sub(u128::from(now - latest) * limit),
            Some(latest) => self
                .missing
                .saturating_add(u128::from(latest - now) * limit),
        }
    }

    /// Whole tokens in the bucket at `now`.
    fn tokens_at(&self, now: u64) -> u128 {
        self.full().saturating_sub(self.missing_at(now)) / u128::from(self.window)
    }

    /// Takes `tokens` at `now`: the bucket refilled up to `now` first when
    /// `now` is its latest request, from its state at `latest` otherwise.
    fn take(&mut self, now: u64, tokens: u64) {
        let taken = u128::from(tokens) * u128::from(self.window);
        match self.latest {
            Some(latest) if now < latest => self.missing = self.missing.saturating_add(taken),
            _ => {
                self.missing = self.missing_at(now).saturating_add(taken);
                self.latest = Some(now);
            }
        }
    }

    /// Ticks from `now` until the bucket lacks at most `missing`.
    fn until_missing_at_most(&self, now: u64, missing: u128) -> u64 {
        saturate(
            self.missing_at(now)
                .saturating_sub(missing)
                .div_ceil(u128::from(self.limit)),
        )
    }

    /// The wait for one whole token at `now`.
    fn until_one_token(&self, now: u64) -> u64 {
        self.until_missing_at_most(now, self.full() - u128::from(self.window))
    }
}

impl Model for TokenBucketModel {
    fn request(&mut self, now: u64) -> Single {
        if self.tokens_at(now) >= 1 {
            self.take(now, 1);
            Single {
                allowed: true,
                remaining: saturate(self.tokens_at(now)),
                retry_after: 0,
            }
        } else {
            self.take(now, 0);
            Single {
                allowed: false,
                remaining: 0,
                retry_after: self.until_one_token(now),
            }
        }
    }

    fn boxed_clone(&self) -> Box<dyn Model> {
        Box::new(self.clone())
    }

    fn reset_after(&self, now: u64) -> u64 {
        self.until_missing_at_most(now, 0)
    }

    fn available(&self, now: u64) -> u64 {
        saturate(self.tokens_at(now))
    }

    fn batch(&mut self, now: u64, units: u64) -> Batch {
        let allowed = units.min(saturate(self.tokens_at(now)));
        self.take(now, allowed);
        Batch {
            allowed,
            rejected: units - allowed,
            remaining: saturate(self.tokens_at(now)),
            retry_after: if allowed < units {
                self.until_one_token(now)
            } else {
                0
            },
        }
    }

    fn state(&self) -> String {
        format!("{self:?}")
    }
}
