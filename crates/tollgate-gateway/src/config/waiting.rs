//! The checks of waiting instead of refusing that span sections: a route's
//! `delay` and `max_waiting`, the tiers' delays
//! (`[limits.tier_defaults.NAME] delay`), against shadow mode
//! (`[refusal]`) and `limits.idle_eviction_s`.

use std::time::Duration;

use tollgate_core::{ApiKeyRequirement, LimiterConfig};

use super::error::ServeConfigError;
use super::refusal::RefusalConfig;
use super::routes::RouteConfig;

/// Checks the delays of `routes` and of `limits`' tiers against `refusal`
/// and `limits.idle_eviction_s`, and that each route's `max_waiting` has a
/// delay to apply to.
pub(super) fn validate(
    routes: &[RouteConfig],
    limits: &LimiterConfig,
    refusal: &RefusalConfig,
) -> Result<(), ServeConfigError> {
    for route in routes {
        let waits_for_tiers = route.tier_waiting().is_some()
            && route.api_key != ApiKeyRequirement::None
            && limits.any_tier_delay();
        if route.max_waiting.is_some() && route.delay.is_zero() && !waits_for_tiers {
            let reason = if !limits.any_tier_delay() {
                "max_waiting applies to a delay, the route's or a tier's in \
                 limits.tier_defaults, and neither is set: set one too"
            } else if route.api_key == ApiKeyRequirement::None {
                "max_waiting applies to a delay, and this route has none of its own: \
                 a tier's delay in limits.tier_defaults does not apply on a route with \
                 api_key = \"none\", which reads no key"
            } else {
                "max_waiting applies to a delay, and this route has none of its own: \
                 a tier's delay in limits.tier_defaults does not apply to a route in \
                 shadow mode, which never waits"
            };
            return Err(ServeConfigError::Route {
                route: route.label(),
                reason: reason.into(),
            });
        }
    }
    for route in routes.iter().filter(|route| !route.delay.is_zero()) {
        let shadow = if refusal.shadow {
            Some("refusal.shadow")
        } else if !refusal.shadow_tiers.is_empty() {
            Some("refusal.shadow_tiers")
        } else {
            None
        };
        if let Some(shadow) = shadow {
            return Err(ServeConfigError::Invalid(format!(
                "routes.{}.delay makes requests wait for their limits, and {shadow} only \
                 observes them: remove one",
                route.name()
            )));
        }
        // A waiting request's state must outlive its wait: a key idle
        // that long starts over, and its queue with it.
        if route.delay > Duration::from_secs(limits.idle_eviction_s) {
            return Err(ServeConfigError::Invalid(format!(
                "routes.{}.delay ({}) must be at most limits.idle_eviction_s ({} s): \
                 a key idle that long loses the turns its requests wait for",
                route.name(),
                humantime::format_duration(route.delay),
                limits.idle_eviction_s
            )));
        }
    }
    // A tier's delay against shadow mode (its range and idle_eviction_s are
    // core's checks, made when [limits] is read).
    for (tier, defaults) in &limits.tier_defaults {
        if defaults.delay.is_zero() {
            continue;
        }
        let shadow = if refusal.shadow {
            Some("refusal.shadow".to_owned())
        } else if refusal.shadow_tiers.contains(tier) {
            Some(format!("refusal.shadow_tiers ({tier})"))
        } else {
            None
        };
        if let Some(shadow) = shadow {
            return Err(ServeConfigError::Invalid(format!(
                "limits.tier_defaults.{tier}.delay makes requests wait for their limits, and \
                 {shadow} only observes them: remove one"
            )));
        }
    }
    Ok(())
}
