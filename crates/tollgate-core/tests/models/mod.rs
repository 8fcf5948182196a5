//! Naive models of the three algorithms, written independently of the engine:
//! the fixed window as a count per window (counting refused requests too, as
//! envoyproxy/ratelimit does, when asked), the sliding log as a plain list of
//! timestamps (one per allowed unit), the token bucket as a rational number of
//! tokens. Each model takes one request at a time; a batch is a loop. A
//! request held to several limits with units each is [`acquire_units`]: the
//! rule written out from its description, on top of the models.

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

    /// A copy, to try requests on without changing this model.
    fn boxed_clone(&self) -> Box<dyn Model>;

    /// Whether refused requests are counted too.
    fn counts_refused(&self) -> bool {
        false
    }

    /// How many single requests at `now` would be allowed one after another,
    /// tried on a copy.
    fn available(&self, now: u64) -> u64 {
        let mut copy = self.boxed_clone();
        let mut allowed = 0;
        while copy.request(now).allowed {
            allowed += 1;
        }
        allowed
    }

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

#[derive(Clone)]
pub struct FixedWindowModel {
    pub limit: u64,
    pub window: u64,
    /// Refused requests are counted too (the counter passes the limit).
    pub count_refused: bool,
    window_index: Option<u64>,
    count: u64,
}

impl FixedWindowModel {
    pub fn new(limit: u64, window: u64) -> Self {
        FixedWindowModel {
            limit,
            window,
            count_refused: false,
            window_index: None,
            count: 0,
        }
    }

    /// envoyproxy/ratelimit's counter: every request adds one, then the
    /// request is allowed while the counter is at most the limit.
    pub fn counting_refused(limit: u64, window: u64) -> Self {
        FixedWindowModel {
            count_refused: true,
            ..FixedWindowModel::new(limit, window)
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
        if self.count_refused {
            self.count += 1;
            return if self.count <= self.limit {
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
            };
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

    fn boxed_clone(&self) -> Box<dyn Model> {
        Box::new(self.clone())
    }

    fn counts_refused(&self) -> bool {
        self.count_refused
    }
}

#[derive(Clone)]
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

    fn boxed_clone(&self) -> Box<dyn Model> {
        Box::new(self.clone())
    }
}

#[derive(Clone)]
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

    fn boxed_clone(&self) -> Box<dyn Model> {
        Box::new(self.clone())
    }
}

/// One request held to every model in `models`, `units[i]` from the i-th, by
/// the rule as it is written: a model that counts refused requests takes its
/// units as a batch whatever the others say, and refuses nobody; the others
/// are all or nothing among themselves: each takes its batch only if each of
/// them would allow all of its units (tried on a copy), and otherwise none
/// takes anything: one that would have allowed them reports them rejected,
/// with what it has left and no wait; one that would not reports them
/// rejected with what it has left and the wait that a batch of its units
/// would have been told (tried on a copy). 0 units only look: nothing
/// allowed, nothing rejected, what is left.
pub fn acquire_units(models: &mut [Box<dyn Model>], units: &[u64], now: u64) -> Vec<Batch> {
    let everyone = models
        .iter()
        .zip(units)
        .filter(|(model, _)| !model.counts_refused())
        .all(|(model, &units)| model.available(now) >= units);
    models
        .iter_mut()
        .zip(units)
        .map(|(model, &units)| {
            if units == 0 {
                return Batch {
                    allowed: 0,
                    rejected: 0,
                    remaining: model.available(now),
                    retry_after: 0,
                };
            }
            if model.counts_refused() || everyone {
                return model.batch(now, units);
            }
            let available = model.available(now);
            let retry_after = if available < units {
                model.boxed_clone().batch(now, units).retry_after
            } else {
                0
            };
            Batch {
                allowed: 0,
                rejected: units,
                remaining: available,
                retry_after,
            }
        })
        .collect()
}
