//! A configured limit (envoyproxy/ratelimit's `RateLimit` in config.go) and how
//! tollgate enforces it: a [`tollgate_core::Policy`] where there is one.

use std::sync::Arc;

use tollgate_core::{Algorithm, Policy, PolicyError};

use crate::config::stats::LimitStatNames;
use crate::config::unit::Unit;

/// How a limit is enforced.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Enforcement {
    /// `unlimited: true`: always allowed; the Go service never asks its cache.
    Unlimited,
    /// `requests_per_unit: 0`: every hit is over the limit (the Go service's
    /// fixed window with a limit of 0). `window_s` is the counting window.
    Deny {
        /// The window's length in seconds.
        window_s: u64,
    },
    /// A tollgate policy: for a Go-compatible limit a fixed window of
    /// `requests_per_unit` per unit, aligned to the epoch as the Go service's
    /// `now / divider` windows are.
    Policy(Policy),
    /// A request override whose unit the protocol does not name (`UNKNOWN`):
    /// the Go service fails such a request (its `UnitToDivider` panics and the
    /// call ends in a service error).
    NoWindow,
}

/// A limit as configured, shared by every lookup that matches it.
#[derive(Clone, Debug, PartialEq)]
pub struct RateLimit {
    /// `requests_per_unit` (0 to 2^32-1).
    pub requests_per_unit: u32,
    /// `unit`; [`Unit::Unknown`] for an unlimited limit, and for a `window`
    /// (extension) that is not exactly one unit long.
    pub unit: Unit,
    /// `unlimited`.
    pub unlimited: bool,
    /// The descriptor's `shadow_mode`: over-limit answers are reported as OK.
    pub shadow_mode: bool,
    /// The descriptor's `quota_mode`.
    pub quota_mode: bool,
    /// `rate_limit.name` (empty when unnamed); other limits' `replaces` refer
    /// to it.
    pub name: String,
    /// The names in `rate_limit.replaces`.
    pub replaces: Vec<String>,
    /// The descriptor's `detailed_metric`.
    pub detailed_metric: bool,
    /// How the limit is enforced.
    pub enforcement: Enforcement,
    /// The limit's configured stats key, `domain.key_value.key` (the path of
    /// the descriptor in the file).
    pub stats_key: Arc<str>,
    /// The counters' full names under `stats_key`, built once with the limit
    /// rather than on every request.
    pub(crate) stat_names: Arc<LimitStatNames>,
    /// Extension `overdraft`: hits charged whatever is left, into a debt of
    /// at most this many units (core's `Store::overdraw_units`), answered
    /// OVER_LIMIT when they leave the limit in debt; `None`: hits charged
    /// only while they fit (or, for the Go service's fixed window, counted
    /// whatever).
    pub overdraft: Option<u64>,
}

impl RateLimit {
    /// The limit a request's own `limit` override sets, as envoyproxy/ratelimit
    /// builds it in `GetLimit`: never unlimited, never in shadow mode, unnamed,
    /// not detailed, counted under `stats_key`; a fixed window of
    /// `requests_per_unit` per `unit`.
    pub fn from_override(limit: LimitOverride, stats_key: Arc<str>) -> RateLimit {
        let enforcement = match limit.unit.seconds() {
            None => Enforcement::NoWindow,
            Some(window_s) => fixed_window(limit.requests_per_unit, window_s),
        };
        RateLimit {
            requests_per_unit: limit.requests_per_unit,
            unit: limit.unit,
            unlimited: false,
            shadow_mode: false,
            quota_mode: false,
            name: String::new(),
            replaces: Vec::new(),
            detailed_metric: false,
            enforcement,
            stat_names: Arc::new(LimitStatNames::for_key(&stats_key)),
            overdraft: None,
            stats_key,
        }
    }
}

/// The enforcement of `requests_per_unit` per `window_s` with `algorithm`.
///
/// # Errors
///
/// The [`PolicyError`] of an invalid `burst`.
pub(crate) fn enforcement(
    requests_per_unit: u32,
    window_s: u64,
    algorithm: Algorithm,
    burst: Option<u64>,
) -> Result<Enforcement, PolicyError> {
    if requests_per_unit == 0 {
        if let Some(burst) = burst {
            // Still refuse a burst the algorithm cannot take.
            Policy::new(algorithm, 1, window_s, Some(burst))?;
        }
        return Ok(Enforcement::Deny { window_s });
    }
    Policy::new(algorithm, u64::from(requests_per_unit), window_s, burst).map(Enforcement::Policy)
}

fn fixed_window(requests_per_unit: u32, window_s: u64) -> Enforcement {
    match Policy::fixed_window(u64::from(requests_per_unit), window_s) {
        Ok(policy) => Enforcement::Policy(policy),
        Err(_) => Enforcement::Deny { window_s },
    }
}

/// A request descriptor's own limit (`RateLimitDescriptor.limit`), which
/// replaces whatever the configuration says.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct LimitOverride {
    /// Requests allowed per unit.
    pub requests_per_unit: u32,
    /// The unit ([`Unit::from_proto_value`] of the request's number).
    pub unit: Unit,
}
