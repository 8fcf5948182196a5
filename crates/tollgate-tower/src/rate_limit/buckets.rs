//! The token buckets of one budget, one per key, in the engine's in-memory
//! gateway on a nanosecond clock.

use tollgate_core::{Decision, Limiter, LimiterConfig, Resolution};

use crate::budget::Budget;
use crate::headers::{HeaderTemplate, advertised_quota};

/// The buckets of every key limited by one budget on one route.
#[derive(Debug)]
pub(crate) struct Buckets {
    gateway: Limiter,
    /// The route's RateLimit fields for this budget.
    pub(crate) headers: HeaderTemplate,
}

impl Buckets {
    /// Buckets of `budget` for the route `route`; a key's state is forgotten once
    /// its bucket would be full again, which changes no decision.
    pub(crate) fn new(route: &str, budget: Budget, max_tracked_keys: usize) -> Self {
        let config = LimiterConfig {
            default_policy: budget.policy(),
            tiers: Default::default(),
            exempt_keys: Vec::new(),
            idle_eviction_s: budget.seconds_to_fill(),
            max_tracked_keys: max_tracked_keys.max(1),
        };
        let gateway = Limiter::new(&config, Resolution::Nanoseconds)
            .expect("a budget always makes a valid token-bucket gateway");
        Buckets {
            gateway,
            headers: {
                let (quota, window_s) = advertised_quota(&budget.policy());
                HeaderTemplate::new(route, quota, window_s)
            },
        }
    }

    /// Takes one token from `key`'s bucket at `now` (nanoseconds).
    pub(crate) fn take(&self, key: &str, now: u64) -> Decision {
        self.gateway.request(key, now)
    }
}
