//! Counting the state keys in Redis for `stats`: an incremental `SCAN` of the
//! server, or of every primary of a cluster in turn (never `KEYS`, which would
//! stop Redis while it walks every key), matching the prefix literally, and
//! reused for [`COUNT_EVERY`].

use std::time::{Duration, Instant};

use futures_util::StreamExt;
use parking_lot::Mutex;
use redis::cluster_async::ClusterConnection;
use redis::cluster_routing::{RoutingInfo, SingleNodeRoutingInfo};
use redis::{AsyncCommands, RedisResult, Value};
use tollgate_core::StoreError;

use crate::connection::{self, Connection};

/// How long a count of the state keys in Redis is reused.
const COUNT_EVERY: Duration = Duration::from_secs(10);

/// The last count of state keys, and when it was made.
#[derive(Debug, Default)]
pub(crate) struct TrackedKeys {
    counted: Mutex<Option<(Instant, u64)>>,
}

impl TrackedKeys {
    /// The state keys in Redis under `prefix`, counted by a scan at most
    /// every [`COUNT_EVERY`] (a scan visits every key in Redis), which may
    /// take a hundred times `timeout`.
    pub(crate) async fn count(
        &self,
        connection: &Connection,
        prefix: &str,
        timeout: Duration,
    ) -> Result<u64, StoreError> {
        if let Some((counted_at, count)) = *self.counted.lock()
            && counted_at.elapsed() < COUNT_EVERY
        {
            return Ok(count);
        }
        let pattern = format!("{}:{{*}}:s", glob_escaped(prefix));
        let scan = count_keys(connection, &pattern);
        // A scan visits every key: allow it more time than one decision.
        match tokio::time::timeout(timeout.saturating_mul(100), scan).await {
            Ok(Ok(count)) => {
                *self.counted.lock() = Some((Instant::now(), count));
                Ok(count)
            }
            Ok(Err(error)) => Err(connection::unavailable(&error, connection.is_cluster())),
            Err(_) => Err(StoreError::Unavailable(
                "counting keys took too long".into(),
            )),
        }
    }
}

/// `text` with the glob characters of Redis's `SCAN MATCH` escaped.
fn glob_escaped(text: &str) -> String {
    let mut escaped = String::with_capacity(text.len());
    for character in text.chars() {
        if matches!(character, '*' | '?' | '[' | ']' | '\\') {
            escaped.push('\\');
        }
        escaped.push(character);
    }
    escaped
}

/// Keys matching the glob `pattern` on the server or the whole cluster.
async fn count_keys(connection: &Connection, pattern: &str) -> RedisResult<u64> {
    match connection.cluster().await? {
        Some(mut cluster) => {
            let slots = cluster
                .route_command(
                    redis::cmd("CLUSTER").arg("SLOTS").clone(),
                    RoutingInfo::SingleNode(SingleNodeRoutingInfo::Random),
                )
                .await?;
            let mut count = 0;
            for (host, port) in primaries(&slots) {
                count += count_on(&mut cluster, host, port, pattern).await?;
            }
            Ok(count)
        }
        None => {
            let mut connection = connection.clone();
            let mut keys = connection.scan_match::<_, Value>(pattern).await?;
            let mut count = 0u64;
            while keys.next().await.is_some() {
                count += 1;
            }
            Ok(count)
        }
    }
}

/// The primaries in a `CLUSTER SLOTS` reply, each once: every entry is
/// `[first slot, last slot, [host, port, id, ...], replicas...]`.
fn primaries(slots: &Value) -> Vec<(String, u16)> {
    let mut found: Vec<(String, u16)> = Vec::new();
    let Value::Array(entries) = slots else {
        return found;
    };
    for entry in entries {
        let Value::Array(fields) = entry else {
            continue;
        };
        let Some(Value::Array(primary)) = fields.get(2) else {
            continue;
        };
        let host = match primary.first() {
            Some(Value::BulkString(host)) => String::from_utf8_lossy(host).into_owned(),
            Some(Value::SimpleString(host)) => host.clone(),
            _ => continue,
        };
        let Some(Value::Int(port)) = primary.get(1) else {
            continue;
        };
        let Ok(port) = u16::try_from(*port) else {
            continue;
        };
        if !found.contains(&(host.clone(), port)) {
            found.push((host, port));
        }
    }
    found
}

/// Keys matching `pattern` on one node, scanned 1000 at a time.
async fn count_on(
    cluster: &mut ClusterConnection,
    host: String,
    port: u16,
    pattern: &str,
) -> RedisResult<u64> {
    let mut cursor = 0u64;
    let mut count = 0u64;
    loop {
        let reply = cluster
            .route_command(
                redis::cmd("SCAN")
                    .arg(cursor)
                    .arg("MATCH")
                    .arg(pattern)
                    .arg("COUNT")
                    .arg(1000)
                    .clone(),
                RoutingInfo::SingleNode(SingleNodeRoutingInfo::ByAddress {
                    host: host.clone(),
                    port,
                }),
            )
            .await?;
        let (next, keys): (u64, Vec<Value>) = redis::from_redis_value(reply)?;
        count += keys.len() as u64;
        if next == 0 {
            return Ok(count);
        }
        cursor = next;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn prefixes_are_matched_literally() {
        assert_eq!(glob_escaped("tollgate"), "tollgate");
        assert_eq!(glob_escaped("a*b?[c]\\d"), "a\\*b\\?\\[c\\]\\\\d");
    }

    #[test]
    fn reads_each_primary_once() {
        let node = |host: &str, port: i64| {
            Value::Array(vec![
                Value::BulkString(host.as_bytes().to_vec()),
                Value::Int(port),
                Value::BulkString(b"id".to_vec()),
            ])
        };
        let slots = Value::Array(vec![
            Value::Array(vec![
                Value::Int(0),
                Value::Int(5460),
                node("10.0.0.1", 7000),
            ]),
            Value::Array(vec![
                Value::Int(5461),
                Value::Int(10922),
                node("10.0.0.2", 7001),
                node("10.0.0.5", 7004),
            ]),
            Value::Array(vec![
                Value::Int(10923),
                Value::Int(12000),
                node("10.0.0.1", 7000),
            ]),
            Value::Int(3),
        ]);
        assert_eq!(
            primaries(&slots),
            vec![("10.0.0.1".to_owned(), 7000), ("10.0.0.2".to_owned(), 7001)]
        );
        assert!(primaries(&Value::Nil).is_empty());
    }
}
