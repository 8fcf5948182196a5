//! Which concurrency limit (`max_in_flight`) holds a request, and when it
//! is known ([`InFlightDefaults::limit_of`]): its route's own, else its
//! key's tier's (`[limits.tier_defaults.NAME]`, known once its plan is
//! decided), else `[host]`'s.

use std::collections::HashMap;
use std::sync::Arc;

use tollgate_core::{DEFAULT_TIER, LimiterConfig};

use crate::config::RouteKey;
use crate::request::routes::Route;

/// The concurrency limits of routes without one of their own: each
/// tier's (`[limits.tier_defaults.NAME] max_in_flight`, `default` for the
/// default plan) and `[host] max_in_flight`, counted per API key (per
/// client IP without one).
#[derive(Clone, Debug, Default)]
pub(crate) struct InFlightDefaults {
    /// Each configured plan's own, by name (`default` and every tier).
    tiers: HashMap<Arc<str>, Option<u64>>,
    /// Whether any plan has one: a request with a key then learns its
    /// limit from its tier, once its plan is decided.
    by_tier: bool,
    host: Option<u64>,
}

impl InFlightDefaults {
    /// The defaults of `limits`' plans and `[host]`'s `host`.
    pub(crate) fn new(limits: &LimiterConfig, host: Option<u64>) -> Self {
        let tiers: HashMap<Arc<str>, Option<u64>> = limits
            .tiers
            .keys()
            .map(String::as_str)
            .chain([DEFAULT_TIER])
            .map(|tier| {
                let tier_defaults = limits.tier_defaults_of(Some(tier));
                (Arc::from(tier), tier_defaults.max_in_flight)
            })
            .collect();
        let by_tier = tiers.values().any(Option::is_some);
        InFlightDefaults {
            tiers,
            by_tier,
            host,
        }
    }

    /// The limit a request on `route` (with an API key when `keyed`) is
    /// held to: the route's own, taken before its rates are decided; else,
    /// for a request with a key while some tier has one, its tier's, taken
    /// once its plan is decided; else `[host]`'s, taken first.
    pub(crate) fn limit_of(&self, route: Option<&Route>, keyed: bool) -> InFlightLimit {
        let Some(route) = route else {
            return InFlightLimit::None;
        };
        if let Some((max, counted_per)) = &route.in_flight {
            return InFlightLimit::Now(*max, counted_per.clone());
        }
        if keyed && self.by_tier {
            return InFlightLimit::ByTier;
        }
        match self.host {
            Some(max) => InFlightLimit::Now(max, RouteKey::Principal),
            None => InFlightLimit::None,
        }
    }

    /// The limit of a key on `tier` ([`InFlightLimit::ByTier`]): its tier's
    /// (a tier no longer configured is the default plan's), else `[host]`'s.
    pub(crate) fn of_tier(&self, tier: &str) -> Option<u64> {
        self.tiers
            .get(tier)
            .or_else(|| self.tiers.get(DEFAULT_TIER))
            .copied()
            .flatten()
            .or(self.host)
    }
}

/// Which concurrency limit holds a request, and when it is known.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum InFlightLimit {
    /// None.
    None,
    /// This many in flight at once, counted per that key: taken before the
    /// request's rates are decided.
    Now(u64, RouteKey),
    /// Its tier's, per API key: taken once its plan is decided
    /// ([`InFlightDefaults::of_tier`]).
    ByTier,
}
