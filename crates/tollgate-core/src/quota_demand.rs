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

/// One stream's report of one bucket: the requests it allowed and denied
/// since its previous report.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct BucketReport {
    /// Requests allowed.
    pub allowed: u64,
    /// Requests denied.
    pub denied: u64,
}

/// What is known of one stream.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Stream {
    /// Thousandths of a request per second, at its last report.
    demand: u64,
    /// When it last reported.
    reported_ns: u64,
    /// When a report of it last counted a request (its first report's time
    /// when none has).
    active_ns: u64,
}

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
            },
        );
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

    /// Each stream's part of `budget` whole tokens a second by its demand
    /// ([`split_by_demand`], with a fill of one second: the demand's unit),
    /// in id order.
    pub fn split(&self, budget: u64) -> Vec<(u64, u64)> {
        let demands: Vec<u64> = self.streams.values().map(|known| known.demand).collect();
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
    fn the_budget_is_split_by_the_streams_demand_in_id_order() {
        let mut bucket = QuotaDemand::new();
        // Over 5 s: 350, 100 and 50 requests, so 70, 20 and 10 a second.
        bucket.report(7, report(350, 0), 0);
        bucket.report(3, report(60, 40), 0);
        bucket.report(9, report(20, 30), 0);
        assert_eq!(bucket.split(30), vec![(3, 6), (7, 21), (9, 3)]);
    }
}
