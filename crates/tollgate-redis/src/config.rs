//! How to reach Redis and what the store's time is.

use std::sync::Arc;
use std::time::Duration;

use tollgate_core::Clock;

/// Where decisions take their time from.
#[derive(Clone)]
pub enum TimeSource {
    /// Redis's `TIME`, read inside each script: every gateway process agrees
    /// whatever its own clock says. The default.
    Redis,
    /// The caller's clock (microseconds of its nanoseconds); for tests, and for
    /// processes whose clocks are known to agree.
    Clock(Arc<dyn Clock>),
}

impl std::fmt::Debug for TimeSource {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            TimeSource::Redis => "Redis",
            TimeSource::Clock(_) => "Clock",
        })
    }
}

/// The Redis store's settings. Its `Debug` never shows the key secret.
#[derive(Clone)]
pub struct RedisConfig {
    /// `redis://[user:password@]host:port[/db]` for a Redis server, or
    /// `redis-cluster://[user:password@]host:port[,host:port...]` for a Redis
    /// Cluster (some of its nodes; the rest are discovered).
    pub url: String,
    /// Prefix of every key the store writes. Default `tollgate`.
    pub prefix: String,
    /// How long one call may take before it fails (the failure policy then
    /// applies). Default 50 ms.
    pub timeout: Duration,
    /// Where time comes from. Default: Redis.
    pub time: TimeSource,
    /// The shortest TTL a state is given. Default zero: exactly its useful
    /// life (a window's end, a log's newest entry plus the window, a bucket's
    /// time to fill). Tests that replay their own timestamps raise it, since
    /// Redis expires keys on its own clock.
    pub minimum_ttl: Duration,
    /// The secret keying the hash of each limited key's Redis name (an HMAC),
    /// the same on every process sharing the store; `None` (the default)
    /// keeps plain SHA-256 names, which anyone who can read Redis can match
    /// against a guessed API key. Changing it starts every key afresh.
    pub key_secret: Option<String>,
}

impl std::fmt::Debug for RedisConfig {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RedisConfig")
            .field("prefix", &self.prefix)
            .field("timeout", &self.timeout)
            .field("time", &self.time)
            .field("minimum_ttl", &self.minimum_ttl)
            .field("key_secret", &self.key_secret.as_ref().map(|_| "set"))
            .finish_non_exhaustive()
    }
}

impl RedisConfig {
    /// Settings for `url` with the defaults.
    pub fn new(url: impl Into<String>) -> Self {
        RedisConfig {
            url: url.into(),
            prefix: "tollgate".to_owned(),
            timeout: Duration::from_millis(50),
            time: TimeSource::Redis,
            minimum_ttl: Duration::ZERO,
            key_secret: None,
        }
    }
}
