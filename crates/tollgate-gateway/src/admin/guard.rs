//! Failed admin calls limited per client address with tollgate's own
//! limiter: an address that keeps presenting wrong tokens is refused (429 with
//! `Retry-After`) before its token is even compared, and the log lines about
//! refused calls are themselves limited.

use std::net::IpAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use tollgate_core::{Clock, Limiter, LimiterConfig, Policy, Resolution};

/// Failed admin calls one address may make in a burst.
pub(crate) const FAILED_CALLS_BURST: u64 = 10;
/// Failed admin calls one address may make per minute, after its burst.
pub(crate) const FAILED_CALLS_PER_MINUTE: u64 = 10;

/// The admin API's limit on failed calls, per client address.
pub(crate) struct AdminGuard {
    failures: Limiter,
    clock: Arc<dyn Clock>,
    /// The second of the last log line about a refused call.
    last_log_second: AtomicU64,
}

impl AdminGuard {
    /// A guard on `clock`: a token bucket of [`FAILED_CALLS_BURST`] failures
    /// refilled at [`FAILED_CALLS_PER_MINUTE`] per minute, per address.
    pub(crate) fn new(clock: Arc<dyn Clock>) -> Self {
        // Constants, checked by a test: neither call can fail.
        let policy = Policy::token_bucket(FAILED_CALLS_PER_MINUTE, 60, FAILED_CALLS_BURST)
            .expect("a constant, valid token bucket");
        let config = LimiterConfig {
            policy_lists: Default::default(),
            default_policy: policy,
            tiers: Default::default(),
            exempt_keys: Vec::new(),
            idle_eviction_s: policy.counted_span_s(),
            max_tracked_keys: 100_000,
            tier_defaults: Default::default(),
        };
        let failures =
            Limiter::new(&config, Resolution::Nanoseconds).expect("a constant, valid limiter");
        AdminGuard {
            failures,
            clock,
            last_log_second: AtomicU64::new(u64::MAX),
        }
    }

    /// Seconds `address` must wait before its next admin call, when it has
    /// used up its failed calls; `None` when it may call now. Uses nothing.
    /// The wait is the time one failed call takes to refill, an upper bound
    /// (the address may be let in sooner, never later).
    pub(crate) fn wait_for(&self, address: IpAddr) -> Option<u64> {
        let state = self
            .failures
            .inspect(&address.to_string(), self.clock.now_nanos())?;
        (state.remaining == Some(0)).then_some(60_u64.div_ceil(FAILED_CALLS_PER_MINUTE))
    }

    /// Counts a failed call from `address`; whether a log line about it is
    /// due (at most one a second, whatever the number of addresses).
    pub(crate) fn failed(&self, address: IpAddr) -> bool {
        let now = self.clock.now_nanos();
        self.failures.request(&address.to_string(), now);
        let second = now / 1_000_000_000;
        self.last_log_second.swap(second, Ordering::Relaxed) != second
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tollgate_core::ManualClock;

    #[test]
    fn ten_failures_then_a_wait_of_six_seconds_per_call() {
        let clock = ManualClock::new(1_000 * 1_000_000_000);
        let guard = AdminGuard::new(Arc::new(clock.clone()));
        let address: IpAddr = "192.0.2.7".parse().unwrap();
        let other: IpAddr = "192.0.2.8".parse().unwrap();
        for _ in 0..10 {
            assert_eq!(guard.wait_for(address), None);
            guard.failed(address);
        }
        // 10 per minute: one failed call back every 6 s.
        assert_eq!(guard.wait_for(address), Some(6));
        assert_eq!(guard.wait_for(other), None);
        clock.advance(std::time::Duration::from_secs(6));
        assert_eq!(guard.wait_for(address), None);
    }
}
