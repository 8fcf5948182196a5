//! What the allocator counts per domain, for the Prometheus page: no
//! bucket's values, whatever `detailed_metric` says, so that no key reaches
//! a metric.

use tollgate_core::BucketReport;

/// One domain's counts.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct DomainCounters {
    /// Streams holding at least one bucket of the domain now.
    pub streams: u64,
    /// Buckets kept now.
    pub buckets: u64,
    /// Requests the Envoys reported allowed.
    pub allowed: u64,
    /// Requests the Envoys reported denied.
    pub denied: u64,
    /// Assignments sent (answers to reports, and pushes on a reload).
    pub assignments: u64,
    /// Abandons sent to idle streams.
    pub abandons: u64,
    /// Buckets refused past a cap (answered with the over-cap assignment).
    pub over_cap: u64,
    /// Reports or buckets refused as malformed.
    pub refused: u64,
}

impl DomainCounters {
    /// Adds a report's counts (saturating).
    pub(crate) fn reported(&mut self, report: BucketReport) {
        self.allowed = self.allowed.saturating_add(report.allowed);
        self.denied = self.denied.saturating_add(report.denied);
    }
}
