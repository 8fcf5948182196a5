//! What each descriptor of a request is held to, as envoyproxy/ratelimit's
//! `constructLimitsToCheck` (src/service/ratelimit.go) and
//! `GenerateCacheKey` (src/limiter/cache_key.go) decide it: the limit found by
//! the lookup (or the request's override), unlimited descriptors set apart,
//! limits named in another matched limit's `replaces` dropped, the hits
//! (`GetHitsAddends`), the store key and the tollgate policy that enforces it.

use tollgate_core::{Algorithm, Policy};

use super::ServiceError;
use super::service_settings::ServiceSettings;
use super::store_key::store_key;
use crate::config::lookup::MatchedLimit;
use crate::config::rate_limit::{Enforcement, LimitOverride, RateLimit};
use crate::config::stats::StatsSink;
use crate::config::tree::RateLimitConfig;
use crate::proto::{RateLimitDescriptor, RateLimitRequest};

/// What one descriptor is held to.
#[derive(Debug)]
pub(crate) enum Plan {
    /// No limit applies (none matched, or it was replaced): the store is not
    /// asked; the answer is OK without `current_limit`.
    Free,
    /// `unlimited: true`: the store is not asked; the answer is OK with
    /// 2^32-1 remaining.
    Unlimited,
    /// A limit to decide.
    Limited(Box<Limited>),
}

/// A limited descriptor.
#[derive(Debug)]
pub(crate) struct Limited {
    /// The limit, its stats key and share-threshold patterns.
    pub(crate) matched: MatchedLimit,
    /// The Go service's hits for it (`GetHitsAddends`).
    pub(crate) hits: u64,
    /// The Go cache key without its window: `prefix + domain + "_" +
    /// (key + "_" + value + "_")...` (a share-threshold pattern in place of
    /// the value where one matched), or its digest when long
    /// (`store_key.rs`).
    pub(crate) store_key: String,
    /// How it is enforced.
    pub(crate) enforcement: Enforced,
}

/// How a limited descriptor is enforced.
#[derive(Clone, Copy, Debug)]
pub(crate) enum Enforced {
    /// Through the store, with this policy.
    Store(Policy),
    /// `requests_per_unit: 0` when requests are all or nothing: every hit is
    /// over and nothing is charged, so the store is not asked. (Otherwise such
    /// a limit is a counting window of 0 through the store, which counts the
    /// hits as the Go counter does.)
    Deny {
        /// The window (the unit's length), in seconds.
        window_s: u64,
    },
}

impl Enforced {
    /// The quota and window (seconds) this limit advertises in
    /// `RateLimit-Policy`: core's rule (`tollgate_core::advertised_quota`)
    /// for a policy; `0` per the window for a limit that denies every hit.
    pub(crate) fn advertised(&self) -> (u64, u64) {
        match self {
            Enforced::Store(policy) => tollgate_core::advertised_quota(policy),
            Enforced::Deny { window_s } => (0, *window_s),
        }
    }

    /// The window of a fixed window (`None` for the token bucket and the
    /// sliding log, whose reset comes from the store).
    pub(crate) fn fixed_window_s(&self) -> Option<u64> {
        match self {
            // A calendar window's periods are not aligned to the epoch: its
            // reset is the engine's.
            Enforced::Store(policy) => (policy.algorithm() == Algorithm::FixedWindow
                && policy.calendar_window().is_none())
            .then(|| policy.window_s()),
            Enforced::Deny { window_s } => Some(*window_s),
        }
    }
}

/// The plans of every descriptor of `request`, in order. Lookups in an unknown
/// domain count `domain_not_found` in `stats`.
///
/// # Errors
///
/// [`ServiceError::UnknownUnit`] for a request override whose unit is
/// `UNKNOWN` (or any number the protocol does not name).
pub(crate) fn plans(
    config: &RateLimitConfig,
    request: &RateLimitRequest,
    settings: &ServiceSettings,
    stats: &dyn StatsSink,
) -> Result<Vec<Plan>, ServiceError> {
    let mut found: Vec<Option<MatchedLimit>> = Vec::with_capacity(request.descriptors.len());
    let mut replacing: Vec<&str> = Vec::new();
    for descriptor in &request.descriptors {
        let limit_override = descriptor.limit.map(|limit| LimitOverride {
            requests_per_unit: limit.requests_per_unit,
            unit: limit.unit,
        });
        let matched = config.get_limit(&request.domain, &descriptor.entries, limit_override, stats);
        found.push(matched);
    }
    for matched in found.iter().flatten() {
        replacing.extend(matched.limit.replaces.iter().map(String::as_str));
    }
    let replaced = |matched: &MatchedLimit| {
        !matched.limit.name.is_empty() && replacing.contains(&matched.limit.name.as_str())
    };
    // `replacing` only borrows from `found`'s limits, which outlive the loop.
    let mut plans = Vec::with_capacity(found.len());
    for (index, (descriptor, matched)) in request.descriptors.iter().zip(&found).enumerate() {
        let plan = match matched {
            None => Plan::Free,
            Some(matched) if matched.limit.unlimited => Plan::Unlimited,
            Some(matched) if replaced(matched) => Plan::Free,
            Some(matched) => {
                let enforcement = match matched.limit.enforcement {
                    Enforcement::Unlimited => {
                        plans.push(Plan::Unlimited);
                        continue;
                    }
                    Enforcement::NoWindow => return Err(ServiceError::UnknownUnit { index }),
                    Enforcement::Deny { window_s } => deny(window_s, settings),
                    Enforcement::Policy(policy) => {
                        Enforced::Store(go_policy(policy, &matched.limit, settings))
                    }
                };
                Plan::Limited(Box::new(Limited {
                    store_key: store_key(settings, &request.domain, descriptor, matched),
                    hits: hits(request, descriptor),
                    matched: matched.clone(),
                    enforcement,
                }))
            }
        };
        plans.push(plan);
    }
    Ok(plans)
}

/// The policy a configured one (of `limit`) is enforced with: a fixed
/// window counts its refused hits as the Go service's Redis counter does
/// (unless requests are all or nothing, or the limit has an `overdraft`,
/// whose charges count past the limit instead); the extensions' token
/// bucket and sliding log are as configured, and so is a calendar window
/// (it counts only what it allows).
fn go_policy(policy: Policy, limit: &RateLimit, settings: &ServiceSettings) -> Policy {
    if policy.algorithm() != Algorithm::FixedWindow
        || policy.calendar_window().is_some()
        || settings.extensions.all_or_nothing
        || limit.overdraft.is_some()
    {
        return policy;
    }
    Policy::fixed_window_counting_refused(policy.limit(), policy.window_s()).unwrap_or(policy)
}

/// `requests_per_unit: 0` per `window_s`: a window counting refused hits with
/// a limit of 0, as the Go service's counter is (every hit over, and counted,
/// so a look after a hit is OVER_LIMIT and a later limit starts from the
/// count); when requests are all or nothing, refused without the store.
fn deny(window_s: u64, settings: &ServiceSettings) -> Enforced {
    if settings.extensions.all_or_nothing {
        return Enforced::Deny { window_s };
    }
    Policy::fixed_window_counting_refused(0, window_s)
        .map_or(Enforced::Deny { window_s }, Enforced::Store)
}

/// `GetHitsAddends`: the descriptor's own `hits_addend` (0 is a peek), else
/// the request's, where 0 means 1.
pub(crate) fn hits(request: &RateLimitRequest, descriptor: &RateLimitDescriptor) -> u64 {
    descriptor
        .hits_addend
        .unwrap_or_else(|| u64::from(request.hits_addend.max(1)))
}
