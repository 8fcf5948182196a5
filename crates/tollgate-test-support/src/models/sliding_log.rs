//! The sliding log as a plain list of the units it allowed, each with its
//! time, never pruned.
//!
//! A unit allowed at `t` counts at `now` while `now - W < t`; a request is
//! allowed while fewer than `limit` units count. A request older than the
//! newest allowed unit is taken at that unit's time (counted there, its units
//! logged there, its waits running from there), so an older `now` never frees
//! budget.

use super::{Batch, Model, Single, saturate};

/// The sliding log: at most `limit` units allowed in any `window` ticks.
#[derive(Clone, Debug)]
pub struct SlidingLogModel {
    /// The units any window allows.
    pub limit: u64,
    /// The window, in the same unit as `now`.
    pub window: u64,
    /// Every allowed request's time and units, in the order allowed.
    log: Vec<(u64, u64)>,
}

impl SlidingLogModel {
    /// `limit` per `window`, with an empty log.
    pub fn new(limit: u64, window: u64) -> Self {
        SlidingLogModel {
            limit,
            window,
            log: Vec::new(),
        }
    }

    /// The time a request at `now` is taken at: `now`, or the newest allowed
    /// unit's time when that is later.
    fn taken_at(&self, now: u64) -> u64 {
        self.log.iter().map(|&(at, _)| at).fold(now, u64::max)
    }

    /// The logged units that count for a request at `now`.
    fn counting(&self, now: u64) -> impl Iterator<Item = (u64, u64)> + '_ {
        let at = self.taken_at(now);
        self.log.iter().copied().filter(move |&(logged, _)| {
            u128::from(logged) + u128::from(self.window) > u128::from(at)
        })
    }

    fn counted(&self, now: u64) -> u64 {
        self.counting(now).map(|(_, units)| units).sum()
    }

    /// From the time a request at `now` is taken at until the unit logged at
    /// `at` stops counting.
    fn until_expiry(&self, at: u64, now: u64) -> u64 {
        saturate(u128::from(at) + u128::from(self.window) - u128::from(self.taken_at(now)))
    }

    fn oldest_counting(&self, now: u64) -> Option<u64> {
        self.counting(now).map(|(at, _)| at).min()
    }
}

impl Model for SlidingLogModel {
    fn request(&mut self, now: u64) -> Single {
        let at = self.taken_at(now);
        let counted = self.counted(now);
        if counted < self.limit {
            self.log.push((at, 1));
            Single {
                allowed: true,
                remaining: self.limit - counted - 1,
                retry_after: 0,
            }
        } else {
            let oldest = self.oldest_counting(now).unwrap();
            Single {
                allowed: false,
                remaining: 0,
                retry_after: self.until_expiry(oldest, now),
            }
        }
    }

    fn boxed_clone(&self) -> Box<dyn Model> {
        Box::new(self.clone())
    }

    fn reset_after(&self, now: u64) -> u64 {
        self.counting(now)
            .map(|(at, _)| at)
            .max()
            .map_or(0, |newest| self.until_expiry(newest, now))
    }

    fn available(&self, now: u64) -> u64 {
        self.limit - self.counted(now)
    }

    fn batch(&mut self, now: u64, units: u64) -> Batch {
        let at = self.taken_at(now);
        let counted = self.counted(now);
        let allowed = units.min(self.limit - counted);
        if allowed > 0 {
            self.log.push((at, allowed));
        }
        let retry_after = if allowed < units {
            let oldest = self.oldest_counting(now).unwrap();
            self.until_expiry(oldest, now)
        } else {
            0
        };
        Batch {
            allowed,
            rejected: units - allowed,
            remaining: self.limit - counted - allowed,
            retry_after,
        }
    }

    fn state(&self) -> String {
        format!("{self:?}")
    }
}
