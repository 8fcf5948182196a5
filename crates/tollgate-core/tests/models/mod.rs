//! Naive models of the three algorithms, written independently of the engine:
//! the fixed window as a count per window, the sliding log as a plain list of
//! timestamps (one per allowed unit), the token bucket as a rational number of
//! tokens. Each model takes one request at a time; a batch is a loop.

#![allow(dead_code, unreachable_pub, missing_docs)]

use num_rational::Ratio;

/// What a single request returned: allowed, remaining, retry_after (seconds).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Single {
    pub allowed: bool,
    pub remaining: u64,
    pub retry_after: u64,
}

/// What a batch returned, built from single requests.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Batch {
    pub allowed: u64,
    pub rejected: u64,
    pub remaining: u64,
    pub retry_after: u64,
}

pub trait Model {
    fn request(&mut self, now: u64) -> Single;

    /// `units` single requests at `now`; `retry_after` is the last one's, 0 when
    /// all were allowed.
    fn batch(&mut self, now: u64, units: u64) -> Batch {
        let mut batch = Batch {
            allowed: 0,
            rejected: 0,
            remaining: 0,
            retry_after: 0,
        };
        for _ in 0..units {
            let single = self.request(now);
            if single.allowed {
                batch.allowed += 1;
            } else {
                batch.rejected += 1;
            }
            batch.remaining = single.remaining;
            batch.retry_after = single.retry_after;
        }
        if batch.rejected == 0 {
            batch.retry_after = 0;
        }
        batch
    }
}

pub struct FixedWindowModel {
    pub limit: u64,
    pub window: u64,
    window_index: Option<u64>,
    count: u64,
}

impl FixedWindowModel {
    pub fn new(limit: u64, window: u64) -> Self {
        FixedWindowModel {
            limit,
            window,
            window_index: None,
            count: 0,
        }
    }
}

impl Model for FixedWindowModel {
    fn request(&mut self, now: u64) -> Single {
        let index = now / self.window;
        if self.window_index != Some(index) {
            self.window_index = Some(index);
            self.count = 0;
        }
        if self.count < self.limit {
            self.count += 1;
            Single {
                allowed: true,
                remaining: self.limit - self.count,
                retry_after: 0,
            }
        } else {
            Single {
                allowed: false,
                remaining: 0,
                retry_after: (index + 1) * self.window - now,
            }
        }
    }
}

pub struct SlidingLogModel {
    pub limit: u64,
    pub window: u64,
    /// Every allowed request's time.
    log: Vec<u64>,
}

impl SlidingLogModel {
    pub fn new(limit: u64, window: u64) -> Self {
        SlidingLogModel {
            limit,
            window,
            log: Vec::new(),
        }
    }
}

impl Model for SlidingLogModel {
    fn request(&mut self, now: u64) -> Single {
        // A request at `t` counts while `now - W < t`.
        let counted: Vec<u64> = self
            .log
            .iter()
            .copied()
            .filter(|t| t + self.window > now)
            .collect();
        if (counted.len() as u64) < self.limit {
            self.log.push(now);
            Single {
                allowed: true,
                remaining: self.limit - counted.len() as u64 - 1,
                retry_after: 0,
            }
        } else {
            let oldest = *counted.iter().min().unwrap();
            Single {
                allowed: false,
                remaining: 0,
                retry_after: oldest + self.window - now,
            }
        }
    }
}

pub struct TokenBucketModel {
    pub rate: Ratio<i128>,
    pub burst: Ratio<i128>,
    tokens: Ratio<i128>,
    last: Option<u64>,
}

impl TokenBucketModel {
    pub fn new(limit: u64, window: u64, burst: u64) -> Self {
        TokenBucketModel {
            rate: Ratio::new(limit as i128, window as i128),
            burst: Ratio::from_integer(burst as i128),
            tokens: Ratio::from_integer(burst as i128),
            last: None,
        }
    }
}

impl Model for TokenBucketModel {
    fn request(&mut self, now: u64) -> Single {
        if let Some(last) = self.last {
            let refill = self.rate * Ratio::from_integer((now - last) as i128);
            self.tokens = (self.tokens + refill).min(self.burst);
        }
        self.last = Some(now);
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
}
