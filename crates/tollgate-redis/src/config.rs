//! How to reach Redis, what the store's time is, and how often it reads the
//! shared default policy.

use std::path::PathBuf;
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

/// The Redis store's settings. Its `Debug` never shows the key secret, nor
/// the URL's credentials ([`crate::redacted_url`]).
#[derive(Clone)]
pub struct RedisConfig {
    /// `redis://[user:password@]host:port[/db]` for a Redis server, or
    /// `redis-cluster://[user:password@]host:port[,host:port...]` for a Redis
    /// Cluster (some of its nodes; the rest are discovered); `rediss://` and
    /// `rediss-cluster://` over TLS, the server's certificate checked against
    /// the system's root certificates or [`RedisConfig::ca_file`]'s.
    pub url: String,
    /// A PEM file of the CA certificates a `rediss://` server's certificate
    /// must chain to, in place of the system's. Default `None`. Refused with
    /// a `redis://` URL.
    pub ca_file: Option<PathBuf>,
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
    /// How long the default policy's channel (`PREFIX:config`) may be silent
    /// before the store reads the policy anyway and pings the channel's node
    /// (for a `PUBLISH` that failed, a message a cluster lost, a node that
    /// stopped answering). Default 5 s; at least 1 ms is used.
    pub policy_reread_after: Duration,
    /// How long subscribing to the channel (connecting included), and a ping
    /// of the node it is subscribed on, may take before the store tries the
    /// next node. Default 5 s; at least 1 ms is used.
    pub policy_subscribe_timeout: Duration,
    /// How long the store waits after the channel failed or closed before it
    /// reads the policy and subscribes again. Default 500 ms; at least 1 ms
    /// is used.
    pub policy_resubscribe_after: Duration,
}

impl std::fmt::Debug for RedisConfig {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RedisConfig")
            .field("server", &crate::redacted_url(&self.url))
            .field("ca_file", &self.ca_file)
            .field("prefix", &self.prefix)
            .field("timeout", &self.timeout)
            .field("time", &self.time)
            .field("minimum_ttl", &self.minimum_ttl)
            .field("key_secret", &self.key_secret.as_ref().map(|_| "set"))
            .field("policy_reread_after", &self.policy_reread_after)
            .field("policy_subscribe_timeout", &self.policy_subscribe_timeout)
            .field("policy_resubscribe_after", &self.policy_resubscribe_after)
            .finish_non_exhaustive()
    }
}

impl RedisConfig {
    /// Settings for `url` with the defaults.
    pub fn new(url: impl Into<String>) -> Self {
        RedisConfig {
            url: url.into(),
            ca_file: None,
            prefix: "tollgate".to_owned(),
            timeout: Duration::from_millis(50),
            time: TimeSource::Redis,
            minimum_ttl: Duration::ZERO,
            key_secret: None,
            policy_reread_after: Duration::from_secs(5),
            policy_subscribe_timeout: Duration::from_secs(5),
            policy_resubscribe_after: Duration::from_millis(500),
        }
    }
}
