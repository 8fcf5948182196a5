//! A Redis whose primary Redis Sentinel names: the URL
//! `redis-sentinel://[user:password@]host:port[,host:port...]/MASTER[/DB][?sentinel_auth=[USER:]PASSWORD]`
//! (the sentinels' addresses, then the name they monitor the primary under;
//! the credentials and database are the primary's, `sentinel_auth` the
//! sentinels' own, percent-encoded), and a connection that
//! asks the sentinels for the primary, keeps one connection to it, and asks
//! again when that connection fails or finds a replica (`READONLY`): after
//! a failover, the next call reaches the new primary. A call made while
//! there is no primary fails, and the store's failure policy answers it.

use std::time::Duration;

use redis::aio::{ConnectionLike, ConnectionManager, ConnectionManagerConfig};
use redis::sentinel::{SentinelClient, SentinelNodeConnectionInfo, SentinelServerType};
use redis::{Cmd, IntoConnectionInfo as _, Pipeline, RedisFuture, Value};
use tokio::sync::Mutex;

/// The scheme of a Redis found through its sentinels.
pub(crate) const SENTINEL_SCHEME: &str = "redis-sentinel://";

/// Where the sentinels are, and what they watch.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct SentinelTarget {
    /// The sentinels, as `redis://host:port` URLs.
    pub(crate) sentinels: Vec<String>,
    /// The name the sentinels monitor the primary under.
    pub(crate) master: String,
    /// `user:password@` of the primary (or empty), and its database.
    pub(crate) credentials: String,
    pub(crate) db: i64,
}

/// The sentinels' URLs with `auth` (`[user:]password`, percent-encoded) as
/// their credentials.
fn with_sentinel_auth(node: &str, auth: Option<&str>) -> String {
    match auth {
        Some(auth) if auth.contains(':') => format!("redis://{auth}@{node}"),
        Some(password) => format!("redis://:{password}@{node}"),
        None => format!("redis://{node}"),
    }
}

impl SentinelTarget {
    /// Reads the text after `redis-sentinel://`.
    pub(crate) fn parse(rest: &str) -> Result<SentinelTarget, String> {
        let shape = || {
            format!(
                "{SENTINEL_SCHEME}[user:password@]host:port[,host:port...]/MASTER_NAME[/DB]: \
                 [?sentinel_auth=[USER:]PASSWORD]: the sentinels' addresses, then the name \
                 they monitor the primary under"
            )
        };
        let (rest, query) = match rest.split_once('?') {
            Some((rest, query)) => (rest, Some(query)),
            None => (rest, None),
        };
        let sentinel_auth = match query {
            None => None,
            Some(query) => Some(
                query
                    .strip_prefix("sentinel_auth=")
                    .filter(|auth| !auth.is_empty() && !auth.contains(['&', '@', '/']))
                    .ok_or_else(shape)?,
            ),
        };
        let (authority, path) = rest.split_once('/').ok_or_else(shape)?;
        let (credentials, nodes) = match authority.rsplit_once('@') {
            Some((credentials, nodes)) => (format!("{credentials}@"), nodes),
            None => (String::new(), authority),
        };
        let sentinels: Vec<String> = nodes
            .split(',')
            .map(str::trim)
            .filter(|node| !node.is_empty())
            .map(|node| with_sentinel_auth(node, sentinel_auth))
            .collect();
        let (master, db) = match path.split_once('/') {
            Some((master, db)) => (master, db.parse::<i64>().map_err(|_| shape())?),
            None => (path, 0),
        };
        if sentinels.is_empty() || master.is_empty() || master.contains(['?', '#', '@']) {
            return Err(shape());
        }
        Ok(SentinelTarget {
            sentinels,
            master: master.to_owned(),
            credentials,
            db,
        })
    }

    /// Every address and the primary's settings read as the redis crate
    /// reads them (no connection made).
    pub(crate) fn check(&self) -> redis::RedisResult<()> {
        for sentinel in &self.sentinels {
            sentinel.as_str().into_connection_info()?;
        }
        self.primary_settings().map(|_| ())
    }

    /// The primary's user, password and database, read from the URL's
    /// credentials as a `redis://` URL's.
    fn primary_settings(&self) -> redis::RedisResult<redis::RedisConnectionInfo> {
        let stand_in = format!("redis://{}localhost/{}", self.credentials, self.db);
        Ok(stand_in
            .as_str()
            .into_connection_info()?
            .redis_settings()
            .clone())
    }
}

/// A connection to the primary the sentinels name, found again after a
/// failure.
pub(crate) struct SentinelConnection {
    sentinels: Mutex<SentinelClient>,
    primary: Mutex<Option<ConnectionManager>>,
    config: ConnectionManagerConfig,
}

impl SentinelConnection {
    /// A connection to `target`'s primary, found on first use; `timeout`
    /// bounds each connection attempt and response.
    pub(crate) fn open(target: &SentinelTarget, timeout: Duration) -> redis::RedisResult<Self> {
        let node = SentinelNodeConnectionInfo::default()
            .set_redis_connection_info(target.primary_settings()?);
        let sentinels = SentinelClient::build(
            target.sentinels.clone(),
            target.master.clone(),
            Some(node),
            SentinelServerType::Master,
        )?;
        let config = ConnectionManagerConfig::new()
            .set_response_timeout(Some(timeout))
            .set_connection_timeout(Some(timeout))
            .set_number_of_retries(1)
            .set_max_delay(Duration::from_millis(500));
        Ok(SentinelConnection {
            sentinels: Mutex::new(sentinels),
            primary: Mutex::new(None),
            config,
        })
    }

    /// The connection to the primary: the one kept, or one to the primary
    /// the sentinels name now.
    async fn primary(&self) -> redis::RedisResult<ConnectionManager> {
        let mut primary = self.primary.lock().await;
        if let Some(connection) = primary.as_ref() {
            return Ok(connection.clone());
        }
        let client = self.sentinels.lock().await.async_get_client().await?;
        let connection = ConnectionManager::new_lazy_with_config(client, self.config.clone())?;
        *primary = Some(connection.clone());
        Ok(connection)
    }

    /// Forgets the primary after `error` when it means the primary moved or
    /// went: the next call asks the sentinels again.
    async fn after(&self, error: &redis::RedisError) {
        let moved = error.is_io_error()
            || error.is_connection_refusal()
            || error.is_connection_dropped()
            || error.is_timeout()
            || error.to_string().contains("READONLY");
        if moved {
            *self.primary.lock().await = None;
        }
    }

    pub(crate) fn send<'a>(&'a self, cmd: &'a Cmd) -> RedisFuture<'a, Value> {
        Box::pin(async move {
            let mut connection = self.primary().await?;
            let result = connection.req_packed_command(cmd).await;
            if let Err(error) = &result {
                self.after(error).await;
            }
            result
        })
    }

    pub(crate) fn send_pipeline<'a>(
        &'a self,
        pipeline: &'a Pipeline,
        offset: usize,
        count: usize,
    ) -> RedisFuture<'a, Vec<Value>> {
        Box::pin(async move {
            let mut connection = self.primary().await?;
            let result = connection
                .req_packed_commands(pipeline, offset, count)
                .await;
            if let Err(error) = &result {
                self.after(error).await;
            }
            result
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sentinel_urls_name_the_sentinels_and_the_primary() {
        assert_eq!(
            SentinelTarget::parse("u:p@127.0.0.1:26379, 127.0.0.1:26380/mymaster/2"),
            Ok(SentinelTarget {
                sentinels: vec![
                    "redis://127.0.0.1:26379".to_owned(),
                    "redis://127.0.0.1:26380".to_owned()
                ],
                master: "mymaster".to_owned(),
                credentials: "u:p@".to_owned(),
                db: 2,
            })
        );
        assert_eq!(
            SentinelTarget::parse("h:1/m?sentinel_auth=s%40cret").map(|target| target.sentinels),
            Ok(vec!["redis://:s%40cret@h:1".to_owned()])
        );
        assert!(SentinelTarget::parse("h:1/m?other=1").is_err());
        assert!(SentinelTarget::parse("127.0.0.1:26379").is_err());
        assert!(SentinelTarget::parse("127.0.0.1:26379/").is_err());
        assert!(SentinelTarget::parse("/mymaster").is_err());
        assert!(SentinelTarget::parse("127.0.0.1:26379/m/x").is_err());
    }
}
