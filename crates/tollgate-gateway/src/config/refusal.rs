//! `[refusal]`: the status of a refused request (429 by default; nginx's
//! `limit_req` answers 503), for the whole gateway and per tier; a route's
//! `refused_status` sets its own budget's. `Retry-After` and the problem+json
//! body are sent whatever the status. Shadow mode (a dry run: limits decided
//! and counted, refusals let through) is set here too, for the whole gateway
//! (`shadow`) and per tier (`shadow_tiers`); a route's `shadow` sets its own
//! budget's.

use std::collections::{BTreeMap, BTreeSet};

use serde::Deserialize;

use super::ServeConfigError;

/// The statuses of refusals.
#[derive(Clone, Debug, Default, Deserialize, PartialEq, Eq)]
#[serde(deny_unknown_fields)]
pub struct RefusalConfig {
    /// The status of a refusal by a plan (or a route budget without its own
    /// `refused_status`): 400 to 599. Default 429.
    #[serde(default)]
    pub status: Option<u16>,
    /// The status of a refusal by each tier's policy (`"default"` for the
    /// default policy), overriding `status`.
    #[serde(default)]
    pub tiers: BTreeMap<String, u16>,
    /// Shadow mode for every limit: a request over a limit is counted
    /// (`tollgate_shadow_denials_total`) and let through. Default false.
    #[serde(default)]
    pub shadow: bool,
    /// The tiers (`"default"` for the default policy) whose plans are in
    /// shadow mode. Default none.
    #[serde(default)]
    pub shadow_tiers: BTreeSet<String>,
    /// Whether the rate-limit headers of limits in shadow mode are sent
    /// (`RateLimit`, `RateLimit-Policy`, `X-RateLimit-*`). Default false:
    /// clients see nothing of a limit on trial.
    #[serde(default)]
    pub shadow_headers: bool,
}

impl RefusalConfig {
    /// The status of a refusal by the plan of `tier`.
    pub(crate) fn for_tier(&self, tier: &str) -> u16 {
        self.tiers
            .get(tier)
            .copied()
            .unwrap_or_else(|| self.default_status())
    }

    /// The status when nothing more precise is set.
    pub(crate) fn default_status(&self) -> u16 {
        self.status.unwrap_or(429)
    }

    /// Whether the plan of `tier` is in shadow mode.
    pub(crate) fn is_shadow_tier(&self, tier: &str) -> bool {
        self.shadow || self.shadow_tiers.contains(tier)
    }

    /// Checks the statuses, and that `shadow_tiers` names configured tiers
    /// (those `is_tier` knows) or `default`.
    pub(super) fn validate(&self, is_tier: impl Fn(&str) -> bool) -> Result<(), ServeConfigError> {
        if let Some(unknown) = self
            .shadow_tiers
            .iter()
            .find(|tier| tier.as_str() != tollgate_core::DEFAULT_TIER && !is_tier(tier))
        {
            return Err(ServeConfigError::Invalid(format!(
                "refusal.shadow_tiers names {unknown:?}, which is not a tier of [limits.tiers] \
                 (nor \"default\", the default policy)"
            )));
        }
        let named = self
            .status
            .map(|status| ("refusal.status".to_owned(), status))
            .into_iter()
            .chain(
                self.tiers
                    .iter()
                    .map(|(tier, status)| (format!("refusal.tiers.{tier}"), *status)),
            );
        for (name, status) in named {
            check_status(&name, status)?;
        }
        Ok(())
    }
}

/// Whether `status` (the setting `name`) can answer a refusal: 400 to 599.
pub(super) fn check_status(name: &str, status: u16) -> Result<(), ServeConfigError> {
    if (400..=599).contains(&status) {
        Ok(())
    } else {
        Err(ServeConfigError::Invalid(format!(
            "{name} must be a status from 400 to 599, got {status}"
        )))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn statuses_by_tier_else_the_gateway_s_else_429() {
        let none = RefusalConfig::default();
        assert_eq!(
            (none.for_tier("default"), none.default_status()),
            (429, 429)
        );
        let config = RefusalConfig {
            status: Some(503),
            tiers: BTreeMap::from([("free".to_owned(), 403)]),
            ..RefusalConfig::default()
        };
        assert_eq!(config.for_tier("free"), 403);
        assert_eq!(config.for_tier("pro"), 503);
        assert_eq!(
            RefusalConfig {
                tiers: BTreeMap::from([("free".to_owned(), 200)]),
                ..RefusalConfig::default()
            }
            .validate(|_| false)
            .unwrap_err()
            .to_string(),
            "refusal.tiers.free must be a status from 400 to 599, got 200"
        );
    }
}
