//! A fixed window shared by a fleet of Envoys (`tollgate rlqs`): the
//! requests the fleet reports allowed are counted against the window's
//! limit, and what is left of it is spread over the window's time left, so
//! that a window little used early lends its allowance to its end.
//!
//! - **Counting.** A report counts in the window it arrives in (windows of
//!   `window_s` seconds aligned to the epoch, as the fixed window's are); a
//!   report in a later window starts the count afresh. A report made just
//!   after a boundary carries up to one reporting interval of the window
//!   before: counted in the new one, which errs on the side of the limit.
//! - **Budget.** The fleet's budget, in tokens per window (the unit of the
//!   parts [`crate::QuotaDemand`] splits), is `left × window / time left`:
//!   the rate that spends what is left, `limit - used - unreported`, by the
//!   window's end (`unreported`: what the other streams may have admitted
//!   since their last report, at their parts' rates). It is at most
//!   `limit × window_s / LENDING_HORIZON_S`, so that a part handed out near
//!   the window's end, which Envoy runs until its next report, cannot carry
//!   more than half the limit into the next window; and at least nothing.
//! - **Only long windows.** A window must hold several of Envoy's 5 s
//!   reports for its count to mean anything: windows under
//!   [`COUNTED_WINDOW_S`] are shared as their rate ([`crate::QuotaRate`]).
//!
//! Integer arithmetic throughout (`u128` where products can exceed 64 bits);
//! every step saturates.

/// The shortest window counted (seconds): a minute, twelve of Envoy's
/// reports. Shorter windows are shared as their rate.
pub const COUNTED_WINDOW_S: u64 = 60;

/// The time over which a budget may spend the rest of a window, at the
/// shortest (seconds): two of Envoy's 5 s reports.
pub const LENDING_HORIZON_S: u64 = 10;

use crate::quota_demand::QuotaDemand;

const NANOS_PER_SECOND: u64 = 1_000_000_000;

/// The count of one fixed window across the fleet.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct WindowCount {
    /// The window's start, seconds since the epoch.
    pub start_s: u64,
    /// Requests reported allowed in it.
    pub used: u64,
}

impl WindowCount {
    /// Counts `allowed` reported at `now_ns` in windows of `window_s`
    /// seconds: a report in a later window than the count's starts it
    /// afresh.
    pub fn count(&mut self, window_s: u64, allowed: u64, now_ns: u64) {
        let window_s = window_s.max(1);
        let start_s = now_ns / NANOS_PER_SECOND / window_s * window_s;
        if start_s != self.start_s {
            *self = WindowCount { start_s, used: 0 };
        }
        self.used = self.used.saturating_add(allowed);
    }

    /// The fleet's budget at `now_ns`, in tokens per window, for a window
    /// of `limit` requests per `window_s` seconds, `unreported` requests the
    /// other streams may have admitted since their last report: see the
    /// module's rules. `now_ns` is in the count's window (after
    /// [`WindowCount::count`]).
    pub fn budget(&self, limit: u64, window_s: u64, unreported: u64, now_ns: u64) -> u64 {
        let window_s = window_s.max(1);
        let left = limit.saturating_sub(self.used).saturating_sub(unreported);
        let end_ns = self
            .start_s
            .saturating_add(window_s)
            .saturating_mul(NANOS_PER_SECOND);
        let time_left_ns = end_ns.saturating_sub(now_ns).max(NANOS_PER_SECOND);
        let spread = u128::from(left) * u128::from(window_s) * u128::from(NANOS_PER_SECOND)
            / u128::from(time_left_ns);
        let most = u128::from(limit) * u128::from(window_s) / u128::from(LENDING_HORIZON_S);
        u64::try_from(spread.min(most.max(u128::from(limit)))).unwrap_or(u64::MAX)
    }
}

/// What a stream holding `part` tokens per `window_s` seconds may have
/// admitted in `since_ns` nanoseconds, rounded up.
pub fn admitted_at_part(part: u64, window_s: u64, since_ns: u64) -> u64 {
    let admitted = (u128::from(part) * u128::from(since_ns))
        .div_ceil(u128::from(window_s.max(1)) * u128::from(NANOS_PER_SECOND));
    u64::try_from(admitted).unwrap_or(u64::MAX)
}

/// What the streams of `demand` other than `except` may have admitted
/// since their last report at `now_ns`, at their parts of a window of
/// `window_s` seconds ([`admitted_at_part`]), added up.
pub fn unreported(demand: &QuotaDemand, except: u64, window_s: u64, now_ns: u64) -> u64 {
    demand
        .records()
        .into_iter()
        .filter(|&(stream, _)| stream != except)
        .fold(0u64, |sum, (_, record)| {
            sum.saturating_add(admitted_at_part(
                record.assigned,
                window_s,
                now_ns.saturating_sub(record.reported_ns),
            ))
        })
}

#[cfg(test)]
mod tests {
    use super::*;

    const SECOND: u64 = NANOS_PER_SECOND;

    #[test]
    fn a_report_counts_in_the_window_it_arrives_in() {
        let mut count = WindowCount::default();
        // 600 a minute; windows [3600, 3660), [3660, 3720).
        count.count(60, 100, 3_610 * SECOND);
        count.count(60, 50, 3_659 * SECOND);
        assert_eq!(
            count,
            WindowCount {
                start_s: 3_600,
                used: 150
            }
        );
        count.count(60, 7, 3_660 * SECOND);
        assert_eq!(
            count,
            WindowCount {
                start_s: 3_660,
                used: 7
            }
        );
    }

    #[test]
    fn what_is_left_is_spread_over_the_time_left() {
        // 600 a minute, 150 used by 30 s in, nothing unreported: 450 left
        // over 30 s is 15 a second, 900 a window.
        let count = WindowCount {
            start_s: 3_600,
            used: 150,
        };
        assert_eq!(count.budget(600, 60, 0, 3_630 * SECOND), 900);
        // At the start of a fresh window: the limit's own rate, 600.
        let fresh = WindowCount {
            start_s: 3_600,
            used: 0,
        };
        assert_eq!(fresh.budget(600, 60, 0, 3_600 * SECOND), 600);
        // 100 the others may have admitted unreported: 350 over 30 s, 700.
        assert_eq!(count.budget(600, 60, 100, 3_630 * SECOND), 700);
        // Used up: nothing.
        let spent = WindowCount {
            start_s: 3_600,
            used: 600,
        };
        assert_eq!(spent.budget(600, 60, 0, 3_630 * SECOND), 0);
    }

    #[test]
    fn lending_is_capped_near_the_windows_end() {
        // 600 a minute, nothing used, 2 s left: 300 a second, 18,000 a
        // window, cut to 600 × 60 / 10 = 3,600 (60 a second, 300 over
        // Envoy's 5 s: half the limit).
        let count = WindowCount {
            start_s: 3_600,
            used: 0,
        };
        assert_eq!(count.budget(600, 60, 0, 3_658 * SECOND), 3_600);
        // Under a second left counts as one second.
        assert_eq!(count.budget(600, 60, 500, 3_659_900_000_000), 3_600);
    }

    #[test]
    fn the_others_unreported_requests_at_their_parts() {
        use crate::BucketReport;
        let mut demand = QuotaDemand::new();
        // Streams 1 and 2 report at 3,600 s, 40 and 20 a second (over 5 s)
        // against 600 a minute: 400 and 200 a minute.
        demand.report(
            1,
            BucketReport {
                allowed: 200,
                denied: 0,
            },
            3_600 * SECOND,
        );
        demand.report(
            2,
            BucketReport {
                allowed: 100,
                denied: 0,
            },
            3_600 * SECOND,
        );
        demand.assign(1, 600, 60);
        assert_eq!(demand.top_up(600, 60), vec![(2, 200)]);
        assert_eq!(demand.part_of(1), Some(400));
        // 3 s later, stream 1 reports: stream 2 may have admitted 200 × 3 /
        // 60 = 10.
        assert_eq!(unreported(&demand, 1, 60, 3_603 * SECOND), 10);
        // Stream 2's view: stream 1's 400 × 3 / 60 = 20.
        assert_eq!(unreported(&demand, 2, 60, 3_603 * SECOND), 20);
    }

    #[test]
    fn what_a_part_admits_is_rounded_up() {
        // 60 a minute for 2.5 s: 2.5, so 3.
        assert_eq!(admitted_at_part(60, 60, 2_500_000_000), 3);
        assert_eq!(admitted_at_part(0, 60, 10 * SECOND), 0);
        assert_eq!(admitted_at_part(u64::MAX, 1, u64::MAX), u64::MAX);
    }
}
