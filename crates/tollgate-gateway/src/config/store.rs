//! `[store]`: where limits live (in this process, or in Redis), how long a
//! Redis call may take, and what a request gets when the store cannot decide.

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
    /// Cluster) to share limits with every gateway using the same Redis and
    /// prefix; absent: in memory, in this process.
    #[serde(default)]
    pub url: Option<String>,
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
            prefix: default_prefix(),
            timeout: default_store_timeout(),
            failure: FailurePolicy::default(),
            time: StoreTime::default(),
        }
    }
}

impl StoreConfig {
    /// The Redis server of `url` without its credentials (the part after any
    /// `@`), for the log; `None` for the in-memory store.
    pub fn server(&self) -> Option<&str> {
        let url = self.url.as_deref()?;
        Some(url.rsplit_once('@').map_or(url, |(_, server)| server))
    }
}

fn default_prefix() -> String {
    "tollgate".to_owned()
}

fn default_store_timeout() -> Duration {
    Duration::from_millis(50)
}
