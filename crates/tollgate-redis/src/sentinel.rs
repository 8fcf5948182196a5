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

/// Where the sentinels are, and what they watch. Its `Debug` shows no
/// credential.
#[derive(Clone, PartialEq, Eq)]
pub(crate) struct SentinelTarget {
    /// The sentinels, as `redis://host:port` URLs.
    pub(crate) sentinels: Vec<String>,
    /// The name the sentinels monitor the primary under.
    pub(crate) master: String,
    /// `user:password@` of the primary (or empty), and its database.
    pub(crate) credentials: String,
    pub(crate) db: i64,
}

impl std::fmt::Debug for SentinelTarget {
    fn fmt(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        formatter
            .debug_struct("SentinelTarget")
            .field("sentinels", &self.sentinels.len())
            .field("master", &self.master)
            .field("db", &self.db)
            .finish_non_exhaustive()
    }
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

/// A connection to the primary the sentinels name. A lookup runs in a task
/// of its own (a call that gives up does not cancel it), and a watcher asks
/// the sentinels every [`WATCH_EVERY`] which server is the primary: when it
/// changed (a failover the old primary has not yet noticed, still taking
/// writes), the connection kept is dropped, so no call decides on a server
/// the sentinels no longer name for longer than that. A call that fails for
/// the connection's sake, finds a replica (`READONLY`), or is dropped before
/// its answer (the store's timeout) drops it too: the next call looks again.
pub(crate) struct SentinelConnection {
    shared: std::sync::Arc<Shared>,
}

/// How often the watcher asks the sentinels which server is the primary.
const WATCH_EVERY: Duration = Duration::from_millis(500);

struct Shared {
    sentinels: Mutex<SentinelClient>,
    /// The primary in use: its address, its connection, and a generation
    /// (so an error of an older connection never drops a newer one).
    primary: parking_lot::Mutex<Option<Primary>>,
    generation: std::sync::atomic::AtomicU64,
    config: ConnectionManagerConfig,
    timeout: Duration,
    watching: std::sync::atomic::AtomicBool,
}

#[derive(Clone)]
struct Primary {
    address: String,
    connection: ConnectionManager,
    generation: u64,
}

impl SentinelConnection {
    /// A connection to `target`'s primary, found on first use; `timeout`
    /// bounds each connection attempt, response and lookup.
    pub(crate) fn open(target: &SentinelTarget, timeout: Duration) -> redis::RedisResult<Self> {
        let nodelay = redis::io::tcp::TcpSettings::default().set_nodelay(true);
        let node = SentinelNodeConnectionInfo::default()
            .set_redis_connection_info(target.primary_settings()?)
            .set_tcp_settings(nodelay);
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
            shared: std::sync::Arc::new(Shared {
                sentinels: Mutex::new(sentinels),
                primary: parking_lot::Mutex::new(None),
                generation: std::sync::atomic::AtomicU64::new(0),
                config,
                timeout,
                watching: std::sync::atomic::AtomicBool::new(false),
            }),
        })
    }

    /// The primary in use, or one looked up now (in a task of its own).
    async fn primary(&self) -> redis::RedisResult<Primary> {
        if !self
            .shared
            .watching
            .swap(true, std::sync::atomic::Ordering::AcqRel)
        {
            tokio::spawn(watch(std::sync::Arc::downgrade(&self.shared)));
        }
        if let Some(primary) = self.shared.primary.lock().clone() {
            return Ok(primary);
        }
        let shared = std::sync::Arc::clone(&self.shared);
        tokio::spawn(async move { shared.look_up().await })
            .await
            .map_err(|_| lookup_error("the primary's lookup ended"))?
    }

    pub(crate) fn send<'a>(&'a self, cmd: &'a Cmd) -> RedisFuture<'a, Value> {
        Box::pin(async move {
            let primary = self.primary().await?;
            let mut guard = Pending::new(&self.shared, primary.generation);
            let mut connection = primary.connection;
            let result = connection.req_packed_command(cmd).await;
            guard.answered(moved(&result));
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
            let primary = self.primary().await?;
            let mut guard = Pending::new(&self.shared, primary.generation);
            let mut connection = primary.connection;
            let result = connection
                .req_packed_commands(pipeline, offset, count)
                .await;
            let replica = matches!(&result, Ok(values) if values.iter().any(is_read_only));
            let failed = match &result {
                Err(error) => moved_error(error),
                Ok(_) => replica,
            };
            guard.answered(failed);
            result
        })
    }
}

impl Shared {
    /// Asks the sentinels for the primary (one lookup at a time) and keeps
    /// a connection to it.
    async fn look_up(&self) -> redis::RedisResult<Primary> {
        let mut sentinels = self.sentinels.lock().await;
        if let Some(primary) = self.primary.lock().clone() {
            return Ok(primary);
        }
        let client = tokio::time::timeout(self.timeout * 4, sentinels.async_get_client())
            .await
            .map_err(|_| lookup_error("no sentinel named the primary in time"))??;
        let address = client.get_connection_info().addr().to_string();
        let connection = ConnectionManager::new_lazy_with_config(client, self.config.clone())?;
        let generation = self
            .generation
            .fetch_add(1, std::sync::atomic::Ordering::AcqRel)
            + 1;
        let primary = Primary {
            address,
            connection,
            generation,
        };
        *self.primary.lock() = Some(primary.clone());
        Ok(primary)
    }

    /// Drops the primary of `generation`, if it is still the one in use.
    fn forget(&self, generation: u64) {
        let mut primary = self.primary.lock();
        if primary
            .as_ref()
            .is_some_and(|primary| primary.generation == generation)
        {
            *primary = None;
        }
    }
}

/// Every [`WATCH_EVERY`], the primary the sentinels name; the connection
/// kept is dropped when it is another. Ends with the connection.
async fn watch(shared: std::sync::Weak<Shared>) {
    loop {
        tokio::time::sleep(WATCH_EVERY).await;
        let Some(shared) = shared.upgrade() else {
            return;
        };
        let Some(current) = shared.primary.lock().clone() else {
            continue;
        };
        let named = {
            let mut sentinels = shared.sentinels.lock().await;
            tokio::time::timeout(shared.timeout * 4, sentinels.async_get_client()).await
        };
        if let Ok(Ok(client)) = named
            && client.get_connection_info().addr().to_string() != current.address
        {
            shared.forget(current.generation);
        }
    }
}

/// A call under way on the primary of `generation`: dropped before its
/// answer (the caller gave up) or answered with a sign that the primary
/// moved, it drops that primary.
struct Pending<'a> {
    shared: &'a Shared,
    generation: u64,
    done: bool,
}

impl<'a> Pending<'a> {
    fn new(shared: &'a Shared, generation: u64) -> Self {
        Pending {
            shared,
            generation,
            done: false,
        }
    }

    fn answered(&mut self, moved: bool) {
        self.done = true;
        if moved {
            self.shared.forget(self.generation);
        }
    }
}

impl Drop for Pending<'_> {
    fn drop(&mut self) {
        if !self.done {
            self.shared.forget(self.generation);
        }
    }
}

/// Whether a call's outcome means the primary moved or went: a connection
/// error, or an answer from a replica (`READONLY`, which the redis crate
/// hands back as a value).
fn moved(result: &redis::RedisResult<Value>) -> bool {
    match result {
        Err(error) => moved_error(error),
        Ok(value) => is_read_only(value),
    }
}

fn moved_error(error: &redis::RedisError) -> bool {
    error.is_io_error()
        || error.is_connection_refusal()
        || error.is_connection_dropped()
        || error.is_timeout()
        || error.to_string().contains("READONLY")
}

fn is_read_only(value: &Value) -> bool {
    matches!(value, Value::ServerError(error)
        if error.kind() == Some(redis::ServerErrorKind::ReadOnly))
}

fn lookup_error(text: &'static str) -> redis::RedisError {
    redis::RedisError::from((redis::ErrorKind::Io, text))
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
