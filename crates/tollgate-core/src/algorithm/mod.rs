//! The three algorithms as pure transitions over small per-key state.
//!
//! `State::decide(rule, now, units)` updates the state in place and returns a
//! [`Verdict`]; nothing else in the crate decides anything. `State::give_back`
//! is the other transition: a refund of units taken. Time is an integer
//! count of ticks (see [`Resolution`]); every computation is exact integer
//! arithmetic, 128-bit or saturating where a product could overflow, and costs the
//! same whatever the batch size.

mod fixed_window;
mod sliding_log;
mod token_bucket;

use strength_reduce::StrengthReducedU64;

use crate::policy::{Algorithm, Policy, PolicyError};
use crate::resolution::Resolution;

use fixed_window::FixedWindow;
use sliding_log::SlidingLog;
use token_bucket::TokenBucket;

/// A policy compiled to engine ticks, with its divisors prepared once so that a
/// decision divides by multiplying.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Rule {
    pub(crate) policy: Policy,
    /// `limit`, in units.
    pub(crate) limit: u64,
    /// `window_s`, in ticks.
    pub(crate) window: u64,
    /// `burst * window`: the token bucket's capacity in its scaled units.
    pub(crate) scaled_capacity: u128,
    /// Division by `limit`.
    pub(crate) per_limit: StrengthReducedU64,
    /// Division by `window`.
    pub(crate) per_window: StrengthReducedU64,
    /// Ticks in one second: where a calendar window's boundaries (whole
    /// seconds) fall in ticks.
    pub(crate) ticks_per_second: u64,
}

impl Rule {
    /// Compiles `policy` for a clock of `resolution`.
    pub(crate) fn compile(policy: Policy, resolution: Resolution) -> Result<Self, PolicyError> {
        let window =
            resolution
                .ticks_from_seconds(policy.window_s())
                .ok_or(PolicyError::WindowTooLong {
                    window_s: policy.window_s(),
                    max_window_s: resolution.max_seconds(),
                })?;
        Ok(Rule {
            policy,
            limit: policy.limit(),
            window,
            scaled_capacity: u128::from(policy.capacity()) * u128::from(window),
            // Only a counting fixed window has a limit of 0, and a fixed
            // window never divides by its limit.
            per_limit: StrengthReducedU64::new(policy.limit().max(1)),
            per_window: StrengthReducedU64::new(window),
            ticks_per_second: resolution.ticks_per_second(),
        })
    }
}

/// What one transition decided, with times in ticks.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct Verdict {
    pub(crate) allowed: u64,
    pub(crate) rejected: u64,
    pub(crate) remaining: u64,
    /// Ticks until one more unit is allowed; 0 when nothing was rejected.
    pub(crate) retry_after: u64,
    /// Ticks until the whole budget is available again.
    pub(crate) reset_after: u64,
}

impl Verdict {
    fn new(units: u64, allowed: u64, remaining: u64, retry_after: u64, reset_after: u64) -> Self {
        let rejected = units - allowed;
        Verdict {
            allowed,
            rejected,
            remaining,
            retry_after: if rejected > 0 { retry_after } else { 0 },
            reset_after,
        }
    }
}

/// One key's limiter state under one algorithm.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum State {
    FixedWindow(FixedWindow),
    /// Boxed: the log is the largest state and the rarest, so the others stay small.
    SlidingLog(Box<SlidingLog>),
    TokenBucket(TokenBucket),
}

impl State {
    /// The state of a key that has made no request.
    pub(crate) fn new(algorithm: Algorithm) -> Self {
        match algorithm {
            Algorithm::FixedWindow => State::FixedWindow(FixedWindow::default()),
            Algorithm::SlidingLog => State::SlidingLog(Box::default()),
            Algorithm::TokenBucket => State::TokenBucket(TokenBucket::default()),
        }
    }

    /// Applies `units` requests at `now` (ticks) under `rule`. `units == 0`
    /// inspects the state: it allows nothing, rejects nothing and changes nothing
    /// that a later decision could notice.
    ///
    /// A `now` older than the state's own latest time never grants budget and
    /// never moves the state backwards. A state holding turns reserved
    /// ahead of `now` by [`State::reserve`] (a fixed window's stored window,
    /// or a sliding log's reserved runs, later than `now`) allows nothing at
    /// `now`: a decision is a reservation that may not wait, so it never
    /// counts ahead of a waiting request (a token bucket needs no rule for
    /// it: its theoretical arrival time already holds the turns). A window
    /// counting refused units is never reserved ahead.
    pub(crate) fn decide(&mut self, rule: &Rule, now: u64, units: u64) -> Verdict {
        if self.algorithm() != rule.policy.algorithm() {
            *self = State::new(rule.policy.algorithm());
        }
        match self {
            State::FixedWindow(state) => state.decide(rule, now, units),
            State::SlidingLog(state) => state.decide(rule, now, units),
            State::TokenBucket(state) => state.decide(rule, now, units),
        }
    }

    /// What a request of zero units would see at `now`, changing nothing: the
    /// check before charging several limits at once.
    pub(crate) fn peek(&self, rule: &Rule, now: u64) -> Verdict {
        match self {
            _ if self.algorithm() != rule.policy.algorithm() => {
                State::new(rule.policy.algorithm()).peek(rule, now)
            }
            State::FixedWindow(state) => {
                let mut copy = *state;
                copy.decide(rule, now, 0)
            }
            State::TokenBucket(state) => {
                let mut copy = *state;
                copy.decide(rule, now, 0)
            }
            State::SlidingLog(log) => log.peek(rule, now),
        }
    }

    /// Gives back `units` at `now` under `rule` (a refund: Envoy's
    /// `is_negative_hits`), never granting more than the policy allows, and
    /// returns what a look (0 units) at `now` then sees: allowed and rejected
    /// 0, what remains after the refund, and its waits.
    ///
    /// - fixed window: the count of the window a request at `now` counts in
    ///   goes down by `units` (not below 0); a state of an earlier window,
    ///   which counts nothing at `now`, is left as it is;
    /// - sliding log: up to `units` of the newest units still counted at
    ///   `now` are dropped;
    /// - token bucket: up to `burst` tokens go back in, never past full.
    ///
    /// A refund moves no time (an older `now` is taken as a decision takes
    /// it). A state left with nothing counted at `now` (a count of 0, no unit
    /// counting, a full bucket) becomes a fresh one, as if never charged, as
    /// the Redis store drops such a key. A state of another algorithm is not
    /// this rule's: it is left as it is and the answer is a fresh state's.
    pub(crate) fn give_back(&mut self, rule: &Rule, now: u64, units: u64) -> Verdict {
        if self.algorithm() == rule.policy.algorithm() {
            match self {
                State::FixedWindow(state) => state.give_back(rule, now, units),
                State::SlidingLog(state) => state.give_back(rule, now, units),
                State::TokenBucket(state) => state.give_back(rule, now, units),
            }
        }
        self.peek(rule, now)
    }

    /// Charges `units` at `now` under `rule` whatever the limit has left,
    /// going at most `overdraft` units past it (a request's usage settled
    /// after its response, charged beyond its admission's cost: the budget
    /// may go into debt, remaining 0 and requests refused until the debt is
    /// repaid: the token bucket's refill, the window's end, the oldest units
    /// leaving the log). Units past the overdraft are not counted. Returns
    /// what a look (0 units) at `now` then sees. A state of another
    /// algorithm is replaced by a fresh one first, as a decision replaces
    /// it. The Redis twins are the `*_overdraw` functions of the algorithms'
    /// Lua files, run by `crates/tollgate-redis/lua/give_back.lua`.
    pub(crate) fn overdraw(
        &mut self,
        rule: &Rule,
        now: u64,
        units: u64,
        overdraft: u64,
    ) -> Verdict {
        if self.algorithm() != rule.policy.algorithm() {
            *self = State::new(rule.policy.algorithm());
        }
        match self {
            State::FixedWindow(state) => state.overdraw(rule, now, units, overdraft),
            State::SlidingLog(state) => state.overdraw(rule, now, units, overdraft),
            State::TokenBucket(state) => state.overdraw(rule, now, units, overdraft),
        }
        self.peek(rule, now)
    }

    /// The earliest time (ticks, never before `now`) at which `units` would
    /// be allowed under `rule`, counting every reservation already made,
    /// changing nothing: the first half of a reservation, whose second half
    /// is [`State::decide`] at that time. `None` when `units` never fit (more
    /// than `limit`, or than `burst` for a token bucket).
    ///
    /// - token bucket: when its theoretical arrival time has moved far enough
    ///   (GCRA grants future slots);
    /// - fixed window: now (or the start of a window ahead, reserved into
    ///   already) when the units fit in it, else the next window's start;
    /// - sliding log: when enough of the oldest units stop counting, never
    ///   before its newest run.
    ///
    /// A window counting refused units is charged whatever it has, so it
    /// never makes a request wait: `now`.
    pub(crate) fn earliest(&self, rule: &Rule, now: u64, units: u64) -> Option<u64> {
        if rule.policy.counts_refused() {
            return Some(now);
        }
        match self {
            _ if self.algorithm() != rule.policy.algorithm() => {
                State::new(rule.policy.algorithm()).earliest(rule, now, units)
            }
            State::FixedWindow(state) => state.earliest(rule, now, units),
            State::SlidingLog(state) => state.earliest(rule, now, units),
            State::TokenBucket(state) => state.earliest(rule, now, units),
        }
    }

    /// Charges `units` at `at` (ticks, no earlier than `now`), where
    /// [`State::earliest`] found they fit: a reservation, a decision at `at`
    /// except that a sliding log keeps the runs that count at `now` (see
    /// `SlidingLog::reserve`), so that giving the reservation back is exact.
    pub(crate) fn reserve(&mut self, rule: &Rule, now: u64, at: u64, units: u64) -> Verdict {
        if self.algorithm() != rule.policy.algorithm() {
            *self = State::new(rule.policy.algorithm());
        }
        match self {
            State::SlidingLog(state) => state.reserve(rule, now, at, units),
            State::FixedWindow(state) if !rule.policy.counts_refused() => {
                state.reserve(rule, now, at, units)
            }
            _ => self.decide(rule, at, units),
        }
    }

    /// Takes back `units` that a decision counted at `counted_at` (ticks):
    /// a reservation whose request left while it waited. Exact, whatever was
    /// decided since: the fixed window's count of the window holding
    /// `counted_at` goes down (nothing when the state has moved to another
    /// window or the window has ended), the sliding log's run at `counted_at`
    /// shrinks (nothing when it is gone or has stopped counting), the token bucket's theoretical arrival time moves back by
    /// the units' worth, never to before `now` (nothing for a bucket full at
    /// `now`). The units given back; a state left counting nothing is fresh.
    /// The Redis twin is `crates/tollgate-redis/lua/refund.lua`.
    pub(crate) fn refund(&mut self, rule: &Rule, now: u64, counted_at: u64, units: u64) -> u64 {
        if self.algorithm() != rule.policy.algorithm() {
            return 0;
        }
        match self {
            State::FixedWindow(state) => state.refund(rule, now, counted_at, units),
            State::SlidingLog(state) => state.refund(rule, now, counted_at, units),
            State::TokenBucket(state) => state.refund(rule, now, counted_at, units),
        }
    }

    fn algorithm(&self) -> Algorithm {
        match self {
            State::FixedWindow(_) => Algorithm::FixedWindow,
            State::SlidingLog(_) => Algorithm::SlidingLog,
            State::TokenBucket(_) => Algorithm::TokenBucket,
        }
    }
}

/// `dividend / divisor`, by the prepared divisor when the dividend fits in 64
/// bits (the common case), by a 128-bit division otherwise.
fn divide(dividend: u128, divisor: StrengthReducedU64) -> u128 {
    match u64::try_from(dividend) {
        Ok(dividend) => u128::from(dividend / divisor),
        Err(_) => dividend / u128::from(divisor.get()),
    }
}

/// `dividend / divisor` rounded up.
fn divide_rounding_up(dividend: u128, divisor: StrengthReducedU64) -> u128 {
    let quotient = divide(dividend, divisor);
    if quotient * u128::from(divisor.get()) < dividend {
        quotient + 1
    } else {
        quotient
    }
}

/// `value` as a `u64`, or `u64::MAX` when it does not fit.
fn saturate(value: u128) -> u64 {
    u64::try_from(value).unwrap_or(u64::MAX)
}
