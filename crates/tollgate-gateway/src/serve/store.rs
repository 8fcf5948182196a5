//! The limit store a configuration names, opened through
//! `tollgate_serve::open_store`: the in-memory store, or the Redis store (one
//! server or a cluster) for limits shared by several gateways.

use std::path::Path;
use std::sync::Arc;

use tollgate_core::{Clock, MemorySlots, SlotStore, Store};
use tollgate_redis::{RedisConfig, RedisSlots, RedisStoreError, TimeSource};
use tollgate_serve::{OpenStoreError, StoreLocation};

use crate::config::{ServeConfig, StoreTime};
use crate::serve::error::StartError;

/// The store `config` names, on `clock`: in memory without `[store] url`.
/// `config_path` names the file in errors.
pub(crate) fn open(
    config: &ServeConfig,
    clock: Arc<dyn Clock>,
    config_path: Option<&Path>,
) -> Result<Arc<dyn Store>, StartError> {
    tollgate_serve::open_store(&location(config, &clock), &config.limits, clock).map_err(|error| {
        match error {
            OpenStoreError::Memory(error) => StartError::from(error),
            OpenStoreError::Redis(error) => match (error, config_path) {
                (error @ RedisStoreError::Policy(_), Some(path)) => StartError::RedisPolicy {
                    file: path.display().to_string(),
                    source: error,
                },
                (RedisStoreError::Url(_), path) => StartError::StoreUrl {
                    file: path.map(|path| path.display().to_string()),
                },
                (error, _) => StartError::Redis(error),
            },
        }
    })
}

/// Where `config` keeps its concurrency slots: in this process without
/// `[store] url`, else as leases in that Redis (`[store] lease_ttl`).
pub(crate) fn open_slots(
    config: &ServeConfig,
    clock: &Arc<dyn Clock>,
) -> Result<Arc<dyn SlotStore>, StartError> {
    match location(config, clock) {
        StoreLocation::Redis(redis) => Ok(Arc::new(
            RedisSlots::connect(&redis, config.store.lease_ttl).map_err(StartError::Redis)?,
        )),
        _ => Ok(Arc::new(MemorySlots::new())),
    }
}

/// Where `config` keeps its limits.
fn location(config: &ServeConfig, clock: &Arc<dyn Clock>) -> StoreLocation {
    let Some(url) = &config.store.url else {
        return StoreLocation::Memory;
    };
    let mut redis = RedisConfig::new(url.as_str());
    redis.prefix.clone_from(&config.store.prefix);
    redis.ca_file.clone_from(&config.store.ca_file);
    redis.timeout = config.store.timeout;
    if config.store.time == StoreTime::Local {
        redis.time = TimeSource::Clock(Arc::clone(clock));
    }
    redis.key_secret = config.store.key_secret();
    StoreLocation::Redis(Box::new(redis))
}
