//! A second token bucket, for cross-checking the first on forward time: the
//! number of tokens as a rational number (`num_rational`), refilled by
//! `limit / W` per tick at each request and capped at `burst`.

use num_rational::Ratio;

use super::{Model, Single};

/// The token bucket in rational numbers.
#[derive(Clone, Debug)]
pub struct RatioTokenBucketModel {
    /// Tokens refilled per tick (`limit / window`).
    pub rate: Ratio<i128>,
    /// The most tokens the bucket holds.
    pub burst: Ratio<i128>,
    tokens: Ratio<i128>,
    last: Option<u64>,
}

impl RatioTokenBucketModel {
    /// For small values only (the arithmetic is `i128`), and `now` never
    /// going back.
    pub fn new(limit: u64, window: u64, burst: u64) -> Self {
        RatioTokenBucketModel {
            rate: Ratio::new(i128::from(limit), i128::from(window)),
            burst: Ratio::from_integer(i128::from(burst)),
            tokens: Ratio::from_integer(i128::from(burst)),
            last: None,
        }
    }

    fn refill(&mut self, now: u64) {
        if let Some(last) = self.last {
            let refill = self.rate * Ratio::from_integer(i128::from(now - last));
            self.tokens = (self.tokens + refill).min(self.burst);
        }
        self.last = Some(now);
    }
}

impl Model for RatioTokenBucketModel {
    fn request(&mut self, now: u64) -> Single {
        self.refill(now);
        let one = Ratio::from_integer(1);
        if self.tokens >= one {
            self.tokens -= one;
            Single {
                allowed: true,
                remaining: self.tokens.floor().to_integer() as u64,
                retry_after: 0,
            }
        } else {
            // The smallest whole s with tokens + s * rate >= 1.
            let wait = ((one - self.tokens) / self.rate).ceil().to_integer() as u64;
            Single {
                allowed: false,
                remaining: 0,
                retry_after: wait,
            }
        }
    }

    fn boxed_clone(&self) -> Box<dyn Model> {
        Box::new(self.clone())
    }

    fn reset_after(&self, now: u64) -> u64 {
        let mut copy = self.clone();
        copy.refill(now);
        ((copy.burst - copy.tokens) / copy.rate).ceil().to_integer() as u64
    }

    fn available(&self, now: u64) -> u64 {
        self.available_by_singles(now)
    }

    fn batch(&mut self, now: u64, units: u64) -> super::Batch {
        self.batch_by_singles(now, units)
    }

    fn state(&self) -> String {
        format!("{self:?}")
    }
}
