//! `[host]`: the defaults of routes without settings of their own: a
//! budget per tenant and per client IP (the fields of the tower layer's
//! `HostDefaults` and `host.json`), and a concurrency limit.

use serde::Deserialize;
use tollgate_tower::Budget;

/// The `[host]` section.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct HostConfig {
    /// The default budget per tenant.
    #[serde(default)]
    pub tenant: Option<Budget>,
    /// The default budget per client IP.
    #[serde(default)]
    pub ip: Option<Budget>,
    /// The most requests of one API key (of one client IP, for a request
    /// without a key) in flight at once on a route without a
    /// `max_in_flight` of its own, nor one of its key's tier
    /// (`[limits.tier_defaults.NAME] max_in_flight`); 1 to 2^32, none by
    /// default. nginx: `limit_conn` in the `server` block.
    #[serde(default)]
    pub max_in_flight: Option<u64>,
}

impl HostConfig {
    /// Checks `max_in_flight`'s range.
    pub(super) fn validate(&self) -> Result<(), String> {
        match self.max_in_flight {
            Some(max) if !(1..=tollgate_core::MAX_IN_FLIGHT).contains(&max) => Err(format!(
                "host.max_in_flight must be 1 to {} (2^32), the requests of one key in flight at once",
                tollgate_core::MAX_IN_FLIGHT
            )),
            _ => Ok(()),
        }
    }
}
