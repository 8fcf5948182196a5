//! `[refusal]`: the status of a refused request (429 by default; nginx's
//! `limit_req` answers 503), for the whole gateway and per tier; a route's
//! `refused_status` sets its own budget's. `Retry-After` and the problem+json
//! body are sent whatever the status.

use std::collections::BTreeMap;

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

    pub(super) fn validate(&self) -> Result<(), ServeConfigError> {
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
        };
        assert_eq!(config.for_tier("free"), 403);
        assert_eq!(config.for_tier("pro"), 503);
        assert_eq!(
            RefusalConfig {
                status: None,
                tiers: BTreeMap::from([("free".to_owned(), 200)]),
            }
            .validate()
            .unwrap_err()
            .to_string(),
            "refusal.tiers.free must be a status from 400 to 599, got 200"
        );
    }
}
