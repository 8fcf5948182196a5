//! `[tenants]`: which API keys belong to which tenant (`acme = ["sk_a",
//! "sk_b"]`), checked so that no key belongs to two.

use std::collections::BTreeMap;

use super::ServeConfigError;
use crate::request::api_key::MAX_KEY_LENGTH;

/// Checks the tenants: names not empty, every key one a request can carry,
/// no key in two tenants. Errors show a key only redacted.
pub(super) fn validate(tenants: &BTreeMap<String, Vec<String>>) -> Result<(), ServeConfigError> {
    let mut seen = std::collections::HashSet::new();
    for (tenant, keys) in tenants {
        if tenant.is_empty() {
            return Err(ServeConfigError::Tenants("a tenant name is empty".into()));
        }
        for key in keys {
            let parsed = tollgate_core::ApiKey::parse(key).ok_or_else(|| {
                ServeConfigError::Tenants(format!("tenant {tenant} has an empty key"))
            })?;
            if parsed.as_str().len() > MAX_KEY_LENGTH {
                return Err(ServeConfigError::Tenants(format!(
                    "tenant {tenant} has a key longer than {MAX_KEY_LENGTH} bytes, \
                     the longest API key a request may carry"
                )));
            }
            if !seen.insert(parsed.as_str().to_owned()) {
                return Err(ServeConfigError::Tenants(format!(
                    "the key {} belongs to two tenants",
                    parsed.redacted()
                )));
            }
        }
    }
    Ok(())
}
