//! Opening the limit store a server's settings name: in memory, in this
//! process, or Redis (one server, a cluster, over TLS or not), shared by every
//! process pointed at it; and the one start line that says where limits are
//! kept, its URL redacted by [`tollgate_redis::redacted_url`].

use std::sync::Arc;

use tollgate_core::{Clock, ConfigError, LimiterConfig, MemoryStore, Store};
use tollgate_redis::{RedisConfig, RedisStore, RedisStoreError, redacted_url};

/// Where limits are kept.
#[derive(Clone, Debug)]
pub enum StoreLocation {
    /// In memory, in this process.
    Memory,
    /// In Redis: the store's settings, its URL with any credentials (never
    /// shown: `Debug` and [`StoreLocation::describe`] redact it).
    Redis(Box<RedisConfig>),
}

/// Why the store cannot be opened.
#[derive(Debug, thiserror::Error)]
pub enum OpenStoreError {
    /// The in-memory store cannot be built from the limits.
    #[error("cannot build the in-memory store")]
    Memory(#[from] ConfigError),
    /// The Redis store cannot be set up (its errors never show the URL's
    /// credentials).
    #[error("cannot open the Redis store")]
    Redis(#[from] RedisStoreError),
}

impl StoreLocation {
    /// Where limits are kept, for people: `memory`, or the Redis URL without
    /// its credentials, and the key prefix.
    pub fn describe(&self) -> String {
        match self {
            StoreLocation::Memory => "memory".to_owned(),
            StoreLocation::Redis(config) => format!(
                "{} under the prefix {}",
                redacted_url(&config.url),
                config.prefix
            ),
        }
    }
}

/// The store at `location` for `limits`, on `clock` (the in-memory store's
/// time; Redis's follows its [`RedisConfig::time`]). Logs the start line
/// `limits kept in` with `store = ...` ([`StoreLocation::describe`]) at
/// INFO, the level of every server's start lines: whether budgets are
/// shared is the first thing to know of a running server. Must be called
/// inside a tokio runtime.
///
/// # Errors
///
/// [`OpenStoreError`]: limits the in-memory store refuses, a Redis URL that
/// is not one, a CA file that cannot be used, a policy Redis cannot hold.
pub fn open_store(
    location: &StoreLocation,
    limits: &LimiterConfig,
    clock: Arc<dyn Clock>,
) -> Result<Arc<dyn Store>, OpenStoreError> {
    let store: Arc<dyn Store> = match location {
        StoreLocation::Memory => Arc::new(MemoryStore::new(limits, clock)?),
        StoreLocation::Redis(config) => Arc::new(RedisStore::connect((**config).clone(), limits)?),
    };
    tracing::info!(store = %location.describe(), "limits kept in");
    Ok(store)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_location_is_described_without_credentials() {
        assert_eq!(StoreLocation::Memory.describe(), "memory");
        let mut config = RedisConfig::new("redis://someone:pw-hidden@h:1/2");
        config.prefix = "edge".to_owned();
        let location = StoreLocation::Redis(Box::new(config));
        assert_eq!(location.describe(), "redis://h:1/2 under the prefix edge");
        let debug = format!("{location:?}");
        assert!(debug.contains("redis://h:1/2"), "{debug}");
        assert!(
            !debug.contains("pw-hidden") && !debug.contains("someone"),
            "{debug}"
        );
    }
}
