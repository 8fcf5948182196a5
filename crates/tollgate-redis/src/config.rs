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

/// The Redis store's settings.
#[derive(Clone, Debug)]
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
        }
    }
}
