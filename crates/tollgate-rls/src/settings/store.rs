//! Where limits are kept: `REDIS_URL`, `REDIS_TYPE`, `REDIS_SOCKET_TYPE`,
//! `REDIS_AUTH`, `REDIS_TLS`, read as envoyproxy/ratelimit reads them
//! (src/redis/driver_impl.go), made into the URL `tollgate_redis` opens.

use std::fmt;
use std::time::Duration;

use super::arguments::RlsArguments;
use super::error::SettingsError;
use super::secret::Secret;

/// The store the settings name.
#[derive(Clone, PartialEq, Eq)]
pub enum StoreSettings {
    /// In memory, in this process (`REDIS_URL` unset or empty). Unlike the Go
    /// service, which needs a Redis or a memcache, nothing to install.
    Memory,
    /// Redis: one server or a cluster.
    Redis {
        /// `redis://`, `redis+unix://` or `redis-cluster://` (`rediss://`,
        /// `rediss-cluster://` over TLS), credentials included (never
        /// logged: see [`StoreSettings::server`]).
        url: String,
        /// With TLS, the CA file Redis's certificate must chain to
        /// (`REDIS_TLS_CACERT`); `None`: the system's root certificates.
        ca_file: Option<std::path::PathBuf>,
        /// How long connecting or one call may take: `REDIS_TIMEOUT`, capped
        /// by `TOLLGATE_STORE_TIMEOUT`.
        timeout: Duration,
    },
}

impl fmt::Debug for StoreSettings {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            StoreSettings::Memory => f.write_str("Memory"),
            StoreSettings::Redis { timeout, .. } => f
                .debug_struct("Redis")
                .field("server", &self.server())
                .field("timeout", timeout)
                .finish(),
        }
    }
}

impl StoreSettings {
    /// The server for logs: the URL without its credentials
    /// ([`tollgate_redis::redacted_url`], the rule every server uses), or
    /// `memory`.
    pub fn server(&self) -> String {
        match self {
            StoreSettings::Memory => "memory".to_owned(),
            StoreSettings::Redis { url, .. } => tollgate_redis::redacted_url(url),
        }
    }
}

impl RlsArguments {
    /// The store these settings name.
    ///
    /// A Go-style `REDIS_URL` is a `host:port` (`REDIS_SOCKET_TYPE=tcp`), a
    /// socket path (`unix`, Go's default socket type), or `host:port,...` for
    /// `REDIS_TYPE=cluster`; `REDIS_AUTH` (`password` or `user:password`) is
    /// put into the URL. A `REDIS_URL` that is already a URL (`redis://`,
    /// `redis+unix://`, `redis-cluster://`) is used as it is, with its own
    /// credentials.
    ///
    /// # Errors
    ///
    /// [`SettingsError::RedisType`] for an unknown
    /// type, [`SettingsError::RedisSocketType`], [`SettingsError::RedisUrl`].
    pub fn store_settings(&self) -> Result<StoreSettings, SettingsError> {
        let Some(given) = self
            .redis_url
            .as_ref()
            .map(Secret::expose)
            .filter(|url| !url.trim().is_empty())
        else {
            return Ok(StoreSettings::Memory);
        };
        let given = given.trim();
        let cluster = match self.redis_type.to_ascii_lowercase().as_str() {
            "single" => false,
            "cluster" => true,
            "sentinel" => return self.sentinel_settings(given),
            _ => return Err(SettingsError::RedisType(self.redis_type.clone())),
        };
        let url = if given.contains("://") {
            if !self.redis_auth.expose().is_empty() {
                return Err(SettingsError::RedisUrl(
                    "REDIS_AUTH is only combined with a host:port REDIS_URL; put the \
                     credentials in the redis:// URL instead"
                        .to_owned(),
                ));
            }
            match (
                given.strip_prefix("redis://"),
                given.strip_prefix("rediss://"),
            ) {
                (Some(rest), _) if cluster => format!("redis-cluster://{rest}"),
                (_, Some(rest)) if cluster => format!("rediss-cluster://{rest}"),
                _ => given.to_owned(),
            }
        } else {
            let credentials = credentials(self.redis_auth.expose());
            match self.redis_socket_type.to_ascii_lowercase().as_str() {
                "tcp" if cluster => format!("redis-cluster://{credentials}{given}"),
                "tcp" => {
                    if given.contains(',') {
                        return Err(SettingsError::RedisUrl(
                            "several addresses need REDIS_TYPE=cluster".to_owned(),
                        ));
                    }
                    format!("redis://{credentials}{given}")
                }
                "unix" if cluster => {
                    return Err(SettingsError::RedisUrl(
                        "a Redis Cluster is reached over tcp (REDIS_SOCKET_TYPE=tcp)".to_owned(),
                    ));
                }
                // `host:port` read as a socket path would fail with the Redis
                // client's unhelpful text: say what to set instead.
                "unix" if !given.contains('/') && given.contains(':') => {
                    // Not the value itself: it may hold credentials.
                    return Err(SettingsError::RedisUrl(
                        "it looks like host:port, but REDIS_SOCKET_TYPE is unix (the Go \
                         service's default), which reads it as a socket path: set \
                         REDIS_SOCKET_TYPE=tcp, or give a redis:// URL"
                            .to_owned(),
                    ));
                }
                "unix" => unix_url(given, self.redis_auth.expose()),
                _ => {
                    return Err(SettingsError::RedisSocketType(
                        self.redis_socket_type.clone(),
                    ));
                }
            }
        };
        let url = if self.redis_tls { with_tls(url)? } else { url };
        let tls = url.starts_with("rediss://") || url.starts_with("rediss-cluster://");
        let ca_file = Some(self.redis_tls_cacert.trim())
            .filter(|path| tls && !path.is_empty())
            .map(std::path::PathBuf::from);
        Ok(StoreSettings::Redis {
            url,
            ca_file,
            timeout: self.redis_timeout.min(self.store_timeout),
        })
    }
}

impl RlsArguments {
    /// `REDIS_TYPE=sentinel`, as the Go service reads it: `REDIS_URL` is
    /// `MASTER_NAME,host:port,...` (the sentinels), `REDIS_AUTH` the
    /// primary's credentials, `REDIS_SENTINEL_AUTH` the sentinels'. Given
    /// to the store as `redis-sentinel://[AUTH@]host:port,.../MASTER[?sentinel_auth=...]`.
    fn sentinel_settings(&self, given: &str) -> Result<StoreSettings, SettingsError> {
        let shape = || {
            SettingsError::RedisUrl(
                "REDIS_TYPE=sentinel takes REDIS_URL as <master name>,<sentinel host:port>,... \
                 (as the Go service)"
                    .to_owned(),
            )
        };
        let mut parts = given.split(',').map(str::trim);
        let master = parts
            .next()
            .filter(|master| !master.is_empty())
            .ok_or_else(shape)?;
        let sentinels: Vec<&str> = parts.filter(|node| !node.is_empty()).collect();
        if sentinels.is_empty() || given.contains("://") {
            return Err(shape());
        }
        if self.redis_tls {
            return Err(SettingsError::RedisUrl(
                "REDIS_TLS with REDIS_TYPE=sentinel is not supported".to_owned(),
            ));
        }
        let sentinel_auth = self.redis_sentinel_auth.expose();
        let query = if sentinel_auth.is_empty() {
            String::new()
        } else {
            match sentinel_auth.split_once(':') {
                Some((user, password)) => {
                    format!("?sentinel_auth={}:{}", encode(user), encode(password))
                }
                None => format!("?sentinel_auth={}", encode(sentinel_auth)),
            }
        };
        Ok(StoreSettings::Redis {
            url: format!(
                "redis-sentinel://{}{}/{master}{query}",
                credentials(self.redis_auth.expose()),
                sentinels.join(",")
            ),
            ca_file: None,
            timeout: self.redis_timeout.min(self.store_timeout),
        })
    }
}

/// `url` reached over TLS (`REDIS_TLS=true`): `redis://` becomes `rediss://`,
/// `redis-cluster://` `rediss-cluster://`; a socket has no TLS.
fn with_tls(url: String) -> Result<String, SettingsError> {
    for (plain, secure) in [
        ("redis://", "rediss://"),
        ("redis-cluster://", "rediss-cluster://"),
    ] {
        if let Some(rest) = url.strip_prefix(plain) {
            return Ok(format!("{secure}{rest}"));
        }
    }
    if url.starts_with("rediss://") || url.starts_with("rediss-cluster://") {
        return Ok(url);
    }
    Err(SettingsError::RedisUrl(
        "REDIS_TLS=true needs Redis over tcp (REDIS_SOCKET_TYPE=tcp, or a redis:// URL): a \
         Unix socket has no TLS"
            .to_owned(),
    ))
}

/// `REDIS_AUTH` as URL credentials: `user:password@`, `:password@`, or nothing.
fn credentials(auth: &str) -> String {
    if auth.is_empty() {
        return String::new();
    }
    match auth.split_once(':') {
        Some((user, password)) => format!("{}:{}@", encode(user), encode(password)),
        None => format!(":{}@", encode(auth)),
    }
}

/// A socket path as the redis crate's `redis+unix://` URL, with `REDIS_AUTH`
/// as its `user` and `pass` parameters.
fn unix_url(path: &str, auth: &str) -> String {
    let mut url = format!("redis+unix://{path}");
    if !auth.is_empty() {
        match auth.split_once(':') {
            Some((user, password)) => {
                url.push_str(&format!("?user={}&pass={}", encode(user), encode(password)));
            }
            None => url.push_str(&format!("?pass={}", encode(auth))),
        }
    }
    url
}

/// Percent-encodes all but RFC 3986's unreserved characters.
fn encode(text: &str) -> String {
    let mut encoded = String::with_capacity(text.len());
    for byte in text.bytes() {
        if byte.is_ascii_alphanumeric() || matches!(byte, b'-' | b'.' | b'_' | b'~') {
            encoded.push(char::from(byte));
        } else {
            encoded.push_str(&format!("%{byte:02X}"));
        }
    }
    encoded
}

#[cfg(test)]
mod tests {
    use super::*;

    fn store(
        url: &str,
        kind: &str,
        socket: &str,
        auth: &str,
    ) -> Result<StoreSettings, SettingsError> {
        let mut arguments = RlsArguments::defaults();
        arguments.redis_url = Some(Secret::new(url));
        arguments.redis_type = kind.to_owned();
        arguments.redis_socket_type = socket.to_owned();
        arguments.redis_auth = Secret::new(auth);
        arguments.store_settings()
    }

    fn url_of(settings: StoreSettings) -> String {
        match settings {
            StoreSettings::Redis { url, .. } => url,
            StoreSettings::Memory => panic!("memory"),
        }
    }

    fn single_timeout(settings: StoreSettings) -> Duration {
        match settings {
            StoreSettings::Redis { timeout, .. } => timeout,
            StoreSettings::Memory => panic!("memory"),
        }
    }

    #[test]
    fn unset_is_memory() {
        assert_eq!(
            RlsArguments::defaults().store_settings().unwrap(),
            StoreSettings::Memory
        );
        assert_eq!(
            store(" ", "SINGLE", "tcp", "").unwrap(),
            StoreSettings::Memory
        );
    }

    #[test]
    fn go_style_urls_become_redis_urls() {
        let single = store("localhost:6379", "SINGLE", "tcp", "").unwrap();
        assert_eq!(url_of(single), "redis://localhost:6379");
        let auth = store("localhost:6379", "single", "TCP", "me:p@ss").unwrap();
        assert_eq!(url_of(auth.clone()), "redis://me:p%40ss@localhost:6379");
        assert_eq!(auth.server(), "redis://localhost:6379");
        assert!(!format!("{auth:?}").contains("p%40ss"));
        let password = store("h:1", "SINGLE", "tcp", "secret").unwrap();
        assert_eq!(url_of(password), "redis://:secret@h:1");
        let cluster = store("a:1,b:2", "CLUSTER", "tcp", "").unwrap();
        assert_eq!(url_of(cluster), "redis-cluster://a:1,b:2");
        assert_eq!(
            store("127.0.0.1:6379", "SINGLE", "unix", "")
                .unwrap_err()
                .to_string(),
            "REDIS_URL is not usable: it looks like host:port, but REDIS_SOCKET_TYPE is unix \
             (the Go service's default), which reads it as a socket path: set \
             REDIS_SOCKET_TYPE=tcp, or give a redis:// URL"
        );
        let unix = store("/run/redis.sock", "SINGLE", "unix", "pw").unwrap();
        assert_eq!(url_of(unix.clone()), "redis+unix:///run/redis.sock?pass=pw");
        assert_eq!(unix.server(), "redis+unix:///run/redis.sock");
        assert_eq!(
            single_timeout(store("h:1", "SINGLE", "tcp", "").unwrap()),
            Duration::from_millis(50),
            "TOLLGATE_STORE_TIMEOUT caps REDIS_TIMEOUT's 10 s"
        );
        let given = store("redis://127.0.0.1:1/2", "SINGLE", "unix", "").unwrap();
        assert_eq!(url_of(given), "redis://127.0.0.1:1/2");
        let as_cluster = store("redis://127.0.0.1:1", "cluster", "unix", "").unwrap();
        assert_eq!(url_of(as_cluster), "redis-cluster://127.0.0.1:1");
    }

    #[test]
    fn sentinel_is_the_go_services_form() {
        let mut arguments = RlsArguments::defaults();
        arguments.redis_url = Some(Secret::new("mymaster, 10.0.0.1:26379,10.0.0.2:26379"));
        arguments.redis_type = "SENTINEL".to_owned();
        arguments.redis_auth = Secret::new("pw");
        arguments.redis_sentinel_auth = Secret::new("s@ntinel");
        match arguments.store_settings().unwrap() {
            StoreSettings::Redis { url, .. } => assert_eq!(
                url,
                "redis-sentinel://:pw@10.0.0.1:26379,10.0.0.2:26379/mymaster\
                 ?sentinel_auth=s%40ntinel"
            ),
            StoreSettings::Memory => panic!("in memory"),
        }
        arguments.redis_url = Some(Secret::new("mymaster"));
        assert!(matches!(
            arguments.store_settings(),
            Err(SettingsError::RedisUrl(_))
        ));
    }

    #[test]
    fn unsupported_stores_are_refused() {
        assert!(matches!(
            store("h:1", "MASTER", "tcp", ""),
            Err(SettingsError::RedisType(_))
        ));
        assert!(matches!(
            store("h:1", "SINGLE", "udp", ""),
            Err(SettingsError::RedisSocketType(_))
        ));
        assert!(matches!(
            store("h:1,h:2", "SINGLE", "tcp", ""),
            Err(SettingsError::RedisUrl(_))
        ));
    }

    #[test]
    fn redis_tls_reaches_redis_over_rediss() {
        let tls = |url: &str, kind: &str, socket: &str, cacert: &str| {
            let mut arguments = RlsArguments::defaults();
            arguments.redis_url = Some(Secret::new(url));
            arguments.redis_type = kind.to_owned();
            arguments.redis_socket_type = socket.to_owned();
            arguments.redis_tls = true;
            arguments.redis_tls_cacert = cacert.to_owned();
            arguments.store_settings()
        };
        let single = tls("h:6380", "SINGLE", "tcp", "/ca.pem").unwrap();
        assert_eq!(
            single,
            StoreSettings::Redis {
                url: "rediss://h:6380".to_owned(),
                ca_file: Some("/ca.pem".into()),
                timeout: Duration::from_millis(50),
            }
        );
        assert_eq!(single.server(), "rediss://h:6380");
        let cluster = tls("a:1,b:2", "CLUSTER", "tcp", "").unwrap();
        assert_eq!(url_of(cluster), "rediss-cluster://a:1,b:2");
        let given = tls("redis://h:1/2", "SINGLE", "unix", "").unwrap();
        assert_eq!(url_of(given), "rediss://h:1/2");
        let given_cluster = tls("rediss://h:1", "CLUSTER", "unix", "").unwrap();
        assert_eq!(url_of(given_cluster), "rediss-cluster://h:1");
        assert!(matches!(
            tls("/run/redis.sock", "SINGLE", "unix", ""),
            Err(SettingsError::RedisUrl(_))
        ));
        // A rediss:// URL is TLS without REDIS_TLS; the CA file is for TLS
        // only, as in the Go service.
        let mut arguments = RlsArguments::defaults();
        arguments.redis_url = Some(Secret::new("h:1"));
        arguments.redis_socket_type = "tcp".to_owned();
        arguments.redis_tls_cacert = "/ca.pem".to_owned();
        assert!(matches!(
            arguments.store_settings().unwrap(),
            StoreSettings::Redis { ca_file: None, .. }
        ));
    }
}
