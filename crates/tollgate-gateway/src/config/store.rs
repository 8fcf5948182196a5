//! `[store]`: where limits live (in this process, or in Redis), how long a
//! Redis call may take, and what a request gets when the store cannot decide.

use std::path::PathBuf;
use std::time::Duration;

use serde::Deserialize;

pub use tollgate_core::FailurePolicy;

use super::format::duration;

/// Where limits live.
#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct StoreConfig {
    /// `redis://host:port[/db]` (a Redis server) or
    /// `redis-cluster://host:port[,host:port...]` (seed nodes of a Redis
    /// Cluster), `rediss://` and `rediss-cluster://` over TLS, to share limits with every gateway using the same Redis and
    /// prefix; absent: in memory, in this process.
    #[serde(default)]
    pub url: Option<String>,
    /// A PEM file of the CA certificates a `rediss://` (or
    /// `rediss-cluster://`) server's certificate must chain to, in place of
    /// the system's root certificates. Default: none.
    #[serde(default)]
    pub ca_file: Option<PathBuf>,
    /// Prefix of every Redis key. Default `tollgate`.
    #[serde(default = "default_prefix")]
    pub prefix: String,
    /// How long a Redis call may take before the failure policy applies.
    /// Default `"50ms"`.
    #[serde(default = "default_store_timeout", deserialize_with = "duration")]
    pub timeout: Duration,
    /// What a request gets when Redis cannot decide in time.
    #[serde(default)]
    pub failure: FailurePolicy,
    /// Where decisions take their time from: `"redis"` (default: every gateway
    /// agrees whatever its own clock) or `"local"`.
    #[serde(default)]
    pub time: StoreTime,
    /// The environment variable holding the secret that keys the hash of each
    /// limited key's Redis name (HMAC-SHA-256), the same on every gateway.
    /// Default `TOLLGATE_KEY_SECRET`; unset or empty: plain SHA-256 names, and
    /// a warning at start.
    #[serde(default = "default_key_secret_env")]
    pub key_secret_env: String,
    /// How long a concurrency slot (`max_in_flight`) kept in Redis lasts
    /// unless its gateway renews it (every third of this): a gateway that
    /// dies loses its slots within it. Default `"30s"`, at least 1 s.
    #[serde(default = "default_lease_ttl", deserialize_with = "duration")]
    pub lease_ttl: Duration,
}

fn default_lease_ttl() -> Duration {
    Duration::from_secs(30)
}

/// Where the Redis store takes its time from.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum StoreTime {
    /// Redis's `TIME`.
    #[default]
    Redis,
    /// This process's clock.
    Local,
}

impl Default for StoreConfig {
    fn default() -> Self {
        StoreConfig {
            url: None,
            ca_file: None,
            prefix: default_prefix(),
            timeout: default_store_timeout(),
            failure: FailurePolicy::default(),
            time: StoreTime::default(),
            key_secret_env: default_key_secret_env(),
            lease_ttl: default_lease_ttl(),
        }
    }
}

impl StoreConfig {
    /// The Redis server of `url` without its credentials
    /// ([`tollgate_redis::redacted_url`], the rule every server uses), for
    /// people; `None` for the in-memory store.
    pub fn server(&self) -> Option<String> {
        self.url.as_deref().map(tollgate_redis::redacted_url)
    }
}

impl StoreConfig {
    /// The key secret in force: the variable `key_secret_env` names, when set
    /// and not empty.
    pub fn key_secret(&self) -> Option<String> {
        std::env::var(&self.key_secret_env)
            .ok()
            .filter(|secret| !secret.is_empty())
    }
}

fn default_key_secret_env() -> String {
    "TOLLGATE_KEY_SECRET".to_owned()
}

fn default_prefix() -> String {
    "tollgate".to_owned()
}

fn default_store_timeout() -> Duration {
    Duration::from_millis(50)
}
