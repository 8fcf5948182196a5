//! [`StartError`]: why a gateway could not start.

use std::net::SocketAddr;

use crate::config::ServeConfigError;

/// Why [`start`](crate::serve::start) failed. The text names the address, the file
/// or the setting, never a key, a token or a Redis password; the operating
/// system's reason, where there is one, is the error's `source` (printed
/// after it by `{:#}`-style reports).
#[derive(Debug, thiserror::Error)]
pub enum StartError {
    /// The configuration cannot be used (a policy the store cannot hold, a
    /// route's budget, ...).
    #[error(transparent)]
    Config(#[from] ServeConfigError),
    /// The limits cannot be used by the in-memory store.
    #[error("invalid limits: {0}")]
    Limits(#[from] tollgate_core::ConfigError),
    /// The Redis store could not be set up.
    #[error("{0}")]
    Redis(#[from] tollgate_redis::RedisStoreError),
    /// `[store] url` (or `--store`) is not a Redis URL. Neither the URL nor
    /// the Redis client's own text is shown: the URL may hold a password.
    #[error(
        "{}{STORE_URL_EXPECTED}",
        file.as_deref().map(|file| format!("{file}: ")).unwrap_or_default()
    )]
    StoreUrl {
        /// The configuration file, when the URL came from one.
        file: Option<String>,
    },
    /// A policy of the configuration file that the Redis store cannot hold.
    #[error("{file}: invalid limits: {source}")]
    RedisPolicy {
        /// The configuration file.
        file: String,
        /// The store's reason.
        source: tollgate_redis::RedisStoreError,
    },
    /// A listener could not be bound (the address is in use, or not this
    /// machine's).
    #[error("cannot listen on {address}{}", if *.admin { " (admin)" } else { "" })]
    Listen {
        /// The address.
        address: SocketAddr,
        /// Whether it is the admin listener's.
        admin: bool,
        /// Why.
        source: std::io::Error,
    },
    /// The access log's file (`[access_log] path`) cannot be opened for
    /// appending.
    #[error("cannot open access_log.path {path} for appending")]
    AccessLog {
        /// The file.
        path: String,
        /// Why.
        source: std::io::Error,
    },
    /// A worker thread or a signal handler could not be started.
    #[error("cannot start {what}")]
    Start {
        /// What could not be started.
        what: &'static str,
        /// Why.
        source: std::io::Error,
    },
}

/// What a `[store] url` that is not a Redis URL is told.
const STORE_URL_EXPECTED: &str = "store.url (or --store) is not a Redis URL: expected \
     redis://[user:password@]host:port[/db], \
     redis-cluster://[user:password@]host:port[,host:port...] (rediss:// or rediss-cluster:// for \
     TLS) or redis-sentinel://[user:password@]host:port[,host:port...]/MASTER[/db]";
