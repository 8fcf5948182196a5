//! What the property tests of the Redis store draw (`differential.rs`
//! against the in-memory gateway, `models.rs` against the independent
//! models): policies over the whole range the store accepts, units up to
//! 2^64 - 1, times that stand still, step, leap over years and go back, and
//! the admin operations between requests. Small values are the most likely,
//! values next to the bounds come often.

#![allow(dead_code, unreachable_pub, missing_docs)]

use proptest::prelude::*;
use tollgate_core::{Calendar, CalendarPeriod, Policy};

/// The store computes quantities below 2^52 exactly and refuses larger ones.
pub const BOUND: u64 = 1 << 52;

/// The longest window the store takes: its microseconds stay below 2^52.
pub const MAX_WINDOW_S: u64 = (BOUND - 1) / 1_000_000;

/// The latest time the steps reach, in microseconds: a time plus any window
/// stays below 2^53, where Lua's numbers stop being exact.
pub const MAX_NOW: u64 = BOUND - 1;

/// A limit or burst: small mostly, else middling or just below 2^52.
pub fn count() -> impl Strategy<Value = u64> {
    prop_oneof![
        6 => 1u64..=8,
        1 => 9u64..=1_000_000,
        2 => (BOUND - 8)..BOUND,
    ]
}

/// A window in seconds: short mostly, else long or among the longest taken.
pub fn window_s() -> impl Strategy<Value = u64> {
    prop_oneof![
        6 => 1u64..=20,
        1 => 21u64..=10_000_000,
        2 => (MAX_WINDOW_S - 3)..=MAX_WINDOW_S,
    ]
}

/// Any policy the store accepts, each algorithm as likely.
pub fn policies() -> impl Strategy<Value = Policy> {
    prop_oneof![
        (count(), window_s())
            .prop_map(|(limit, window)| Policy::fixed_window(limit, window).unwrap()),
        (count(), window_s()).prop_map(|(limit, window)| {
            Policy::fixed_window_counting_refused(limit, window).unwrap()
        }),
        (count(), window_s())
            .prop_map(|(limit, window)| Policy::sliding_log(limit, window).unwrap()),
        (count(), window_s())
            .prop_flat_map(|(limit, window)| {
                // burst x window in microseconds below 2^52.
                let deepest = (BOUND - 1) / (window * 1_000_000);
                let burst = prop_oneof![
                    3 => 1u64..=deepest.min(8),
                    1 => Just(deepest),
                ];
                (Just(limit), Just(window), burst)
            })
            .prop_map(|(limit, window, burst)| Policy::token_bucket(limit, window, burst).unwrap()),
    ]
}

/// Units of one limit: a few mostly, 0 (a look) often, else around 2^52 or
/// the most a caller can ask.
pub fn units() -> impl Strategy<Value = u64> {
    prop_oneof![
        6 => 0u64..=10,
        2 => Just(0u64),
        1 => (BOUND - 10)..=(BOUND + 10),
        1 => Just(u64::MAX),
    ]
}

/// The zones the calendar windows are drawn in: UTC, one with daylight
/// saving, one half an hour off.
pub const ZONES: [&str; 3] = ["UTC", "Europe/Berlin", "Asia/Kolkata"];

/// A calendar window of the four periods in one of [`ZONES`], weeks
/// starting on Monday or Sunday.
pub fn calendars() -> impl Strategy<Value = Calendar> {
    (0usize..4, 0..ZONES.len(), any::<bool>()).prop_map(|(period, zone, sunday)| {
        let period = [
            CalendarPeriod::Day,
            CalendarPeriod::Week,
            CalendarPeriod::Month,
            CalendarPeriod::Year,
        ][period];
        let week_starts = (period == CalendarPeriod::Week && sunday).then_some("sunday");
        Calendar::new(period, ZONES[zone], week_starts).unwrap()
    })
}

/// A calendar quota (limits small mostly) half the time, else any policy.
pub fn with_calendars() -> impl Strategy<Value = Policy> {
    prop_oneof![
        (count(), calendars())
            .prop_map(|(limit, calendar)| Policy::calendar(limit, calendar).unwrap()),
        policies(),
    ]
}

/// A time (µs) just before a boundary of a calendar of [`calendars`]: at
/// most 2 s before the end of the period holding a time from 1970 to 2100.
pub fn calendar_starts() -> impl Strategy<Value = u64> {
    (calendars(), 0u64..4_102_444_800, 0u64..2_000_000).prop_map(|(calendar, second, before)| {
        let (_, end) = calendar.window_at(second);
        (end * 1_000_000).saturating_sub(before).min(MAX_NOW)
    })
}

/// How far time moves before a step, in microseconds.
pub fn moves() -> impl Strategy<Value = i64> {
    prop_oneof![
        4 => 0i64..3_000_000,
        2 => Just(0i64),
        1 => Just(1_000_000i64),
        // A long gap: up to three years.
        1 => 3_000_000i64..100_000_000_000_000,
        // A clock behind: a little, or by months.
        2 => -10_000_000i64..0,
        1 => -10_000_000_000_000i64..-10_000_000,
    ]
}

/// Where time starts, in microseconds: near the epoch, near today, or near
/// the latest time the steps reach.
pub fn starts() -> impl Strategy<Value = u64> {
    prop_oneof![
        0u64..1_000_000_000_000,
        1_700_000_000_000_000u64..1_900_000_000_000_000,
        (MAX_NOW - 1_000_000_000_000)..=MAX_NOW,
    ]
}

/// The time of the steps: moved by each step, within 0..=[`MAX_NOW`], and
/// never back past a moment the store forgot a state at.
///
/// The Redis store keeps a state only for its useful life as of the latest
/// decision on it (its TTL; a decision that finds the state as good as new
/// deletes it), so a clock that then goes back past that moment finds the
/// state new, where the in-memory gateway and the models still have it. A
/// decision with `reset_after` 0 on a limit is such a moment.
#[derive(Clone, Copy, Debug)]
pub struct Clock {
    pub now: u64,
    floor: u64,
}

impl Clock {
    pub fn new(start: u64) -> Self {
        Clock {
            now: start.min(MAX_NOW),
            floor: 0,
        }
    }

    /// Moves by `by` microseconds (back too), at most back to the latest
    /// moment a state was forgotten; the time now.
    pub fn step(&mut self, by: i64) -> u64 {
        self.now = self
            .now
            .saturating_add_signed(by)
            .clamp(self.floor, MAX_NOW);
        self.now
    }

    /// Notes that a state may have been forgotten now.
    pub fn forgotten(&mut self) {
        self.floor = self.now;
    }
}

/// What happens at one step.
#[derive(Clone, Debug)]
pub enum Step {
    /// A request on the plan of key `key` and then the route and the other
    /// limit, the first `count` of the three, with `units` each.
    Acquire {
        key: usize,
        units: Vec<u64>,
        count: usize,
    },
    /// `reset` of the plan of key `key`.
    Reset { key: usize },
    /// A new default policy.
    Configure { policy: Policy },
    /// The plan of key `key` onto the tier `t1` (`true`) or back to the
    /// default.
    Tier { key: usize, tier: bool },
}

/// Up to 40 steps on keys `0..keys`, each after a move of time.
pub fn steps(keys: usize) -> impl Strategy<Value = Vec<(i64, Step)>> {
    let step = prop_oneof![
        12 => (0..keys, prop::collection::vec(units(), 3), 1usize..=3)
            .prop_map(|(key, units, count)| Step::Acquire { key, units, count }),
        1 => (0..keys).prop_map(|key| Step::Reset { key }),
        1 => policies().prop_map(|policy| Step::Configure { policy }),
        1 => (0..keys, any::<bool>()).prop_map(|(key, tier)| Step::Tier { key, tier }),
    ];
    prop::collection::vec((moves(), step), 1..40)
}
