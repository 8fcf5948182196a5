//! Value formats shared by several sections: durations (`"30s"`, `"250ms"`)
//! and URLs.

use std::time::Duration;

use http::Uri;
use serde::{Deserialize, Deserializer};

/// A human duration: `"30s"`, `"250ms"`, `"1m 30s"`. A negative one
/// (`"-1s"`) is refused as such: a duration is never below 0.
pub(super) fn duration<'de, D: Deserializer<'de>>(deserializer: D) -> Result<Duration, D::Error> {
    let text = String::deserialize(deserializer)?;
    if text.trim_start().starts_with('-') {
        return Err(serde::de::Error::custom(format!(
            "{text:?} is negative: a duration is at least 0, such as \"0s\" or \"250ms\""
        )));
    }
    humantime::parse_duration(&text).map_err(serde::de::Error::custom)
}

/// A URI, such as an upstream's base URL.
pub(super) fn uri<'de, D: Deserializer<'de>>(deserializer: D) -> Result<Uri, D::Error> {
    let text = String::deserialize(deserializer)?;
    text.parse().map_err(serde::de::Error::custom)
}

/// A URI if given, such as a route's one upstream.
pub(super) fn optional_uri<'de, D: Deserializer<'de>>(
    deserializer: D,
) -> Result<Option<Uri>, D::Error> {
    uri(deserializer).map(Some)
}

/// A list of URIs, such as a route's upstreams.
pub(super) fn uris<'de, D: Deserializer<'de>>(deserializer: D) -> Result<Vec<Uri>, D::Error> {
    let texts = Vec::<String>::deserialize(deserializer)?;
    texts
        .iter()
        .map(|text| text.parse().map_err(serde::de::Error::custom))
        .collect()
}
