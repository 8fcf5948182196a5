//! The unit of the engine's integer time: how long one clock tick is.

use std::time::Duration;

/// How long one tick of engine time is.
///
/// The engine counts time in integer ticks. The operations harness counts whole
/// seconds (timestamps up to 2^63-1 s); a limiter on a real or manual [`Clock`]
/// counts nanoseconds, which holds about 584 years of time in 64 bits.
///
/// [`Clock`]: crate::Clock
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Default)]
pub enum Resolution {
    /// One tick is one second.
    #[default]
    Seconds,
    /// One tick is one microsecond (the Redis store: Redis's `TIME` counts
    /// microseconds, and they fit the exact range of a Lua number).
    Microseconds,
    /// One tick is one nanosecond.
    Nanoseconds,
}

impl Resolution {
    /// Ticks in one second: 1 or 10^9.
    pub fn ticks_per_second(self) -> u64 {
        match self {
            Resolution::Seconds => 1,
            Resolution::Microseconds => 1_000_000,
            Resolution::Nanoseconds => 1_000_000_000,
        }
    }

    /// `seconds` in ticks, or `None` when that does not fit in 64 bits.
    pub fn ticks_from_seconds(self, seconds: u64) -> Option<u64> {
        seconds.checked_mul(self.ticks_per_second())
    }

    /// The longest span, in whole seconds, that fits in 64 bits of ticks.
    pub fn max_seconds(self) -> u64 {
        u64::MAX / self.ticks_per_second()
    }

    /// `duration` in whole ticks, rounded down; `u64::MAX` when it does
    /// not fit.
    pub fn ticks_from_duration(self, duration: Duration) -> u64 {
        let ticks = duration.as_nanos() / u128::from(1_000_000_000 / self.ticks_per_second());
        u64::try_from(ticks).unwrap_or(u64::MAX)
    }

    /// A span of `ticks` as a [`Duration`] (exact for both resolutions).
    pub fn duration(self, ticks: u64) -> Duration {
        match self {
            Resolution::Seconds => Duration::from_secs(ticks),
            Resolution::Microseconds => Duration::from_micros(ticks),
            Resolution::Nanoseconds => Duration::from_nanos(ticks),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn converts_exactly() {
        assert_eq!(Resolution::Seconds.duration(u64::MAX).as_secs(), u64::MAX);
        assert_eq!(
            Resolution::Nanoseconds.duration(1_500_000_000),
            Duration::from_millis(1500)
        );
        assert_eq!(
            Resolution::Nanoseconds.ticks_from_seconds(60),
            Some(60_000_000_000)
        );
        assert_eq!(
            Resolution::Nanoseconds.ticks_from_seconds(18_446_744_074),
            None
        );
        assert_eq!(Resolution::Nanoseconds.max_seconds(), 18_446_744_073);
    }
}
