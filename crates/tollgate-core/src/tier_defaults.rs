//! What a plan sets besides its policies (`[limits.tier_defaults.NAME]`,
//! NAME a tier or `default`): how long its keys' requests may wait for
//! their turn ([`TierDefaults::delay`]) and how many of one key's requests
//! may be in flight at once on a route ([`TierDefaults::max_in_flight`]).
//! Each is a default: a route's own `delay` or `max_in_flight` overrides
//! it. Also [`MaxWait`], how a reservation is told how long it may wait.

use std::time::Duration;

use serde::{Deserialize, Deserializer, Serialize, Serializer};

/// The longest delay a request may wait for its turn: one hour. A client
/// kept waiting longer has almost always given up.
pub const MAX_DELAY: Duration = Duration::from_secs(3600);

/// The most slots a key may be given: 2^32.
pub const MAX_IN_FLIGHT: u64 = 1 << 32;

/// A plan's settings besides its policies, for the keys on its tier.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TierDefaults {
    /// How long a request that the limits would refuse now, but allow
    /// within it, waits for its turn instead (nginx's `limit_req ...
    /// delay=M`), on a route without a `delay` of its own. Written as
    /// `"2s"`, `"500ms"`; zero (the default) refuses. At most
    /// [`MAX_DELAY`] and at most `idle_eviction_s`.
    #[serde(
        default,
        deserialize_with = "duration_text",
        serialize_with = "duration_written"
    )]
    pub delay: Duration,
    /// The most requests of one key in flight at once on a route without a
    /// `max_in_flight` of its own (nginx's `limit_conn`), 1 to
    /// [`MAX_IN_FLIGHT`] (2^32); none by default.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_in_flight: Option<u64>,
}

/// How long a reservation ([`Store::reserve_units`](crate::Store::reserve_units))
/// may wait for its turn.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum MaxWait {
    /// Up to this long (a route's `delay`; zero: not at all).
    UpTo(Duration),
    /// Up to the [`TierDefaults::delay`] of the tier the request's plan is
    /// on, found when the plan is decided (the store knows the tier, the
    /// caller does not); zero for a request without a plan (the least of
    /// them, should it have several).
    TierDelay,
}

impl From<Duration> for MaxWait {
    fn from(max_wait: Duration) -> Self {
        MaxWait::UpTo(max_wait)
    }
}

/// `delay` as humans write it: `"2s"`, `"500ms"`, `"1m 30s"`.
fn duration_text<'de, D: Deserializer<'de>>(deserializer: D) -> Result<Duration, D::Error> {
    let text = String::deserialize(deserializer)?;
    humantime::parse_duration(&text).map_err(serde::de::Error::custom)
}

fn duration_written<S: Serializer>(delay: &Duration, serializer: S) -> Result<S::Ok, S::Error> {
    serializer.serialize_str(&humantime::format_duration(*delay).to_string())
}
