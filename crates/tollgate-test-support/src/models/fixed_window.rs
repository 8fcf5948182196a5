//! The fixed window as a count per aligned window `[k*W, (k+1)*W)`, counting
//! refused requests too (as envoyproxy/ratelimit does) when asked.
//!
//! A request at a time older than the window last counted in is counted in
//! that window (the count never goes back to an earlier window), and its
//! waits run from its own time to that window's end.

use super::{Batch, Model, Single, saturate};

/// The fixed window: `limit` per aligned window of `window` ticks.
#[derive(Clone, Debug)]
pub struct FixedWindowModel {
    /// The requests a window allows.
    pub limit: u64,
    /// The window, in the same unit as `now`.
    pub window: u64,
    /// Refused requests are counted too (the counter passes the limit).
    pub count_refused: bool,
    window_index: Option<u64>,
    count: u64,
}

impl FixedWindowModel {
    /// `limit` per `window`, refused requests not counted.
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

    /// The window a request at `now` counts in: its own, or the one counted
    /// in last when that one is later.
    fn index_at(&self, now: u64) -> u64 {
        let own = now / self.window;
        self.window_index.map_or(own, |last| last.max(own))
    }

    /// What the window of a request at `now` has counted so far.
    fn count_at(&self, now: u64) -> u64 {
        if self.window_index == Some(self.index_at(now)) {
            self.count
        } else {
            0
        }
    }

    /// From `now` to the end of the window a request at `now` counts in.
    fn until_window_end(&self, now: u64) -> u64 {
        let end = (u128::from(self.index_at(now)) + 1) * u128::from(self.window);
        saturate(end - u128::from(now))
    }

    /// Moves to the window of a request at `now`, starting its count at 0
    /// when it is a new one.
    fn enter(&mut self, now: u64) {
        let index = self.index_at(now);
        if self.window_index != Some(index) {
            self.window_index = Some(index);
            self.count = 0;
        }
    }
}

impl Model for FixedWindowModel {
    fn request(&mut self, now: u64) -> Single {
        self.enter(now);
        let refused = Single {
            allowed: false,
            remaining: 0,
            retry_after: self.until_window_end(now),
        };
        if self.count_refused {
            self.count = self.count.saturating_add(1);
            return if self.count <= self.limit {
                Single {
                    allowed: true,
                    remaining: self.limit - self.count,
                    retry_after: 0,
                }
            } else {
                refused
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
            refused
        }
    }

    fn boxed_clone(&self) -> Box<dyn Model> {
        Box::new(self.clone())
    }

    fn counts_refused(&self) -> bool {
        self.count_refused
    }

    fn reset_after(&self, now: u64) -> u64 {
        if self.count_at(now) > 0 {
            self.until_window_end(now)
        } else {
            0
        }
    }

    fn look_retry_after(&self, now: u64) -> u64 {
        if self.count_refused && self.count_at(now) > self.limit {
            self.until_window_end(now)
        } else {
            0
        }
    }

    fn available(&self, now: u64) -> u64 {
        self.limit.saturating_sub(self.count_at(now))
    }

    fn batch(&mut self, now: u64, units: u64) -> Batch {
        self.enter(now);
        let allowed = units.min(self.limit.saturating_sub(self.count));
        self.count = if self.count_refused {
            self.count.saturating_add(units)
        } else {
            self.count + allowed
        };
        Batch {
            allowed,
            rejected: units - allowed,
            remaining: self.limit.saturating_sub(self.count),
            retry_after: if allowed < units {
                self.until_window_end(now)
            } else {
                0
            },
        }
    }

    fn state(&self) -> String {
        format!("{self:?}")
    }
}
