//! Records kept in Redis by compare-and-set: a value read, changed by the
//! caller (a rule of `tollgate-core`), and written back only if no one wrote
//! it in between, in one Lua call. `tollgate rlqs` keeps each quota bucket's
//! streams this way, so that several replicas share one budget. On a Redis
//! Cluster each record is one key, so one slot.

use std::time::Duration;

use redis::Script;
use tollgate_core::StoreError;

use crate::ca_file::read_ca_file;
use crate::config::RedisConfig;
use crate::connection::{Connection, Target, unavailable};
use crate::store::RedisStoreError;

/// Writes `ARGV[2]` with a time to live of `ARGV[3]` ms when the record
/// holds `ARGV[1]` (`ARGV[1]` empty: when there is none); 1 if written,
/// else 0.
const COMPARE_AND_SET: &str = r"
local current = redis.call('GET', KEYS[1])
if current == false then current = '' end
if current ~= ARGV[1] then return 0 end
redis.call('SET', KEYS[1], ARGV[2], 'PX', ARGV[3])
return 1
";

/// Records under one prefix on one Redis or Redis Cluster.
#[derive(Clone)]
pub struct RedisRecords {
    connection: Connection,
    cluster: bool,
    compare_and_set: Script,
    prefix: String,
    timeout: Duration,
}

impl std::fmt::Debug for RedisRecords {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RedisRecords")
            .field("prefix", &self.prefix)
            .finish_non_exhaustive()
    }
}

impl RedisRecords {
    /// Records at `config`'s URL, each key `{PREFIX:name}` (one slot per
    /// record on a cluster); every call bounded by `config.timeout`.
    ///
    /// # Errors
    ///
    /// [`RedisStoreError`] for a URL, prefix (with braces) or CA file that
    /// cannot be used (the connection itself is made lazily).
    pub fn connect(config: &RedisConfig) -> Result<RedisRecords, RedisStoreError> {
        if config.prefix.contains(['{', '}']) {
            return Err(RedisStoreError::Prefix(config.prefix.clone()));
        }
        let target = Target::parse(&config.url).map_err(RedisStoreError::Url)?;
        let root_certificates = match &config.ca_file {
            None => None,
            Some(path) => Some(read_ca_file(path).map_err(RedisStoreError::CaFile)?),
        };
        let (connection, _) =
            Connection::open_with(&target, config.timeout, root_certificates.as_deref())
                .map_err(|error| RedisStoreError::Url(error.to_string()))?;
        Ok(RedisRecords {
            cluster: connection.is_cluster(),
            connection,
            compare_and_set: Script::new(COMPARE_AND_SET),
            prefix: config.prefix.clone(),
            timeout: config.timeout,
        })
    }

    fn key(&self, name: &str) -> String {
        format!("{{{}:{name}}}", self.prefix)
    }

    /// The record `name`, if there is one.
    ///
    /// # Errors
    ///
    /// [`StoreError::Unavailable`] when Redis fails or does not answer
    /// within the timeout.
    pub async fn get(&self, name: &str) -> Result<Option<Vec<u8>>, StoreError> {
        let mut connection = self.connection.clone();
        let mut command = redis::cmd("GET");
        command.arg(self.key(name));
        let call = command.query_async(&mut connection);
        match tokio::time::timeout(self.timeout, call).await {
            Ok(Ok(value)) => Ok(value),
            Ok(Err(error)) => Err(unavailable(&error, self.cluster)),
            Err(_) => Err(StoreError::Unavailable(
                "Redis did not answer in time".to_owned(),
            )),
        }
    }

    /// Writes `new` to `name`, to expire after `time_to_live`, if the record
    /// still holds `expected` (`None`: if there is none); whether it wrote.
    ///
    /// # Errors
    ///
    /// [`StoreError::Unavailable`] when Redis fails or does not answer
    /// within the timeout.
    pub async fn compare_and_set(
        &self,
        name: &str,
        expected: Option<&[u8]>,
        new: &[u8],
        time_to_live: Duration,
    ) -> Result<bool, StoreError> {
        let mut connection = self.connection.clone();
        let ttl_ms = u64::try_from(time_to_live.as_millis())
            .unwrap_or(u64::MAX)
            .max(1);
        let mut invocation = self.compare_and_set.key(self.key(name));
        invocation
            .arg(expected.unwrap_or_default())
            .arg(new)
            .arg(ttl_ms);
        let call = invocation.invoke_async::<i64>(&mut connection);
        match tokio::time::timeout(self.timeout, call).await {
            Ok(Ok(written)) => Ok(written == 1),
            Ok(Err(error)) => Err(unavailable(&error, self.cluster)),
            Err(_) => Err(StoreError::Unavailable(
                "Redis did not answer in time".to_owned(),
            )),
        }
    }
}
