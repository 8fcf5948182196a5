//! A route's `charge = { header = "x-usage", max = N }`: each request is
//! charged the units its upstream's response reports (in a header or a
//! trailer), settled when the response ends.

use serde::Deserialize;

pub use tollgate_core::MAX_CHARGE;

/// How a route's requests are charged by usage (Envoy's
/// `apply_on_stream_done`, Kong's response rate limiting): admitted when
/// every limit has at least the route's `cost` left, then charged, when the
/// response ends, the units the upstream reported in response header (or
/// trailer) `header`, at most `max`, in place of `cost`. A limit may go
/// into debt, down to `max` units below empty, and refuses every request
/// until the debt is repaid.
#[derive(Clone, Debug, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ChargeConfig {
    /// The response header (or trailer) that reports the units used: a
    /// decimal integer, 0 to 2^64-1.
    #[serde(deserialize_with = "header_name")]
    pub header: http::HeaderName,
    /// The most units one request is charged (a larger report is charged
    /// as `max`, and counted), and the deepest a limit's debt goes: 1 to
    /// [`MAX_CHARGE`], at least the route's `cost`.
    pub max: u64,
}

impl ChargeConfig {
    /// Checks `max` against its range and the route's `cost`.
    ///
    /// # Errors
    ///
    /// The reason, naming the setting.
    pub(crate) fn validate(&self, cost: u64) -> Result<(), String> {
        if !(1..=MAX_CHARGE).contains(&self.max) {
            return Err(format!(
                "charge.max must be 1 to {MAX_CHARGE} (2^53), the most units one request is \
                 charged, got {}",
                self.max
            ));
        }
        if self.max < cost {
            return Err(format!(
                "charge.max ({}) is below cost ({cost}): every request would be given back \
                 part of what its admission took",
                self.max
            ));
        }
        Ok(())
    }
}

/// A response header name that can carry a count: not a hop-by-hop header,
/// nor one that describes the body.
fn header_name<'de, D: serde::Deserializer<'de>>(
    deserializer: D,
) -> Result<http::HeaderName, D::Error> {
    let text = String::deserialize(deserializer)?;
    let name = http::HeaderName::from_bytes(text.trim().as_bytes()).map_err(|_| {
        serde::de::Error::custom(format!("charge.header {text:?} is not a header name"))
    })?;
    let describes_body = matches!(
        name.as_str(),
        "content-length" | "transfer-encoding" | "content-type" | "content-encoding"
    );
    if describes_body || crate::proxy::hop_by_hop::is_hop_by_hop(name.as_str()) {
        return Err(serde::de::Error::custom(format!(
            "charge.header {name:?} cannot report usage: it describes the body or the connection"
        )));
    }
    Ok(name)
}
