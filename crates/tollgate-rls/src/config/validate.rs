//! The key check envoyproxy/ratelimit runs on every file before decoding it
//! (`validateYamlKeys` in config_impl.go): every mapping key anywhere must be a
//! string and one of the service's known keys (one flat list, whatever the
//! level), lists may hold only mappings, leaves may only be strings, integers,
//! booleans or null; nothing under `metadata` is checked.
//!
//! Go walks its maps in random order, so of several faults in one mapping it
//! reports any; this walk is in document order. With extensions on,
//! `algorithm`, `burst` and `window` are known keys too, but only directly in a
//! `rate_limit` mapping.

use crate::config::error::ConfigErrorKind;
use crate::config::yaml::go_value::GoValue;
use crate::config::yaml::gofmt::format_v;

/// The keys envoyproxy/ratelimit knows (its `validKeys`).
const VALID_KEYS: [&str; 16] = [
    "domain",
    "key",
    "value",
    "descriptors",
    "rate_limit",
    "unit",
    "requests_per_unit",
    "unlimited",
    "shadow_mode",
    "quota_mode",
    "name",
    "replaces",
    "detailed_metric",
    "value_to_metric",
    "share_threshold",
    "metadata",
];

/// tollgate's extension keys, valid in a `rate_limit` mapping when enabled.
pub(crate) const EXTENSION_KEYS: [&str; 7] = [
    "algorithm",
    "burst",
    "window",
    "calendar",
    "time_zone",
    "week_starts",
    "overdraft",
];

/// Checks the keys of a file's top-level mapping.
///
/// # Errors
///
/// The first fault found, as envoyproxy/ratelimit words it.
pub(crate) fn validate_keys(
    map: &[(GoValue, GoValue)],
    extensions: bool,
) -> Result<(), ConfigErrorKind> {
    validate_map(map, extensions, false)
}

fn validate_map(
    map: &[(GoValue, GoValue)],
    extensions: bool,
    in_rate_limit: bool,
) -> Result<(), ConfigErrorKind> {
    for (key, value) in map {
        let GoValue::Str(key) = key else {
            return Err(ConfigErrorKind::NonStringKey(format_v(key)));
        };
        let known = VALID_KEYS.contains(&key.as_str())
            || (extensions && in_rate_limit && EXTENSION_KEYS.contains(&key.as_str()));
        if !known {
            return Err(ConfigErrorKind::UnknownKey(key.clone()));
        }
        if key == "metadata" {
            continue;
        }
        match value {
            GoValue::Seq(items) => {
                for item in items {
                    let GoValue::Map(entries) = item else {
                        return Err(ConfigErrorKind::NonMapListElement(format_v(item)));
                    };
                    validate_map(entries, extensions, false)?;
                }
            }
            GoValue::Map(entries) => validate_map(entries, extensions, key == "rate_limit")?,
            GoValue::Str(_) | GoValue::Int(_) | GoValue::Bool(_) | GoValue::Nil => {}
            GoValue::Uint(_) | GoValue::Float(_) => return Err(ConfigErrorKind::UncheckableValue),
        }
    }
    Ok(())
}
