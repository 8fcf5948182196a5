//! The three algorithms once more, with refunds ([`Model::refund`]: units
//! given back at `now`, Envoy's `is_negative_hits`), each written from the
//! description of what a refund gives back and in the plainest form that can
//! state it, independently of the engine and of the models beside this file
//! (which have no refunds; core's `tests/refunds.rs` holds these to them where no
//! refund happens).
//!
//! - Fixed window: a count per aligned window; a refund takes units off the
//!   count of the window a request at `now` would count in, when that window
//!   has counted anything (a later window has not: nothing to take), never
//!   below 0.
//! - Sliding log: the list of allowed units with their times; a refund drops
//!   up to `units` of the newest units still counting at `now`.
//! - Token bucket: how many 1/W tokens the bucket lacks as of a time; a
//!   refund puts back up to `units` tokens, never more than `burst` (a bucket
//!   holds no more), and never past full at `now`.
//!
//! A refund is not a request: it moves no model's "latest request". A key
//! left with nothing counted at `now` (a count of 0, no unit counting, a
//! full bucket) is as if it had never been charged: its model starts afresh.

use super::{Batch, Model, Single, saturate};

/// The fixed window: `limit` per aligned window `[k*W, (k+1)*W)`.
#[derive(Clone, Debug)]
pub struct FixedWindowRefunds {
    /// The units a window allows.
    pub limit: u64,
    /// The window, in the same unit as `now`.
    pub window: u64,
    /// Refused requests are counted too (envoyproxy/ratelimit's counter).
    pub count_refused: bool,
    /// The window counted in last and its count: a request older than it
    /// counts in it.
    counted: Option<(u64, u64)>,
}

impl FixedWindowRefunds {
    /// `limit` per `window`, refused units counted when `count_refused`.
    pub fn new(limit: u64, window: u64, count_refused: bool) -> Self {
        FixedWindowRefunds {
            limit,
            window,
            count_refused,
            counted: None,
        }
    }

    /// The window a request at `now` counts in, and what it has counted.
    fn window_of(&self, now: u64) -> (u64, u64) {
        let own = now / self.window;
        match self.counted {
            Some((index, count)) if index >= own => (index, count),
            _ => (own, 0),
        }
    }

    fn until_end(&self, now: u64) -> u64 {
        let (index, _) = self.window_of(now);
        saturate((u128::from(index) + 1) * u128::from(self.window) - u128::from(now))
    }
}

impl Model for FixedWindowRefunds {
    fn request(&mut self, now: u64) -> Single {
        let batch = self.batch(now, 1);
        Single {
            allowed: batch.allowed == 1,
            remaining: batch.remaining,
            retry_after: batch.retry_after,
        }
    }

    fn boxed_clone(&self) -> Box<dyn Model> {
        Box::new(self.clone())
    }

    fn counts_refused(&self) -> bool {
        self.count_refused
    }

    fn reset_after(&self, now: u64) -> u64 {
        if self.window_of(now).1 > 0 {
            self.until_end(now)
        } else {
            0
        }
    }

    fn look_retry_after(&self, now: u64) -> u64 {
        if self.count_refused && self.window_of(now).1 > self.limit {
            self.until_end(now)
        } else {
            0
        }
    }

    fn available(&self, now: u64) -> u64 {
        self.limit.saturating_sub(self.window_of(now).1)
    }

    fn batch(&mut self, now: u64, units: u64) -> Batch {
        let (index, count) = self.window_of(now);
        let allowed = units.min(self.limit.saturating_sub(count));
        let count = if self.count_refused {
            count.saturating_add(units)
        } else {
            count + allowed
        };
        self.counted = Some((index, count));
        Batch {
            allowed,
            rejected: units - allowed,
            remaining: self.limit.saturating_sub(count),
            retry_after: if allowed < units {
                self.until_end(now)
            } else {
                0
            },
        }
    }

    fn refund(&mut self, now: u64, units: u64) {
        if let Some((index, count)) = self.counted
            && now / self.window <= index
        {
            let count = count.saturating_sub(units);
            self.counted = (count > 0).then_some((index, count));
        }
    }

    fn state(&self) -> String {
        format!("{self:?}")
    }
}

/// The sliding log: a unit allowed at `t` counts while `now < t + W`, and
/// until a request is made at `t + W` or later after it was allowed.
#[derive(Clone, Debug)]
pub struct SlidingLogRefunds {
    /// The units any window allows.
    pub limit: u64,
    /// The window, in the same unit as `now`.
    pub window: u64,
    /// Allowed units: (time, how many, the latest request made since).
    allowed: Vec<Allowed>,
}

#[derive(Clone, Copy, Debug)]
struct Allowed {
    at: u64,
    units: u64,
    /// The latest time of a request, allowed or refused, since these units
    /// were allowed (theirs included).
    seen: u64,
}

impl SlidingLogRefunds {
    /// `limit` per `window`, with an empty log.
    pub fn new(limit: u64, window: u64) -> Self {
        SlidingLogRefunds {
            limit,
            window,
            allowed: Vec::new(),
        }
    }

    /// Whether `allowed` still counts at `now`.
    fn counts(&self, allowed: &Allowed, now: u64) -> bool {
        u128::from(allowed.at) + u128::from(self.window) > u128::from(allowed.seen.max(now))
    }

    /// The units counting at `now`, oldest first.
    fn counting(&self, now: u64) -> impl Iterator<Item = Allowed> + '_ {
        self.allowed
            .iter()
            .copied()
            .filter(move |allowed| self.counts(allowed, now))
    }

    /// When a request at `now` is taken: at `now`, or at the newest unit
    /// still counting when that is later (an older `now` frees nothing).
    fn taken_at(&self, now: u64) -> u64 {
        self.counting(now)
            .map(|allowed| allowed.at)
            .fold(now, u64::max)
    }

    fn counted(&self, now: u64) -> u64 {
        self.counting(now).map(|allowed| allowed.units).sum()
    }

    /// From when a request at `now` is taken until units of `at` stop counting.
    fn until(&self, at: u64, now: u64) -> u64 {
        saturate(u128::from(at) + u128::from(self.window) - u128::from(self.taken_at(now)))
    }
}

impl Model for SlidingLogRefunds {
    fn request(&mut self, now: u64) -> Single {
        let batch = self.batch(now, 1);
        Single {
            allowed: batch.allowed == 1,
            remaining: batch.remaining,
            retry_after: batch.retry_after,
        }
    }

    fn boxed_clone(&self) -> Box<dyn Model> {
        Box::new(self.clone())
    }

    fn reset_after(&self, now: u64) -> u64 {
        self.counting(now)
            .last()
            .map_or(0, |newest| self.until(newest.at, now))
    }

    fn available(&self, now: u64) -> u64 {
        self.limit - self.counted(now)
    }

    fn batch(&mut self, now: u64, units: u64) -> Batch {
        let at = self.taken_at(now);
        let counted = self.counted(now);
        let allowed = units.min(self.limit - counted);
        for earlier in &mut self.allowed {
            earlier.seen = earlier.seen.max(now);
        }
        if allowed > 0 {
            self.allowed.push(Allowed {
                at,
                units: allowed,
                seen: now,
            });
        }
        let retry_after = if allowed < units {
            // Refused: wait until the oldest unit counting (perhaps one of
            // this batch's) stops.
            let oldest = self.counting(now).next().unwrap();
            self.until(oldest.at, now)
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

    fn refund(&mut self, now: u64, mut units: u64) {
        // The newest first: of the units still counting, later ones come
        // later in the list.
        for index in (0..self.allowed.len()).rev() {
            if units == 0 {
                break;
            }
            let allowed = self.allowed[index];
            if !self.counts(&allowed, now) {
                continue;
            }
            let back = allowed.units.min(units);
            units -= back;
            self.allowed[index].units -= back;
        }
        self.allowed.retain(|allowed| allowed.units > 0);
        if self.counted(now) == 0 {
            self.allowed.clear();
        }
    }

    fn state(&self) -> String {
        format!("{self:?}")
    }
}

/// The token bucket: `burst` tokens, `limit / W` more per tick, never more
/// than `burst`. Counted in 1/W tokens: a token is `W` of them, and `d` ticks
/// refill `d * limit`.
#[derive(Clone, Debug)]
pub struct TokenBucketRefunds {
    /// The tokens a window refills.
    pub limit: u64,
    /// The window, in the same unit as `now`.
    pub window: u64,
    /// The most tokens the bucket holds.
    pub burst: u64,
    /// How far below full the bucket is at `at`; before `at` it lacked
    /// `limit` more per tick (an older `now` finds fewer tokens).
    lacking: u128,
    at: Option<u64>,
}

impl TokenBucketRefunds {
    /// `limit` per `window`, `burst` deep, full.
    pub fn new(limit: u64, window: u64, burst: u64) -> Self {
        TokenBucketRefunds {
            limit,
            window,
            burst,
            lacking: 0,
            at: None,
        }
    }

    fn full(&self) -> u128 {
        u128::from(self.burst) * u128::from(self.window)
    }

    fn lacking_at(&self, now: u64) -> u128 {
        let per_tick = u128::from(self.limit);
        match self.at {
            None => 0,
            Some(at) if now >= at => self.lacking.saturating_sub(u128::from(now - at) * per_tick),
            Some(at) => self.lacking + u128::from(at - now) * per_tick,
        }
    }

    fn tokens(&self, now: u64) -> u64 {
        saturate(self.full().saturating_sub(self.lacking_at(now)) / u128::from(self.window))
    }

    /// Ticks from `now` until the bucket lacks at most `lacking`.
    fn until_lacking(&self, now: u64, lacking: u128) -> u64 {
        saturate(
            self.lacking_at(now)
                .saturating_sub(lacking)
                .div_ceil(u128::from(self.limit)),
        )
    }

    /// Sets what the bucket lacks at `now` (its line drawn through there).
    fn set(&mut self, now: u64, lacking: u128) {
        self.lacking = lacking;
        self.at = Some(now);
    }
}

impl Model for TokenBucketRefunds {
    fn request(&mut self, now: u64) -> Single {
        let batch = self.batch(now, 1);
        Single {
            allowed: batch.allowed == 1,
            remaining: batch.remaining,
            retry_after: batch.retry_after,
        }
    }

    fn boxed_clone(&self) -> Box<dyn Model> {
        Box::new(self.clone())
    }

    fn reset_after(&self, now: u64) -> u64 {
        self.until_lacking(now, 0)
    }

    fn available(&self, now: u64) -> u64 {
        self.tokens(now)
    }

    fn batch(&mut self, now: u64, units: u64) -> Batch {
        let allowed = units.min(self.tokens(now));
        let taken = u128::from(allowed) * u128::from(self.window);
        match self.at {
            // Older than the line's point: taken from the bucket as it is
            // there (the line moves up, its point stays).
            Some(at) if now < at => self.lacking += taken,
            _ => self.set(now, self.lacking_at(now) + taken),
        }
        Batch {
            allowed,
            rejected: units - allowed,
            remaining: self.tokens(now),
            retry_after: if allowed < units {
                self.until_lacking(now, self.full() - u128::from(self.window))
            } else {
                0
            },
        }
    }

    fn refund(&mut self, now: u64, units: u64) {
        let lacking = self.lacking_at(now);
        if lacking == 0 {
            return;
        }
        let back = u128::from(units.min(self.burst)) * u128::from(self.window);
        match lacking.saturating_sub(back) {
            0 => *self = TokenBucketRefunds::new(self.limit, self.window, self.burst),
            lacking => self.set(now, lacking),
        }
    }

    fn state(&self) -> String {
        format!("{self:?}")
    }
}
