//! Host-level default budgets, read from `host.json`.

use std::path::Path;

use serde::Deserialize;

use crate::budget::Budget;

/// Default budgets for the routes of a host that declare none of their own.
///
/// `host.json`: `{"tenant": {"rpm": 600, "burst": 50}, "ip": {"rpm": 60, "burst": 10}}`,
/// both optional (as is each `burst`, which is then `rpm`). On a route without its own budget, a request with a resolved
/// [`Tenant`](crate::Tenant) is limited per tenant by `tenant`; any other request
/// is limited per client IP by `ip`. Each route has its own buckets. When neither
/// applies, the request passes straight through and no state is kept.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct HostDefaults {
    /// The default budget per tenant.
    #[serde(default)]
    pub tenant: Option<Budget>,
    /// The default budget per client IP.
    #[serde(default)]
    pub ip: Option<Budget>,
}

/// A `host.json` that cannot be read or is not a valid [`HostDefaults`].
#[derive(Debug, thiserror::Error)]
pub enum HostDefaultsError {
    /// The file could not be read.
    #[error("cannot read {path}: {reason}")]
    Read {
        /// The file.
        path: String,
        /// Why.
        reason: std::io::Error,
    },
    /// The JSON is invalid (the message names the line, column and field).
    #[error("invalid host defaults: {0}")]
    Json(serde_json::Error),
}

impl HostDefaults {
    /// Parses `host.json` text.
    ///
    /// # Errors
    ///
    /// [`HostDefaultsError::Json`] for bad JSON, an unknown field or a budget
    /// outside 1..=2^63-1.
    pub fn from_json(text: &str) -> Result<Self, HostDefaultsError> {
        serde_json::from_str(text).map_err(HostDefaultsError::Json)
    }

    /// Reads and parses a `host.json` file.
    ///
    /// # Errors
    ///
    /// [`HostDefaultsError`] when the file cannot be read or parsed.
    pub fn from_file(path: impl AsRef<Path>) -> Result<Self, HostDefaultsError> {
        let path = path.as_ref();
        let text = std::fs::read_to_string(path).map_err(|reason| HostDefaultsError::Read {
            path: path.display().to_string(),
            reason,
        })?;
        HostDefaults::from_json(&text)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_and_validates() {
        let host = HostDefaults::from_json(r#"{"tenant": {"rpm": 100, "burst": 10}}"#).unwrap();
        assert_eq!(host.tenant, Some(Budget::new(100, 10).unwrap()));
        assert_eq!(host.ip, None);
        // `burst` left out is `rpm`, as on a gateway route.
        let host = HostDefaults::from_json(r#"{"ip": {"rpm": 7}}"#).unwrap();
        assert_eq!(host.ip, Some(Budget::new(7, 7).unwrap()));
        for bad in [
            r#"{"tenant": {"rpm": 0, "burst": 10}}"#,
            r#"{"ip": {"burst": 1}}"#,
            r#"{"ips": {"rpm": 1, "burst": 1}}"#,
            r#"{"ip": {"rpm": 1.5, "burst": 1}}"#,
        ] {
            assert!(HostDefaults::from_json(bad).is_err(), "{bad}");
        }
    }
}
