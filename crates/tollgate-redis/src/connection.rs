//! One connection to Redis, standalone or a Redis Cluster: a
//! [`ConnectionLike`] that the scripts and commands run on either way. A
//! cluster connection routes each command to the node serving its first key's
//! slot (every key of one script call shares a hash tag, so one slot) and
//! follows `MOVED` and `ASK` redirections.

use std::sync::Arc;
use std::time::Duration;

use redis::aio::{ConnectionLike, ConnectionManager, ConnectionManagerConfig};
use redis::cluster::ClusterClient;
use redis::cluster_async::ClusterConnection;
use redis::{Cmd, IntoConnectionInfo as _, Pipeline, RedisFuture, Value};
use tokio::sync::OnceCell;
use tollgate_core::StoreError;

use crate::sentinel::{SENTINEL_SCHEME, SentinelConnection, SentinelTarget};

/// The scheme of a cluster URL: `redis-cluster://host:port[,host:port...]`.
pub(crate) const CLUSTER_SCHEME: &str = "redis-cluster://";

/// The scheme of a cluster reached over TLS:
/// `rediss-cluster://host:port[,host:port...]`.
pub(crate) const TLS_CLUSTER_SCHEME: &str = "rediss-cluster://";

/// Where the store connects. Its `Debug` shows no URL (URLs may hold
/// credentials).
#[derive(Clone, PartialEq, Eq)]
pub(crate) enum Target {
    /// One Redis server: a `redis://` (or `rediss://`, TLS) URL.
    Standalone(String),
    /// A Redis Cluster: `redis://` (or `rediss://`) URLs of its seed nodes.
    Cluster(Vec<String>),
    /// A Redis whose primary Redis Sentinel names (`redis-sentinel://`).
    Sentinel(SentinelTarget),
}

impl std::fmt::Debug for Target {
    fn fmt(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Target::Standalone(_) => formatter.write_str("Standalone"),
            Target::Cluster(nodes) => write!(formatter, "Cluster({} nodes)", nodes.len()),
            Target::Sentinel(sentinel) => sentinel.fmt(formatter),
        }
    }
}

/// Whether the store can use `url` (`redis://`, `rediss://`,
/// `redis-cluster://`, `rediss-cluster://`), read as
/// [`RedisStore::connect`](crate::RedisStore::connect) reads it, without
/// connecting: what `tollgate check-config` checks.
///
/// # Errors
///
/// [`RedisStoreError::Url`](crate::RedisStoreError::Url) when it is not a
/// Redis URL; its text may hold part of the URL, so show it nowhere.
pub fn check_url(url: &str) -> Result<(), crate::RedisStoreError> {
    let target = Target::parse(url).map_err(crate::RedisStoreError::Url)?;
    let nodes = match &target {
        Target::Standalone(url) => std::slice::from_ref(url),
        Target::Cluster(nodes) => nodes.as_slice(),
        Target::Sentinel(sentinel) => {
            return sentinel
                .check()
                .map_err(|error| crate::RedisStoreError::Url(error.to_string()));
        }
    };
    for node in nodes {
        with_nodelay(node).map_err(|error| crate::RedisStoreError::Url(error.to_string()))?;
    }
    Ok(())
}

impl Target {
    /// Reads `redis://...`, `rediss://...` or
    /// `redis-cluster://[user:password@]host:port[,host:port...]`
    /// (`rediss-cluster://` over TLS; the credentials of the first node apply
    /// to every node).
    pub(crate) fn parse(url: &str) -> Result<Target, String> {
        if ambiguous_user_information(url) {
            return Err(
                "a user name or password holds a raw '/', '?' or '#' before its '@': \
                        percent-encode them (%2F, %3F, %23, and '@' as %40)"
                    .to_owned(),
            );
        }
        if let Some(rest) = url.strip_prefix(SENTINEL_SCHEME) {
            return SentinelTarget::parse(rest).map(Target::Sentinel);
        }
        let (nodes, node_scheme, scheme) = match (
            url.strip_prefix(CLUSTER_SCHEME),
            url.strip_prefix(TLS_CLUSTER_SCHEME),
        ) {
            (Some(nodes), _) => (nodes, "redis://", CLUSTER_SCHEME),
            (_, Some(nodes)) => (nodes, "rediss://", TLS_CLUSTER_SCHEME),
            (None, None) => return Ok(Target::Standalone(url.to_owned())),
        };
        // Credentials (which may hold '@') end at the last '@' of the first
        // node.
        let first_end = nodes.find(',').unwrap_or(nodes.len());
        let (credentials, nodes) = match nodes[..first_end].rsplit_once('@') {
            Some((credentials, _)) => (format!("{credentials}@"), &nodes[credentials.len() + 1..]),
            None => (String::new(), nodes),
        };
        if nodes.contains(['@', '/', '?']) {
            return Err(format!(
                "{scheme}: nodes are host:port (credentials only before the first, \
                 no database number, no options)"
            ));
        }
        let nodes: Vec<String> = nodes
            .split(',')
            .map(str::trim)
            .filter(|node| !node.is_empty())
            .map(|node| format!("{node_scheme}{credentials}{node}"))
            .collect();
        if nodes.is_empty() {
            return Err(format!("{scheme} needs at least one host:port"));
        }
        Ok(Target::Cluster(nodes))
    }
}

/// Whether `url` (a TCP one: `redis://`, `rediss://` or a cluster list)
/// has a raw `@` after a `/`, `?` or `#` of its authority: a user name or
/// password holding one of those characters unencoded, which a URL parser
/// reads as the end of the authority (`redis://user:2024?secret@host:1` is
/// the host `user`, port 2024, and a query). Such a URL names no address
/// that can be trusted, and its text holds the credentials: it is shown as
/// `(not a Redis URL)` and refused by the store ([`Target::parse`]). A socket
/// URL (`redis+unix://`) has no user information: its `@` may stand in the
/// `pass` parameter, which is never shown.
pub(crate) fn ambiguous_user_information(url: &str) -> bool {
    let Some((scheme, rest)) = url.split_once("://") else {
        return false;
    };
    if scheme.ends_with("+unix") || scheme == "unix" {
        return false;
    }
    let Some(last_at) = rest.rfind('@') else {
        return false;
    };
    rest[..last_at].contains(['/', '?', '#'])
}

/// The connection settings of `url`, with `TCP_NODELAY` set: the redis
/// crate leaves Nagle's algorithm on, which holds a script call written while
/// another is unanswered until Redis acknowledges the first (a delayed
/// acknowledgement can take 40 ms).
fn with_nodelay(url: &str) -> redis::RedisResult<redis::ConnectionInfo> {
    let info = url.into_connection_info()?;
    let settings = info.tcp_settings().clone().set_nodelay(true);
    Ok(info.set_tcp_settings(settings))
}

/// A connection to a standalone Redis or to a cluster; cheap to clone (every
/// clone shares the one multiplexed connection). Both connect lazily and
/// reconnect on their own.
#[derive(Clone)]
pub(crate) enum Connection {
    Standalone(ConnectionManager),
    Cluster(Arc<LazyCluster>),
    Sentinel(Arc<SentinelConnection>),
}

/// A cluster connection made on first use (a failed attempt is retried by
/// the next command).
pub(crate) struct LazyCluster {
    client: ClusterClient,
    connection: OnceCell<ClusterConnection>,
}

impl Connection {
    /// A connection to `target` with `timeout` per connection attempt and per
    /// response, and clients for pub/sub: the server's, or one per seed node
    /// of a cluster in the order given (a cluster carries every `PUBLISH` to
    /// every node, so any one of them will do).
    #[cfg(test)]
    pub(crate) fn open(
        target: &Target,
        timeout: Duration,
    ) -> Result<(Connection, Vec<redis::Client>), redis::RedisError> {
        Connection::open_with(target, timeout, None)
    }

    /// [`Connection::open`], the server's certificate (a `rediss://` target)
    /// checked against the PEM certificates `root_certificates` when given,
    /// the system's otherwise.
    pub(crate) fn open_with(
        target: &Target,
        timeout: Duration,
        root_certificates: Option<&[u8]>,
    ) -> Result<(Connection, Vec<redis::Client>), redis::RedisError> {
        if target.is_tls() {
            // rustls on ring, unless the process chose its own provider.
            let _ = rustls::crypto::ring::default_provider().install_default();
        }
        let client = |url: &str| {
            let info = with_nodelay(url)?;
            match root_certificates {
                None => redis::Client::open(info),
                Some(pem) => redis::Client::build_with_tls(
                    info,
                    redis::TlsCertificates {
                        client_tls: None,
                        root_cert: Some(pem.to_vec()),
                    },
                ),
            }
        };
        match target {
            Target::Standalone(url) => {
                let client = client(url)?;
                let config = ConnectionManagerConfig::new()
                    .set_response_timeout(Some(timeout))
                    .set_connection_timeout(Some(timeout))
                    .set_number_of_retries(1)
                    .set_max_delay(Duration::from_millis(500));
                let connection = ConnectionManager::new_lazy_with_config(client.clone(), config)?;
                Ok((Connection::Standalone(connection), vec![client]))
            }
            Target::Cluster(nodes) => {
                let pubsub = nodes
                    .iter()
                    .map(|node| client(node))
                    .collect::<Result<Vec<_>, _>>()?;
                let nodes = nodes
                    .iter()
                    .map(|node| with_nodelay(node))
                    .collect::<Result<Vec<_>, _>>()?;
                // The nodes found from `CLUSTER SLOTS` take the builder's
                // settings, the seed nodes their own.
                let nodelay = redis::io::tcp::TcpSettings::default().set_nodelay(true);
                let mut builder = ClusterClient::builder(nodes)
                    .tcp_settings(nodelay)
                    .connection_timeout(timeout)
                    .response_timeout(timeout)
                    .retries(1);
                if let Some(pem) = root_certificates {
                    builder = builder.certs(redis::TlsCertificates {
                        client_tls: None,
                        root_cert: Some(pem.to_vec()),
                    });
                }
                let client = builder.build()?;
                let lazy = LazyCluster {
                    client,
                    connection: OnceCell::new(),
                };
                Ok((Connection::Cluster(Arc::new(lazy)), pubsub))
            }
            // No client to subscribe on (the primary moves): the default
            // policy is read again every `policy_reread_after` instead.
            Target::Sentinel(sentinel) => Ok((
                Connection::Sentinel(Arc::new(SentinelConnection::open(sentinel, timeout)?)),
                Vec::new(),
            )),
        }
    }

    /// Whether this is a cluster connection.
    pub(crate) fn is_cluster(&self) -> bool {
        matches!(self, Connection::Cluster(_))
    }

    /// The cluster connection, made now if it is not yet.
    pub(crate) async fn cluster(&self) -> redis::RedisResult<Option<ClusterConnection>> {
        match self {
            Connection::Standalone(_) | Connection::Sentinel(_) => Ok(None),
            Connection::Cluster(lazy) => lazy.connect().await.map(Some),
        }
    }
}

impl Target {
    /// Whether the target is reached over TLS (`rediss://`).
    pub(crate) fn is_tls(&self) -> bool {
        match self {
            Target::Standalone(url) => url.starts_with("rediss://"),
            Target::Cluster(nodes) => nodes.iter().any(|node| node.starts_with("rediss://")),
            Target::Sentinel(_) => false,
        }
    }
}

impl LazyCluster {
    async fn connect(&self) -> redis::RedisResult<ClusterConnection> {
        self.connection
            .get_or_try_init(|| self.client.get_async_connection())
            .await
            .cloned()
    }
}

impl ConnectionLike for Connection {
    fn req_packed_command<'a>(&'a mut self, cmd: &'a Cmd) -> RedisFuture<'a, Value> {
        match self {
            Connection::Standalone(connection) => connection.req_packed_command(cmd),
            Connection::Sentinel(sentinel) => sentinel.send(cmd),
            Connection::Cluster(lazy) => Box::pin(async move {
                let mut connection = lazy.connect().await?;
                connection.req_packed_command(cmd).await
            }),
        }
    }

    fn req_packed_commands<'a>(
        &'a mut self,
        pipeline: &'a Pipeline,
        offset: usize,
        count: usize,
    ) -> RedisFuture<'a, Vec<Value>> {
        match self {
            Connection::Standalone(connection) => {
                connection.req_packed_commands(pipeline, offset, count)
            }
            Connection::Sentinel(sentinel) => sentinel.send_pipeline(pipeline, offset, count),
            Connection::Cluster(lazy) => Box::pin(async move {
                let mut connection = lazy.connect().await?;
                connection
                    .req_packed_commands(pipeline, offset, count)
                    .await
            }),
        }
    }

    fn get_db(&self) -> i64 {
        match self {
            Connection::Standalone(connection) => connection.get_db(),
            Connection::Cluster(_) => 0,
            Connection::Sentinel(_) => 0,
        }
    }
}

/// A Redis error as a [`StoreError`], saying what to change when the URL
/// names the wrong kind of Redis (a cluster node behind `redis://`, a
/// standalone server behind `redis-cluster://`). `cluster`: whether the
/// connection is a cluster's already, so the hint to use `redis-cluster://`
/// is never given to a gateway that does (a cluster in the middle of a node
/// failure answers MOVED too).
pub(crate) fn unavailable(error: &redis::RedisError, cluster: bool) -> StoreError {
    let text = error.to_string();
    let hint = if !cluster
        && ["Moved", "MOVED", "CrossSlot", "CROSSSLOT"]
            .iter()
            .any(|word| text.contains(word))
    {
        " (if this Redis is part of a cluster, give its nodes as redis-cluster://host:port,...)"
    } else if text.contains("cluster support disabled") {
        " (this Redis is not a cluster: give it as redis://host:port)"
    } else {
        ""
    };
    StoreError::Unavailable(format!("{text}{hint}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_standalone_and_cluster_urls() {
        assert_eq!(
            Target::parse("redis://127.0.0.1:6379/2"),
            Ok(Target::Standalone("redis://127.0.0.1:6379/2".into()))
        );
        assert_eq!(
            Target::parse("redis-cluster://10.0.0.1:7000, 10.0.0.2:7001"),
            Ok(Target::Cluster(vec![
                "redis://10.0.0.1:7000".into(),
                "redis://10.0.0.2:7001".into()
            ]))
        );
        assert_eq!(
            Target::parse("redis-cluster://user:secret@h1:7000,h2:7001"),
            Ok(Target::Cluster(vec![
                "redis://user:secret@h1:7000".into(),
                "redis://user:secret@h2:7001".into()
            ]))
        );
        assert!(Target::parse("redis-cluster://").is_err());
        assert!(Target::parse("redis-cluster://h1:7000,:pw@h2:7001").is_err());
        assert_eq!(
            Target::parse("redis-cluster://:p@ss@h1:7000,h2:7001"),
            Ok(Target::Cluster(vec![
                "redis://:p@ss@h1:7000".into(),
                "redis://:p@ss@h2:7001".into()
            ]))
        );
        assert!(Target::parse("redis-cluster://h1:7000/3").is_err());
        let tls = Target::parse("rediss-cluster://:pw@h1:7000,h2:7001").unwrap();
        assert_eq!(
            tls,
            Target::Cluster(vec![
                "rediss://:pw@h1:7000".into(),
                "rediss://:pw@h2:7001".into()
            ])
        );
        assert!(tls.is_tls());
        assert!(Target::parse("rediss://h:6380").unwrap().is_tls());
        assert!(!Target::parse("redis://h:6380").unwrap().is_tls());
        assert!(
            Target::parse("rediss-cluster://h1:7000/3")
                .unwrap_err()
                .starts_with("rediss-cluster://:")
        );
        assert!(Target::parse("redis-cluster://,").is_err());
    }

    #[test]
    fn the_wrong_kind_of_redis_is_named() {
        let moved = redis::RedisError::from((
            redis::ErrorKind::Io,
            "An error was signalled by the server",
            "Moved: 7429 127.0.0.1:31823".to_owned(),
        ));
        assert!(
            unavailable(&moved, false)
                .to_string()
                .contains("redis-cluster://")
        );
        // A cluster connection (mid-failover, say) gets no such hint.
        let on_cluster = unavailable(&moved, true).to_string();
        assert!(!on_cluster.contains("give its nodes"), "{on_cluster}");
        assert!(
            on_cluster.contains("Moved: 7429 127.0.0.1:31823"),
            "{on_cluster}"
        );
        let disabled = redis::RedisError::from((
            redis::ErrorKind::Io,
            "ResponseError",
            "This instance has cluster support disabled".to_owned(),
        ));
        assert!(
            unavailable(&disabled, false)
                .to_string()
                .contains("give it as redis://")
        );
    }
}
