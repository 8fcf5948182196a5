//! Where engine time comes from: the [`Clock`] trait, the monotonic
//! [`SystemClock`] and the [`ManualClock`] that tests advance by hand; and
//! [`Stopwatch`], for timing short spans such as a decision.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, OnceLock};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

/// A source of the current time, in nanoseconds since the Unix epoch.
///
/// A limiter built with [`Resolution::Nanoseconds`](crate::Resolution) takes its
/// `now` from a clock. Implementations must never go backwards.
pub trait Clock: Send + Sync {
    /// The current time in nanoseconds since 1970-01-01T00:00:00Z.
    fn now_nanos(&self) -> u64;
}

/// The machine's clock: monotonic, anchored to the wall clock once at creation,
/// so fixed windows line up with the epoch and never jump when the wall clock is
/// adjusted. Reads the CPU's time-stamp counter through `quanta` where it is
/// reliable (about 10 ns a reading), the OS monotonic clock elsewhere.
#[derive(Clone, Debug)]
pub struct SystemClock {
    clock: quanta::Clock,
    /// The clock's raw reading (counter ticks) at `origin_nanos`.
    origin: u64,
    origin_nanos: u64,
}

impl SystemClock {
    /// A clock reading the wall clock now and counting monotonic time from it.
    pub fn new() -> Self {
        let since_epoch = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .unwrap_or(Duration::ZERO);
        let clock = quanta::Clock::new();
        SystemClock {
            origin: clock.raw(),
            clock,
            origin_nanos: saturating_nanos(since_epoch),
        }
    }
}

impl Default for SystemClock {
    fn default() -> Self {
        SystemClock::new()
    }
}

impl Clock for SystemClock {
    /// One raw reading, scaled once: no `Duration` on the way.
    fn now_nanos(&self) -> u64 {
        let elapsed = self.clock.delta_as_nanos(self.origin, self.clock.raw());
        self.origin_nanos.saturating_add(elapsed)
    }
}

/// A timer for short spans, such as how long a decision took: two raw
/// readings of the CPU's time-stamp counter where `quanta` finds it reliable
/// (the OS monotonic clock elsewhere) and one scaling, a few nanoseconds in
/// all. A span the counter cannot order (a thread moved to a core whose
/// counter is behind) measures zero.
///
/// ```
/// use tollgate_core::Stopwatch;
///
/// let stopwatch = Stopwatch::start();
/// std::thread::sleep(std::time::Duration::from_millis(2));
/// assert!(stopwatch.elapsed() >= std::time::Duration::from_millis(1));
/// ```
#[derive(Clone, Copy, Debug)]
pub struct Stopwatch {
    started: u64,
}

impl Stopwatch {
    /// A stopwatch started now.
    pub fn start() -> Self {
        Stopwatch {
            started: span_clock().raw(),
        }
    }

    /// The time since [`Stopwatch::start`].
    pub fn elapsed(&self) -> Duration {
        let clock = span_clock();
        Duration::from_nanos(clock.delta_as_nanos(self.started, clock.raw()))
    }
}

/// The process's clock for [`Stopwatch`], calibrated on first use.
fn span_clock() -> &'static quanta::Clock {
    static CLOCK: OnceLock<quanta::Clock> = OnceLock::new();
    CLOCK.get_or_init(quanta::Clock::new)
}

/// A clock that moves only when told to; clones share one time.
///
/// ```
/// use tollgate_core::{Clock, ManualClock};
///
/// let clock = ManualClock::new(0);
/// clock.advance_by("1s 250ms").unwrap();
/// assert_eq!(clock.now_nanos(), 1_250_000_000);
/// ```
#[derive(Clone, Debug, Default)]
pub struct ManualClock {
    nanos: Arc<AtomicU64>,
}

/// A duration string that [`ManualClock::advance_by`] could not read.
#[derive(Debug, thiserror::Error)]
#[error("invalid duration {text:?}: {reason}")]
pub struct DurationParseError {
    text: String,
    reason: humantime::DurationError,
}

impl ManualClock {
    /// A clock standing at `nanos` nanoseconds since the epoch.
    pub fn new(nanos: u64) -> Self {
        ManualClock {
            nanos: Arc::new(AtomicU64::new(nanos)),
        }
    }

    /// Moves the clock forward by `by` (saturating at 2^64-1 ns).
    pub fn advance(&self, by: Duration) {
        let by = saturating_nanos(by);
        let _ = self
            .nanos
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |now| {
                Some(now.saturating_add(by))
            });
    }

    /// Moves the clock forward by a human duration such as `"1s"`, `"250ms"` or
    /// `"1m 30s"` (the `humantime` format).
    ///
    /// # Errors
    ///
    /// [`DurationParseError`] when the text is not a duration; the clock stays put.
    pub fn advance_by(&self, text: &str) -> Result<(), DurationParseError> {
        let by = humantime::parse_duration(text).map_err(|reason| DurationParseError {
            text: text.to_owned(),
            reason,
        })?;
        self.advance(by);
        Ok(())
    }
}

impl Clock for ManualClock {
    fn now_nanos(&self) -> u64 {
        self.nanos.load(Ordering::Acquire)
    }
}

impl<C: Clock + ?Sized> Clock for Arc<C> {
    fn now_nanos(&self) -> u64 {
        (**self).now_nanos()
    }
}

fn saturating_nanos(duration: Duration) -> u64 {
    u64::try_from(duration.as_nanos()).unwrap_or(u64::MAX)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn manual_clock_moves_only_when_told() {
        let clock = ManualClock::new(5);
        let shared = clock.clone();
        assert_eq!(clock.now_nanos(), 5);
        shared.advance(Duration::from_nanos(10));
        assert_eq!(clock.now_nanos(), 15);
        clock.advance_by("250ms").unwrap();
        assert_eq!(shared.now_nanos(), 250_000_015);
        assert!(clock.advance_by("soon").is_err());
        assert_eq!(clock.now_nanos(), 250_000_015);
        clock.advance(Duration::MAX);
        assert_eq!(clock.now_nanos(), u64::MAX);
    }

    #[test]
    fn system_clock_never_goes_backwards() {
        let clock = SystemClock::new();
        let first = clock.now_nanos();
        assert!(first > 1_600_000_000 * 1_000_000_000);
        assert!(clock.now_nanos() >= first);
    }
}
