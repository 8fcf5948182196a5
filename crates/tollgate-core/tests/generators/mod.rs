//! Strategies for the property tests: values that mix the small with those
//! near the maxima (2^63-1 for counts, the longest window a clock can
//! count), every resolution, and steps of time forward, backward and across
//! long gaps. The ticks per second and the longest windows are written here
//! by hand, not read from the code under test.

#![allow(dead_code, unreachable_pub, missing_docs)]

use std::time::Duration;

use proptest::prelude::*;
use tollgate_core::{Policy, Resolution};

use tollgate_test_support::models::{FixedWindowModel, Model, SlidingLogModel, TokenBucketModel};

/// 2^63-1: the largest count, window or batch tollgate accepts.
pub const MAX: u64 = i64::MAX as u64;

/// A resolution with its ticks per second.
#[derive(Clone, Copy, Debug)]
pub struct Clock {
    pub resolution: Resolution,
    pub ticks_per_second: u64,
}

impl Clock {
    /// The longest window, in seconds, whose ticks fit in 64 bits.
    pub fn max_window_s(self) -> u64 {
        MAX.min(u64::MAX / self.ticks_per_second)
    }

    /// `seconds` in ticks, `None` when that does not fit in 64 bits.
    pub fn ticks(self, seconds: u64) -> Option<u64> {
        seconds.checked_mul(self.ticks_per_second)
    }

    /// A duration the engine returned, in ticks (it is always a whole number
    /// of them).
    pub fn ticks_of(self, duration: Duration) -> u64 {
        let nanos_per_tick = u128::from(1_000_000_000 / self.ticks_per_second);
        let nanos = duration.as_nanos();
        assert_eq!(nanos % nanos_per_tick, 0, "{duration:?} is not whole ticks");
        u64::try_from(nanos / nanos_per_tick).unwrap()
    }
}

pub fn clocks() -> impl Strategy<Value = Clock> {
    prop_oneof![
        Just(Clock {
            resolution: Resolution::Seconds,
            ticks_per_second: 1
        }),
        Just(Clock {
            resolution: Resolution::Microseconds,
            ticks_per_second: 1_000_000
        }),
        Just(Clock {
            resolution: Resolution::Nanoseconds,
            ticks_per_second: 1_000_000_000
        }),
    ]
}

/// A value from `min` to `max`: often small, often near `max`, sometimes a
/// power of two or one less, sometimes anything.
pub fn edgy(min: u64, max: u64) -> BoxedStrategy<u64> {
    let clamp = move |value: u64| value.clamp(min, max);
    prop_oneof![
        4 => min..=min.saturating_add(8).min(max),
        2 => max.saturating_sub(8).max(min)..=max,
        1 => (0u32..64).prop_map(move |bit| clamp(1 << bit)),
        1 => (1u32..64).prop_map(move |bit| clamp((1 << bit) - 1)),
        2 => min..=max,
    ]
    .boxed()
}

/// The algorithms, with the fixed window counting refused units apart.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    FixedWindow,
    Counting,
    SlidingLog,
    TokenBucket,
}

/// A policy as its numbers, to build both the policy and its model from.
#[derive(Clone, Copy, Debug)]
pub struct Spec {
    pub kind: Kind,
    pub limit: u64,
    pub window_s: u64,
    pub burst: u64,
}

impl Spec {
    pub fn policy(&self) -> Policy {
        let (limit, window) = (self.limit, self.window_s);
        match self.kind {
            Kind::FixedWindow => Policy::fixed_window(limit, window),
            Kind::Counting => Policy::fixed_window_counting_refused(limit, window),
            Kind::SlidingLog => Policy::sliding_log(limit, window),
            Kind::TokenBucket => Policy::token_bucket(limit, window, self.burst),
        }
        .unwrap()
    }

    /// A fresh model of the policy on `clock`; `None` when the window is too
    /// long for it.
    pub fn model(&self, clock: Clock) -> Option<Box<dyn Model>> {
        let window = clock.ticks(self.window_s)?;
        Some(match self.kind {
            Kind::FixedWindow => Box::new(FixedWindowModel::new(self.limit, window)),
            Kind::Counting => Box::new(FixedWindowModel::counting_refused(self.limit, window)),
            Kind::SlidingLog => Box::new(SlidingLogModel::new(self.limit, window)),
            Kind::TokenBucket => Box::new(TokenBucketModel::new(self.limit, window, self.burst)),
        })
    }

    /// The window in ticks (saturating), to scale steps of time by.
    pub fn window_ticks(&self, clock: Clock) -> u64 {
        clock.ticks(self.window_s).unwrap_or(u64::MAX)
    }
}

/// A policy of any algorithm, its window mostly one `clock` can count (and
/// sometimes just too long for it).
pub fn specs(clock: Clock) -> BoxedStrategy<Spec> {
    let longest = clock.max_window_s();
    // Seconds count every window up to 2^63-1; the finer clocks refuse the
    // windows just past their longest.
    let window = if longest < MAX {
        prop_oneof![19 => edgy(1, longest), 1 => (longest + 1)..=(longest + 3)].boxed()
    } else {
        edgy(1, longest)
    };
    let kind = prop_oneof![
        Just(Kind::FixedWindow),
        Just(Kind::Counting),
        Just(Kind::SlidingLog),
        Just(Kind::TokenBucket),
    ];
    (kind, edgy(1, MAX), edgy(0, MAX), window, edgy(1, MAX))
        .prop_map(|(kind, limit, counting_limit, window_s, burst)| Spec {
            kind,
            // Only a window counting refused units may have a limit of 0.
            limit: if kind == Kind::Counting {
                counting_limit
            } else {
                limit
            },
            window_s,
            burst,
        })
        .boxed()
}

/// A step of time, scaled by a window when it is applied.
#[derive(Clone, Copy, Debug)]
pub enum Step {
    /// Forward by `num / den` of the window, plus `jitter` ticks.
    Forward { num: u8, den: u8, jitter: i8 },
    /// Backward by as much.
    Back { num: u8, den: u8, jitter: i8 },
    /// Forward by any number of ticks: a long gap.
    Gap(u64),
}

impl Step {
    /// The time after this step from `now`, kept within `lo..=hi`.
    pub fn apply(self, now: u64, window: u64, lo: u64, hi: u64) -> u64 {
        let scaled = |num: u8, den: u8, jitter: i8| {
            (i128::from(window) * i128::from(num) / i128::from(den)) + i128::from(jitter)
        };
        let delta = match self {
            Step::Forward { num, den, jitter } => scaled(num, den, jitter),
            Step::Back { num, den, jitter } => -scaled(num, den, jitter),
            Step::Gap(ticks) => i128::from(ticks),
        };
        let next = (i128::from(now) + delta).clamp(i128::from(lo), i128::from(hi));
        u64::try_from(next).unwrap()
    }
}

pub fn step() -> BoxedStrategy<Step> {
    let fraction = (0u8..=24, 1u8..=8, -2i8..=2);
    prop_oneof![
        12 => fraction.clone().prop_map(|(num, den, jitter)| Step::Forward { num, den, jitter }),
        3 => fraction.prop_map(|(num, den, jitter)| Step::Back { num, den, jitter }),
        1 => edgy(0, u64::MAX).prop_map(Step::Gap),
    ]
    .boxed()
}

/// Units of a batch: mostly a few, sometimes near the maxima.
pub fn units() -> BoxedStrategy<u64> {
    prop_oneof![8 => 1u64..=12, 1 => edgy(1, u64::MAX)].boxed()
}

/// Units of one limit of a request: 0 (a look) included.
pub fn limit_units() -> BoxedStrategy<u64> {
    prop_oneof![8 => 0u64..=10, 1 => edgy(0, u64::MAX)].boxed()
}
