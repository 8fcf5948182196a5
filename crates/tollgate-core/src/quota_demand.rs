//! The streams of one quota bucket as `tollgate rlqs` (Envoy's Rate Limit
//! Quota Service) sees them: each stream's demand, read from its reports on
//! the server's own clock, and when a stream has gone quiet long enough for
//! its share to return to the others.
//!
//! - **Demand** is the requests a report counts (allowed and denied) per
//!   second since the stream's previous report of the bucket, in thousandths
//!   of a request per second. The time is the server's: Envoy 1.40 cuts its
//!   `time_elapsed` to whole seconds and leaves it out of a bucket's first
//!   report. A stream's first report counts over [`FIRST_REPORT_SPAN_NS`]
//!   (Envoy's fixed 5 s reporting interval), and no report counts over less
//!   than [`SHORTEST_SPAN_NS`], so a stream that reports faster than it is
//!   asked to cannot inflate its demand.
//! - **Parts**: each stream holds a part of the bucket's budget, given by
//!   [`QuotaDemand::assign`] when it reports: its part of the budget by
//!   demand ([`split_by_demand`]), cut to what the other streams' parts leave,
//!   so that the parts held never add up to more than the budget, though
//!   the other streams hold the parts of their own last report until their
//!   next one. A stream whose part moves by less than [`KEEP_WITHIN`] keeps
//!   the one it holds: Envoy builds a new, full token bucket for every
//!   change, so each change may admit one more burst.
//! - **Idle** streams, whose reports have counted no request for the idle
//!   time given, are taken out ([`QuotaDemand::take_idle`]), to be sent an
//!   abandon: Envoy keeps reporting a bucket it holds, at 0 and 0, until the
//!   server abandons it.
//!
//! Time is in nanoseconds on the caller's clock; every step saturates, so no
//! report (counts near 2^64, a clock going back) overflows or panics.

use std::collections::BTreeMap;

use crate::quota_split::{MAX_DEMAND, split_by_demand};

/// The span a stream's first report of a bucket counts over: Envoy 1.40's
/// reporting interval, 5 s, fixed in its source whatever the filter's
/// `reporting_interval` says.
pub const FIRST_REPORT_SPAN_NS: u64 = 5_000_000_000;

/// The shortest span a report counts over: 1 s.
pub const SHORTEST_SPAN_NS: u64 = 1_000_000_000;

/// How long a stream may go without reporting before its part is taken
/// back ([`QuotaDemand::take_stale`]): its last assignment's time to live,
/// `ttl_s` whole seconds, and one more of Envoy's 5 s reports
/// ([`FIRST_REPORT_SPAN_NS`]), after which its Envoy enforces its own
/// fallback, not the part.
pub fn stale_after_ns(ttl_s: u64) -> u64 {
    ttl_s
        .saturating_mul(1_000_000_000)
        .saturating_add(FIRST_REPORT_SPAN_NS)
}

/// A stream keeps the part it holds when its new part differs from it by no
/// more than one part in `KEEP_WITHIN` (6.25 %).
pub const KEEP_WITHIN: u64 = 16;

/// One stream's report of one bucket: the requests it allowed and denied
/// since its previous report.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct BucketReport {
    /// Requests allowed.
    pub allowed: u64,
    /// Requests denied.
    pub denied: u64,
}

/// What is known of one stream: the record a store keeps for it
/// ([`QuotaDemand::records`], [`QuotaDemand::from_records`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct StreamRecord {
    /// Thousandths of a request per second, at its last report.
    pub demand: u64,
    /// When it last reported.
    pub reported_ns: u64,
    /// When a report of it last counted a request (its first report's time
    /// when none has).
    pub active_ns: u64,
    /// The part of the budget it holds (0 until one is assigned).
    pub assigned: u64,
}

type Stream = StreamRecord;

/// The streams of one bucket, by their ids (the server's numbering of its
/// gRPC streams), in id order.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct QuotaDemand {
    streams: BTreeMap<u64, Stream>,
}

impl QuotaDemand {
    /// No stream yet.
    pub fn new() -> QuotaDemand {
        QuotaDemand::default()
    }

    /// Notes `report` from `stream` at `now_ns`: a stream's first report
    /// subscribes it.
    pub fn report(&mut self, stream: u64, report: BucketReport, now_ns: u64) {
        let requests = report.allowed.saturating_add(report.denied);
        let previous = self.streams.get(&stream).copied();
        let span_ns = match previous {
            None => FIRST_REPORT_SPAN_NS,
            Some(known) => now_ns.saturating_sub(known.reported_ns),
        }
        .max(SHORTEST_SPAN_NS);
        // requests / span in thousandths a second: requests × 10^12 / span.
        let demand = u128::from(requests) * 1_000_000_000_000 / u128::from(span_ns);
        let demand = u64::try_from(demand).unwrap_or(u64::MAX).min(MAX_DEMAND);
        let active_ns = match previous {
            Some(known) if requests == 0 => known.active_ns,
            _ => now_ns,
        };
        self.streams.insert(
            stream,
            Stream {
                demand,
                reported_ns: now_ns,
                active_ns,
                assigned: previous.map_or(0, |known| known.assigned),
            },
        );
    }

    /// Gives `stream` its part of `budget` (whole tokens per fill) and notes
    /// it as held: its part by demand ([`QuotaDemand::split`]), cut to the
    /// budget less the parts the other streams hold; the part it holds when
    /// that is no more than the cut and within one in [`KEEP_WITHIN`] of the
    /// new part. `None` for a stream that has not reported.
    pub fn assign(&mut self, stream: u64, budget: u64, fill_s: u64) -> Option<u64> {
        let target = self
            .split(budget, fill_s)
            .into_iter()
            .find(|&(id, _)| id == stream)?
            .1;
        let others = self
            .streams
            .iter()
            .filter(|&(&id, _)| id != stream)
            .fold(0u64, |sum, (_, known)| sum.saturating_add(known.assigned));
        let cap = budget.saturating_sub(others);
        let known = self.streams.get_mut(&stream)?;
        let held = known.assigned;
        let keep =
            held > 0 && held <= cap && target.abs_diff(held).saturating_mul(KEEP_WITHIN) <= held;
        known.assigned = if keep { held } else { target.min(cap) };
        Some(known.assigned)
    }

    /// Raises the parts of the streams holding less than their part by
    /// demand, in id order, each to its part by demand or to what is left of
    /// `budget` unheld, whichever is less; gives the streams raised and their
    /// new parts. Called when a report freed part of the budget, so that the
    /// streams waiting for it get it at once rather than at their next
    /// report.
    pub fn top_up(&mut self, budget: u64, fill_s: u64) -> Vec<(u64, u64)> {
        let held = self
            .streams
            .values()
            .fold(0u64, |sum, known| sum.saturating_add(known.assigned));
        let mut left = budget.saturating_sub(held);
        let mut raised = Vec::new();
        for (stream, target) in self.split(budget, fill_s) {
            if left == 0 {
                break;
            }
            let Some(known) = self.streams.get_mut(&stream) else {
                continue;
            };
            if known.assigned < target {
                let more = (target - known.assigned).min(left);
                known.assigned += more;
                left -= more;
                raised.push((stream, known.assigned));
            }
        }
        raised
    }

    /// Gives every stream its part of `budget` by demand at once (a new
    /// limit, pushed to every stream), in id order; the parts add up to the
    /// budget.
    pub fn assign_all(&mut self, budget: u64, fill_s: u64) -> Vec<(u64, u64)> {
        let parts = self.split(budget, fill_s);
        for &(stream, part) in &parts {
            if let Some(known) = self.streams.get_mut(&stream) {
                known.assigned = part;
            }
        }
        parts
    }

    /// The part `stream` holds, if it has reported.
    pub fn part_of(&self, stream: u64) -> Option<u64> {
        self.streams.get(&stream).map(|known| known.assigned)
    }

    /// The parts the streams hold, in id order.
    pub fn assigned(&self) -> Vec<(u64, u64)> {
        self.streams
            .iter()
            .map(|(&stream, known)| (stream, known.assigned))
            .collect()
    }

    /// The streams and their records, in id order, for a store to keep.
    pub fn records(&self) -> Vec<(u64, StreamRecord)> {
        self.streams
            .iter()
            .map(|(&stream, &record)| (stream, record))
            .collect()
    }

    /// The bucket a store kept as `records` (a stream listed twice keeps its
    /// last record).
    pub fn from_records(records: impl IntoIterator<Item = (u64, StreamRecord)>) -> QuotaDemand {
        QuotaDemand {
            streams: records.into_iter().collect(),
        }
    }

    /// Takes out the streams that have not reported for `stale_ns` or more
    /// at `now_ns` (their server is gone: their Envoys' assignments have run
    /// out), and gives their ids.
    pub fn take_stale(&mut self, stale_ns: u64, now_ns: u64) -> Vec<u64> {
        let stale: Vec<u64> = self
            .streams
            .iter()
            .filter(|(_, known)| now_ns.saturating_sub(known.reported_ns) >= stale_ns)
            .map(|(&stream, _)| stream)
            .collect();
        for stream in &stale {
            self.streams.remove(stream);
        }
        stale
    }

    /// Forgets `stream` (its gRPC stream closed): its share returns at once.
    pub fn close(&mut self, stream: u64) {
        self.streams.remove(&stream);
    }

    /// Takes out the streams whose reports have counted no request for
    /// `idle_ns` or more at `now_ns`, and gives their ids (in order), to be
    /// sent an abandon.
    pub fn take_idle(&mut self, idle_ns: u64, now_ns: u64) -> Vec<u64> {
        let idle: Vec<u64> = self
            .streams
            .iter()
            .filter(|(_, known)| now_ns.saturating_sub(known.active_ns) >= idle_ns)
            .map(|(&stream, _)| stream)
            .collect();
        for stream in &idle {
            self.streams.remove(stream);
        }
        idle
    }

    /// Each stream's demand (thousandths of a request per second), in id
    /// order.
    pub fn demands(&self) -> Vec<(u64, u64)> {
        self.streams
            .iter()
            .map(|(&stream, known)| (stream, known.demand))
            .collect()
    }

    /// Each stream's part of `budget` whole tokens every `fill_s` seconds by
    /// its demand ([`split_by_demand`], each demand a second scaled to
    /// `fill_s` seconds, the budget's unit), in id order.
    pub fn split(&self, budget: u64, fill_s: u64) -> Vec<(u64, u64)> {
        let demands: Vec<u64> = self
            .streams
            .values()
            .map(|known| known.demand.saturating_mul(fill_s.max(1)))
            .collect();
        self.streams
            .keys()
            .copied()
            .zip(split_by_demand(budget, &demands))
            .collect()
    }

    /// How many streams share the bucket.
    pub fn len(&self) -> usize {
        self.streams.len()
    }

    /// Whether no stream shares the bucket.
    pub fn is_empty(&self) -> bool {
        self.streams.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const SECOND: u64 = 1_000_000_000;

    fn report(allowed: u64, denied: u64) -> BucketReport {
        BucketReport { allowed, denied }
    }

    #[test]
    fn demand_is_requests_a_second_on_the_servers_clock() {
        let mut bucket = QuotaDemand::new();
        // A first report of 10 requests counts over 5 s: 2 a second.
        bucket.report(1, report(8, 2), 100 * SECOND);
        assert_eq!(bucket.demands(), vec![(1, 2_000)]);
        // 5 s later, 35 allowed and 15 denied: 10 a second.
        bucket.report(1, report(35, 15), 105 * SECOND);
        assert_eq!(bucket.demands(), vec![(1, 10_000)]);
        // 4 s later (Envoy's cut second), 6: 1.5 a second.
        bucket.report(1, report(6, 0), 109 * SECOND);
        assert_eq!(bucket.demands(), vec![(1, 1_500)]);
    }

    #[test]
    fn a_stream_reporting_fast_cannot_inflate_its_demand() {
        let mut bucket = QuotaDemand::new();
        bucket.report(1, report(5, 0), 10 * SECOND);
        // 10 ms later, 5 more: counted over the shortest span, 1 s.
        bucket.report(1, report(5, 0), 10 * SECOND + 10_000_000);
        assert_eq!(bucket.demands(), vec![(1, 5_000)]);
        // A clock gone back counts over the shortest span too.
        bucket.report(1, report(3, 0), SECOND);
        assert_eq!(bucket.demands(), vec![(1, 3_000)]);
    }

    #[test]
    fn counts_near_two_to_the_64_are_capped() {
        let mut bucket = QuotaDemand::new();
        bucket.report(1, report(u64::MAX, u64::MAX), 0);
        assert_eq!(bucket.demands(), vec![(1, MAX_DEMAND)]);
    }

    #[test]
    fn quiet_streams_are_taken_out_after_the_idle_time_and_closed_ones_at_once() {
        let mut bucket = QuotaDemand::new();
        bucket.report(1, report(10, 0), 0);
        bucket.report(2, report(10, 0), 0);
        bucket.report(3, report(10, 0), 0);
        // Stream 1 goes quiet at 5 s (reports of 0), stream 2 keeps busy.
        for at in [5, 10, 15, 20, 25, 30] {
            bucket.report(1, report(0, 0), at * SECOND);
            bucket.report(2, report(1, 0), at * SECOND);
        }
        bucket.close(3);
        // Its last request counted at 0 s: idle for 30 s at 30 s.
        assert_eq!(bucket.take_idle(30 * SECOND, 30 * SECOND), vec![1]);
        assert_eq!(bucket.len(), 1);
        assert_eq!(
            bucket.take_idle(30 * SECOND, 30 * SECOND),
            Vec::<u64>::new()
        );
    }

    #[test]
    fn a_stream_gets_its_part_cut_to_what_the_others_leave() {
        let mut bucket = QuotaDemand::new();
        // Two streams of equal demand share 100: 50 each.
        bucket.report(1, report(250, 0), 0);
        bucket.report(2, report(250, 0), 0);
        assert_eq!(bucket.assign(1, 100, 1), Some(50));
        assert_eq!(bucket.assign(2, 100, 1), Some(50));
        // A third of the same demand: its part by demand is 33 (of 100: 34,
        // 33, 33), but the others hold all 100, so it gets 0 until they
        // report.
        bucket.report(3, report(250, 0), 0);
        assert_eq!(bucket.assign(3, 100, 1), Some(0));
        // Stream 1 reports again (same demand, 5 s later): 34, under the 50
        // it held by more than one in 16.
        bucket.report(1, report(250, 0), 5 * SECOND);
        assert_eq!(bucket.assign(1, 100, 1), Some(34));
        // Stream 3 now gets what 1 and 2 leave: 100 - 34 - 50 = 16.
        assert_eq!(bucket.assign(3, 100, 1), Some(16));
        bucket.report(2, report(250, 0), 5 * SECOND);
        assert_eq!(bucket.assign(2, 100, 1), Some(33));
        bucket.report(3, report(250, 0), 5 * SECOND);
        assert_eq!(bucket.assign(3, 100, 1), Some(33));
        assert_eq!(bucket.assigned(), vec![(1, 34), (2, 33), (3, 33)]);
        assert_eq!(bucket.assign(9, 100, 1), None);
    }

    #[test]
    fn a_part_freed_goes_at_once_to_the_streams_short_of_theirs() {
        let mut bucket = QuotaDemand::new();
        bucket.report(1, report(250, 0), 0);
        assert_eq!(bucket.assign(1, 100, 1), Some(100));
        bucket.report(2, report(250, 0), 0);
        bucket.report(3, report(250, 0), 0);
        assert_eq!(bucket.assign(2, 100, 1), Some(0));
        assert_eq!(bucket.assign(3, 100, 1), Some(0));
        // Nothing is free yet.
        assert_eq!(bucket.top_up(100, 1), vec![]);
        // Stream 1 reports: 34 of 100, freeing 66, which streams 2 and 3
        // (33 each by demand) take at once.
        bucket.report(1, report(250, 0), 5 * SECOND);
        assert_eq!(bucket.assign(1, 100, 1), Some(34));
        assert_eq!(bucket.top_up(100, 1), vec![(2, 33), (3, 33)]);
        assert_eq!(bucket.assigned(), vec![(1, 34), (2, 33), (3, 33)]);
    }

    #[test]
    fn a_small_move_keeps_the_part_held() {
        let mut bucket = QuotaDemand::new();
        // 70 and 30 a second: parts 70 and 30 of 100.
        bucket.report(1, report(350, 0), 0);
        bucket.report(2, report(150, 0), 0);
        assert_eq!(bucket.assign_all(100, 1), vec![(1, 70), (2, 30)]);
        // Stream 1's demand moves to 72 a second (330 + 30 over 5 s): its
        // part by demand is 100 × 72 / 102 = 70.6, within one in 16 of 70.
        bucket.report(1, report(330, 30), 5 * SECOND);
        assert_eq!(bucket.assign(1, 100, 1), Some(70));
        // Then to 90 a second: 100 × 90 / 120 = 75, more than 70/16 away,
        // but the cut (100 - 30) holds it at 70.
        bucket.report(1, report(450, 0), 10 * SECOND);
        assert_eq!(bucket.assign(1, 100, 1), Some(70));
        // Stream 2 reports 300 over its 10 s, 30 a second: its part by
        // demand is 100 × 30 / 120 = 25.
        bucket.report(2, report(300, 0), 10 * SECOND);
        assert_eq!(bucket.assign(2, 100, 1), Some(25));
    }

    #[test]
    fn records_give_the_same_bucket_back_and_stale_streams_go() {
        let mut bucket = QuotaDemand::new();
        bucket.report(1, report(50, 0), 0);
        bucket.report(2, report(25, 0), 3 * SECOND);
        // 10 and 5 a second under 100: 10 + 85 / 2 and 5 + 85 / 2, 52.5 and
        // 47.5, the remainder's token to the earlier: 53.
        assert_eq!(bucket.assign(1, 100, 1), Some(53));
        let records = bucket.records();
        assert_eq!(
            records[0],
            (
                1,
                StreamRecord {
                    demand: 10_000,
                    reported_ns: 0,
                    active_ns: 0,
                    assigned: 53
                }
            )
        );
        let mut kept = QuotaDemand::from_records(records);
        assert_eq!(kept, bucket);
        // At 20 s, stream 1 has not reported for 20 s, stream 2 for 17 s.
        assert_eq!(kept.take_stale(20 * SECOND, 20 * SECOND), vec![1]);
        assert_eq!(kept.len(), 1);
    }

    #[test]
    fn demand_is_scaled_to_the_budgets_period() {
        let mut bucket = QuotaDemand::new();
        // 15 and 5 a second against 600 a minute (10 a second): over-
        // subscribed, 75 / 25: 450 and 150 a minute. Compared unscaled
        // (20 a second against 600) it would have looked under-subscribed.
        bucket.report(1, report(75, 0), 0);
        bucket.report(2, report(25, 0), 0);
        assert_eq!(bucket.split(600, 60), vec![(1, 450), (2, 150)]);
    }

    #[test]
    fn a_stream_is_stale_a_report_after_its_ttl() {
        // 15 s of TTL and one 5 s report.
        assert_eq!(stale_after_ns(15), 20 * SECOND);
        assert_eq!(stale_after_ns(u64::MAX), u64::MAX);
    }

    #[test]
    fn the_budget_is_split_by_the_streams_demand_in_id_order() {
        let mut bucket = QuotaDemand::new();
        // Over 5 s: 350, 100 and 50 requests, so 70, 20 and 10 a second.
        bucket.report(7, report(350, 0), 0);
        bucket.report(3, report(60, 40), 0);
        bucket.report(9, report(20, 30), 0);
        assert_eq!(bucket.split(30, 1), vec![(3, 6), (7, 21), (9, 3)]);
    }
}
