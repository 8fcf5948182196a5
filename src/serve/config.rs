//! The gateway's configuration file (`gateway.toml`): listeners, routes and
//! their upstreams, the limits, the admin API. Every setting is documented in
//! `docs/CONFIG.md`; `examples/gateway.toml` shows them all.

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::path::Path;
use std::time::Duration;

use http::Uri;
use ipnet::IpNet;
use serde::{Deserialize, Deserializer};
use tollgate_core::{ConfigError, LimiterConfig};
use tollgate_tower::{Budget, HostDefaults};

use super::api_key::MAX_KEY_LENGTH;

/// The whole configuration of `tollgate serve`.
#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ServeConfig {
    /// Where clients connect. Default `127.0.0.1:8080`.
    #[serde(default = "default_listen")]
    pub listen: SocketAddr,
    /// Threads serving `listen`, each with its own event loop, listening
    /// socket (`SO_REUSEPORT`) and upstream connections. Default: the number
    /// of CPUs.
    #[serde(default)]
    pub workers: Option<usize>,
    /// The admin and operations listener.
    #[serde(default)]
    pub admin: AdminConfig,
    /// Plans: default policy, tiers, exempt keys, eviction, key cap.
    #[serde(default = "configured_limits")]
    pub limits: LimiterConfig,
    /// Upstream connections.
    #[serde(default)]
    pub upstream: UpstreamConfig,
    /// Default route budgets per tenant and per client IP.
    #[serde(default)]
    pub host: HostDefaults,
    /// How the client IP is found.
    #[serde(default)]
    pub client_ip: ClientIpConfig,
    /// Tenants and their API keys: `acme = ["sk_a", "sk_b"]`.
    #[serde(default)]
    pub tenants: BTreeMap<String, Vec<String>>,
    /// Path prefixes and their upstreams. With none, every path is answered by
    /// the built-in demo backend.
    #[serde(default)]
    pub routes: Vec<RouteConfig>,
    /// Where limits live: in this process (the default), or in Redis, shared.
    #[serde(default)]
    pub store: StoreConfig,
}

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

/// What a request gets when the limit store cannot decide.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum FailurePolicy {
    /// Let it through, unlimited (the default: the API stays up).
    #[default]
    FailOpen,
    /// Refuse it with 503 (limits are never exceeded).
    FailClosed,
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

fn default_prefix() -> String {
    "tollgate".to_owned()
}

fn default_store_timeout() -> Duration {
    Duration::from_millis(50)
}

/// The admin API and operations endpoints.
#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct AdminConfig {
    /// Where the admin API, `/metrics`, `/healthz` and `/readyz` listen.
    /// Default `127.0.0.1:8081`.
    #[serde(default = "default_admin_listen")]
    pub listen: SocketAddr,
    /// The bearer token of the admin API. The environment variable named by
    /// `token_env` overrides it when set. With neither, every admin call is
    /// refused.
    #[serde(default)]
    pub token: Option<String>,
    /// The environment variable holding the token. Default `TOLLGATE_ADMIN_TOKEN`.
    #[serde(default = "default_token_env")]
    pub token_env: String,
}

/// Upstream connections.
#[derive(Clone, Copy, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct UpstreamConfig {
    /// How long to wait for an upstream's response headers before answering
    /// 504. Default `"30s"`.
    #[serde(default = "default_timeout", deserialize_with = "duration")]
    pub timeout: Duration,
    /// How long to wait for a connection before answering 502. Default `"5s"`.
    #[serde(default = "default_connect_timeout", deserialize_with = "duration")]
    pub connect_timeout: Duration,
    /// How long an upstream may pause in the middle of a response body before
    /// the response is cut off (the client's connection closed before the
    /// body's end). Default `"60s"`, as nginx's `proxy_read_timeout`.
    #[serde(default = "default_body_idle_timeout", deserialize_with = "duration")]
    pub body_idle_timeout: Duration,
}

/// How the client IP of a request is found.
#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ClientIpConfig {
    /// Proxies trusted to report the client in the forwarding header.
    #[serde(default)]
    pub trusted_proxies: Vec<IpNet>,
    /// The forwarding header those proxies write, and the only one read:
    /// `"x-forwarded-for"` (default) or `"forwarded"` (RFC 7239).
    #[serde(default)]
    pub header: ForwardingHeader,
    /// IPv6 clients are grouped by this prefix length. Default 64.
    #[serde(default = "default_ipv6_prefix")]
    pub ipv6_prefix: u8,
}

/// The forwarding header trusted proxies write.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum ForwardingHeader {
    /// `X-Forwarded-For`.
    #[default]
    XForwardedFor,
    /// `Forwarded` (RFC 7239).
    Forwarded,
}

impl From<ForwardingHeader> for tollgate_tower::ForwardedHeader {
    fn from(header: ForwardingHeader) -> Self {
        match header {
            ForwardingHeader::XForwardedFor => tollgate_tower::ForwardedHeader::XForwardedFor,
            ForwardingHeader::Forwarded => tollgate_tower::ForwardedHeader::Forwarded,
        }
    }
}

/// What a route's own budget is keyed by: in TOML `"principal"`, `"tenant"`,
/// `"ip"` or `"header:NAME"`.
#[derive(Clone, Debug, PartialEq, Eq, Deserialize)]
#[serde(try_from = "String")]
pub enum RouteKey {
    /// The API key (the default).
    Principal,
    /// The key's tenant, from `[tenants]`; keys without one are refused (401).
    Tenant,
    /// The client IP.
    Ip,
    /// The value of a request header, such as a client or account id set by
    /// an authentication proxy in front; a request without it, with it twice,
    /// or with a value that is not 1 to 256 bytes of visible ASCII without
    /// spaces is refused (401). Names that cannot work (`Authorization`,
    /// `X-API-Key`, `Host`, `Content-Length`, hop-by-hop ones) are refused.
    Header(http::HeaderName),
}

/// Why header `name` cannot key a route budget, if it cannot.
fn unusable_key_header(name: &http::HeaderName) -> Option<&'static str> {
    match name.as_str() {
        "authorization" | "x-api-key" => Some("the API key is key = \"principal\""),
        "host" => Some("HTTP/2 requests carry no Host header, and HTTP/1 clients choose it"),
        "connection"
        | "keep-alive"
        | "proxy-connection"
        | "proxy-authenticate"
        | "proxy-authorization"
        | "te"
        | "trailer"
        | "upgrade"
        | "transfer-encoding"
        | "content-length" => Some("it describes the connection or the body, not the client"),
        _ => None,
    }
}

impl TryFrom<String> for RouteKey {
    type Error = String;

    fn try_from(text: String) -> Result<Self, String> {
        match text.as_str() {
            "principal" => Ok(RouteKey::Principal),
            "tenant" => Ok(RouteKey::Tenant),
            "ip" => Ok(RouteKey::Ip),
            _ => match text.strip_prefix("header:") {
                Some(name) => {
                    let name =
                        http::HeaderName::from_bytes(name.trim().as_bytes()).map_err(|_| {
                            "key = \"header:NAME\" needs a valid header name".to_owned()
                        })?;
                    if let Some(reason) = unusable_key_header(&name) {
                        return Err(format!("key = \"header:{name}\" cannot work: {reason}"));
                    }
                    Ok(RouteKey::Header(name))
                }
                None => Err(
                    "key must be \"principal\", \"tenant\", \"ip\" or \"header:NAME\"".to_owned(),
                ),
            },
        }
    }
}

/// One route: a path prefix, its upstream and, optionally, its own budget.
#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RouteConfig {
    /// The route's name in metrics and headers. Default: the prefix.
    #[serde(default)]
    pub name: Option<String>,
    /// The path prefix, matched on segment boundaries: `/api` matches `/api`
    /// and `/api/orders`, not `/apis`. The longest matching prefix wins.
    pub prefix: String,
    /// The upstream base URL, `http://host:port[/path]`.
    #[serde(deserialize_with = "uri")]
    pub upstream: Uri,
    /// Remove the prefix from the path before forwarding. Default false.
    #[serde(default)]
    pub strip_prefix: bool,
    /// The route's own budget: requests per minute per key.
    #[serde(default)]
    pub rpm: Option<u64>,
    /// The route's own burst (default: `rpm`).
    #[serde(default)]
    pub burst: Option<u64>,
    /// What the route's own budget is keyed by. Default `principal`.
    #[serde(default)]
    pub key: Option<RouteKey>,
}

/// A configuration that cannot be used.
#[derive(Debug, thiserror::Error)]
pub enum ServeConfigError {
    /// The file could not be read.
    #[error("cannot read it: {0}")]
    Read(std::io::Error),
    /// A problem in a file, named.
    #[error("{path}: {reason}")]
    File {
        /// The file.
        path: String,
        /// The problem.
        reason: Box<ServeConfigError>,
    },
    /// TOML syntax or shape, on one line naming the line and column.
    #[error("invalid configuration: {0}")]
    Toml(String),
    /// The limits are invalid.
    #[error("{0}")]
    Limits(ConfigError),
    /// A route is invalid.
    #[error("route {route}: {reason}")]
    Route {
        /// The route's prefix.
        route: String,
        /// What is wrong.
        reason: String,
    },
    /// A tenant's key list is invalid.
    #[error("tenants: {0}")]
    Tenants(String),
    /// Another setting is invalid.
    #[error("{0}")]
    Invalid(String),
}

impl From<ConfigError> for ServeConfigError {
    fn from(error: ConfigError) -> Self {
        ServeConfigError::Limits(error)
    }
}

impl ServeConfig {
    /// The built-in defaults, used when no file is given: listen on
    /// 127.0.0.1:8080 and 127.0.0.1:8081, the contract's plans (5 requests per
    /// minute by default, tiers `pro` and `enterprise`, `sk_internal` exempt),
    /// no routes (the demo backend answers).
    pub fn builtin() -> Self {
        ServeConfig {
            listen: default_listen(),
            workers: None,
            admin: AdminConfig::default(),
            limits: LimiterConfig::default(),
            upstream: UpstreamConfig::default(),
            host: HostDefaults::default(),
            client_ip: ClientIpConfig::default(),
            tenants: BTreeMap::new(),
            routes: Vec::new(),
            store: StoreConfig::default(),
        }
    }

    /// Parses and validates `gateway.toml` text.
    ///
    /// # Errors
    ///
    /// [`ServeConfigError`] naming the first problem.
    pub fn from_toml_str(text: &str) -> Result<Self, ServeConfigError> {
        let config: ServeConfig =
            tollgate_core::parse_toml(text).map_err(ServeConfigError::Toml)?;
        config.validate()?;
        Ok(config)
    }

    /// Puts `url` (a Redis URL from outside the file, such as `--store`) in
    /// place of `[store] url`; `None` changes nothing.
    pub(crate) fn override_store_url(&mut self, url: Option<&str>) {
        if let Some(url) = url {
            self.store.url = Some(url.to_owned());
        }
    }

    /// Reads, parses and validates a configuration file.
    ///
    /// # Errors
    ///
    /// [`ServeConfigError`] naming the first problem.
    pub fn from_file(path: &Path) -> Result<Self, ServeConfigError> {
        let in_file = |reason| ServeConfigError::File {
            path: path.display().to_string(),
            reason: Box::new(reason),
        };
        let text = std::fs::read_to_string(path)
            .map_err(|error| in_file(ServeConfigError::Read(error)))?;
        ServeConfig::from_toml_str(&text).map_err(in_file)
    }

    /// What in a valid configuration works, but probably not as meant: one
    /// sentence each, for the log (they name settings, never a key or token).
    /// `in_memory`: whether the store running is the in-memory one (on a
    /// reload, the store started with, whatever the file now says).
    ///
    /// With the in-memory store, a key idle for `limits.idle_eviction_s`
    /// loses its state (the engine's contract), route budgets' keys included,
    /// so a policy counting over a longer span (a fixed window or sliding log
    /// longer than that, a token bucket taking longer to fill) starts a key
    /// that paused over again.
    pub fn warnings(&self, in_memory: bool) -> Vec<String> {
        let mut warnings = Vec::new();
        if !in_memory {
            return warnings;
        }
        let idle = self.limits.idle_eviction_s;
        let mut spans = vec![(
            "the default policy".to_owned(),
            self.limits.default_policy.counted_span_s(),
        )];
        for (name, policy) in &self.limits.tiers {
            spans.push((
                format!("the policy of tier {name}"),
                policy.counted_span_s(),
            ));
        }
        for route in &self.routes {
            if let Ok(Some(budget)) = route.budget() {
                let name = format!("the budget of route {}", route.name());
                spans.push((name, budget.policy().counted_span_s()));
            }
        }
        for (name, budget) in [("tenant", self.host.tenant), ("ip", self.host.ip)] {
            if let Some(budget) = budget {
                spans.push((format!("host.{name}"), budget.policy().counted_span_s()));
            }
        }
        for (name, span) in spans {
            if span > idle {
                warnings.push(format!(
                    "{name} counts over {span} s, longer than limits.idle_eviction_s \
                     ({idle} s): a key idle that long starts over with its whole budget"
                ));
            }
        }
        warnings
    }

    /// Checks what the types alone cannot.
    ///
    /// # Errors
    ///
    /// [`ServeConfigError`] naming the first problem.
    pub fn validate(&self) -> Result<(), ServeConfigError> {
        self.limits.validate()?;
        if self.workers == Some(0) {
            return Err(ServeConfigError::Invalid(
                "workers must be at least 1".into(),
            ));
        }
        for (name, timeout) in [
            ("upstream.timeout", self.upstream.timeout),
            ("upstream.connect_timeout", self.upstream.connect_timeout),
            (
                "upstream.body_idle_timeout",
                self.upstream.body_idle_timeout,
            ),
            ("store.timeout", self.store.timeout),
        ] {
            if timeout.is_zero() {
                return Err(ServeConfigError::Invalid(format!(
                    "{name} must be more than 0"
                )));
            }
        }
        // Longer keys are refused on every request (401): such a key could
        // never be used.
        if let Some(position) = self.limits.exempt_keys.iter().position(|key| {
            tollgate_core::ApiKey::parse(key).is_some_and(|key| key.as_str().len() > MAX_KEY_LENGTH)
        }) {
            return Err(ServeConfigError::Invalid(format!(
                "limits.exempt_keys[{position}] is longer than {MAX_KEY_LENGTH} bytes, \
                 the longest API key a request may carry"
            )));
        }
        if self.client_ip.ipv6_prefix > 128 {
            return Err(ServeConfigError::Invalid(format!(
                "client_ip.ipv6_prefix must be from 0 to 128, got {}",
                self.client_ip.ipv6_prefix
            )));
        }
        let mut prefixes = std::collections::HashSet::new();
        let mut names = std::collections::HashSet::new();
        for route in &self.routes {
            route.validate()?;
            if !prefixes.insert(route.prefix.trim_end_matches('/')) {
                return Err(ServeConfigError::Route {
                    route: route.prefix.clone(),
                    reason: "another route has the same prefix".into(),
                });
            }
            // A route's name keys its budget and its metrics.
            if !names.insert(route.name()) {
                return Err(ServeConfigError::Route {
                    route: route.prefix.clone(),
                    reason: "another route has the same name".into(),
                });
            }
        }
        let mut seen = std::collections::HashSet::new();
        for (tenant, keys) in &self.tenants {
            if tenant.is_empty() {
                return Err(ServeConfigError::Tenants("a tenant name is empty".into()));
            }
            for key in keys {
                let parsed = tollgate_core::ApiKey::parse(key).ok_or_else(|| {
                    ServeConfigError::Tenants(format!("tenant {tenant} has an empty key"))
                })?;
                if parsed.as_str().len() > MAX_KEY_LENGTH {
                    return Err(ServeConfigError::Tenants(format!(
                        "tenant {tenant} has a key longer than {MAX_KEY_LENGTH} bytes, \
                         the longest API key a request may carry"
                    )));
                }
                if !seen.insert(parsed.as_str().to_owned()) {
                    return Err(ServeConfigError::Tenants(format!(
                        "the key {} belongs to two tenants",
                        parsed.redacted()
                    )));
                }
            }
        }
        Ok(())
    }
}

impl RouteConfig {
    /// The route's name: `name`, or the prefix.
    pub fn name(&self) -> &str {
        self.name.as_deref().unwrap_or(&self.prefix)
    }

    /// The route's own budget, if it declares one.
    pub fn budget(&self) -> Result<Option<Budget>, ServeConfigError> {
        let error = |reason: String| ServeConfigError::Route {
            route: self.prefix.clone(),
            reason,
        };
        match (self.rpm, self.burst) {
            (None, None) => Ok(None),
            (None, Some(_)) => Err(error("burst needs rpm".into())),
            (Some(rpm), burst) => Budget::new(rpm, burst.unwrap_or(rpm))
                .map(Some)
                .map_err(|budget| error(budget.to_string())),
        }
    }

    fn validate(&self) -> Result<(), ServeConfigError> {
        let error = |reason: &str| ServeConfigError::Route {
            route: self.prefix.clone(),
            reason: reason.to_owned(),
        };
        if !self.prefix.starts_with('/') {
            return Err(error("the prefix must start with /"));
        }
        if self
            .name
            .as_deref()
            .is_some_and(|name| name.trim().is_empty())
        {
            return Err(error("the name must not be empty"));
        }
        if self.upstream.scheme_str() != Some("http") {
            return Err(error("the upstream must be an http:// URL"));
        }
        if self.upstream.authority().is_none() {
            return Err(error("the upstream needs a host"));
        }
        if self.upstream.query().is_some() {
            return Err(error("the upstream must not have a query"));
        }
        if self.key.is_some() && self.rpm.is_none() {
            return Err(error("key applies to the route's own budget: set rpm too"));
        }
        self.budget().map(|_| ())
    }
}

impl Default for AdminConfig {
    fn default() -> Self {
        AdminConfig {
            listen: default_admin_listen(),
            token: None,
            token_env: default_token_env(),
        }
    }
}

impl Default for UpstreamConfig {
    fn default() -> Self {
        UpstreamConfig {
            timeout: default_timeout(),
            connect_timeout: default_connect_timeout(),
            body_idle_timeout: default_body_idle_timeout(),
        }
    }
}

impl Default for ClientIpConfig {
    fn default() -> Self {
        ClientIpConfig {
            trusted_proxies: Vec::new(),
            header: ForwardingHeader::default(),
            ipv6_prefix: default_ipv6_prefix(),
        }
    }
}

fn default_listen() -> SocketAddr {
    SocketAddr::from(([127, 0, 0, 1], 8080))
}

fn default_admin_listen() -> SocketAddr {
    SocketAddr::from(([127, 0, 0, 1], 8081))
}

fn default_token_env() -> String {
    "TOLLGATE_ADMIN_TOKEN".to_owned()
}

fn default_timeout() -> Duration {
    Duration::from_secs(30)
}

fn default_connect_timeout() -> Duration {
    Duration::from_secs(5)
}

fn default_body_idle_timeout() -> Duration {
    Duration::from_secs(60)
}

fn default_ipv6_prefix() -> u8 {
    64
}

/// `[limits]` absent from a file means an empty table: the built-in default
/// policy, no tiers, no exempt keys (the built-in tiers are for the demo only).
fn configured_limits() -> LimiterConfig {
    LimiterConfig::from_toml_str("").unwrap_or_default()
}

/// A human duration: `"30s"`, `"250ms"`, `"1m 30s"`.
fn duration<'de, D: Deserializer<'de>>(deserializer: D) -> Result<Duration, D::Error> {
    let text = String::deserialize(deserializer)?;
    humantime::parse_duration(&text).map_err(serde::de::Error::custom)
}

fn uri<'de, D: Deserializer<'de>>(deserializer: D) -> Result<Uri, D::Error> {
    let text = String::deserialize(deserializer)?;
    text.parse().map_err(serde::de::Error::custom)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_empty_file_is_the_defaults_without_demo_plans() {
        let config = ServeConfig::from_toml_str("").unwrap();
        assert_eq!(config.listen, "127.0.0.1:8080".parse().unwrap());
        assert_eq!(config.admin.listen, "127.0.0.1:8081".parse().unwrap());
        assert!(config.limits.tiers.is_empty());
        assert!(config.limits.exempt_keys.is_empty());
        assert_eq!(config.upstream.timeout, Duration::from_secs(30));
        assert_eq!(config.upstream.body_idle_timeout, Duration::from_secs(60));
        assert!(config.routes.is_empty());
        let builtin = ServeConfig::builtin();
        assert_eq!(builtin.limits.exempt_keys, ["sk_internal"]);
    }

    #[test]
    fn the_example_file_is_valid() {
        let text = include_str!("../../examples/gateway.toml");
        let config = ServeConfig::from_toml_str(text).unwrap();
        assert!(!config.routes.is_empty());
        assert_eq!(config.warnings(true), Vec::<String>::new());
        assert_eq!(
            config.admin.token.as_deref(),
            Some(super::super::restart::EXAMPLE_ADMIN_TOKEN)
        );
    }

    #[test]
    fn bad_files_name_the_problem() {
        let cases = [
            ("listen = \"nowhere\"", "invalid"),
            (
                "[[routes]]\nprefix = \"api\"\nupstream = \"http://127.0.0.1:1\"",
                "must start with /",
            ),
            (
                "[[routes]]\nprefix = \"/api\"\nupstream = \"https://example.com\"",
                "http://",
            ),
            (
                "[[routes]]\nprefix = \"/api\"\nupstream = \"http://h:1\"\nburst = 3",
                "burst needs rpm",
            ),
            (
                "[[routes]]\nprefix = \"/api\"\nupstream = \"http://h:1\"\nrpm = 0",
                "rpm must be",
            ),
            (
                "[[routes]]\nprefix = \"/api\"\nupstream = \"http://h:1\"\nkey = \"ip\"",
                "set rpm too",
            ),
            (
                "[[routes]]\nprefix = \"/api\"\nupstream = \"http://h:1\"\nrpm = 1\nkey = \"cookie\"",
                "key must be \"principal\", \"tenant\", \"ip\" or \"header:NAME\"",
            ),
            (
                "[[routes]]\nprefix = \"/api\"\nupstream = \"http://h:1\"\nrpm = 1\nkey = \"header:\"",
                "needs a valid header name",
            ),
            (
                "[[routes]]\nprefix = \"/api\"\nupstream = \"http://h:1\"\nrpm = 1\nkey = \"header:a b\"",
                "needs a valid header name",
            ),
            (
                "[[routes]]\nprefix = \"/api\"\nupstream = \"http://h:1\"\nrpm = 1\nkey = \"header:Host\"",
                "key = \"header:host\" cannot work: HTTP/2 requests carry no Host header",
            ),
            (
                "[[routes]]\nprefix = \"/api\"\nupstream = \"http://h:1\"\nrpm = 1\nkey = \"header:Connection\"",
                "key = \"header:connection\" cannot work: it describes the connection",
            ),
            (
                "[[routes]]\nprefix = \"/api\"\nupstream = \"http://h:1\"\nrpm = 1\nkey = \"header:X-API-Key\"",
                "the API key is key = \"principal\"",
            ),
            (
                "[[routes]]\nname = \"x\"\nprefix = \"/a\"\nupstream = \"http://h:1\"\n\
                 [[routes]]\nname = \"x\"\nprefix = \"/b\"\nupstream = \"http://h:1\"",
                "route /b: another route has the same name",
            ),
            (
                "[[routes]]\nname = \"/b\"\nprefix = \"/a\"\nupstream = \"http://h:1\"\n\
                 [[routes]]\nprefix = \"/b\"\nupstream = \"http://h:1\"",
                "route /b: another route has the same name",
            ),
            ("[upstream]\ntimeout = \"soon\"", "timeout"),
            (
                "[upstream]\nbody_idle_timeout = \"0s\"",
                "body_idle_timeout must be more than 0",
            ),
            (
                "[tenants]\nacme = [\"k\"]\nglobex = [\"Bearer k\"]",
                "two tenants",
            ),
            ("[limits]\nidle_eviction_s = 0", "idle_eviction_s"),
            (
                "[upstream]\ntimeout = \"0s\"",
                "upstream.timeout must be more than 0",
            ),
            (
                "[upstream]\nconnect_timeout = \"0ms\"",
                "upstream.connect_timeout must be more than 0",
            ),
            (
                "[store]\ntimeout = \"0s\"",
                "store.timeout must be more than 0",
            ),
            (
                "[[routes]]\nname = \" \"\nprefix = \"/api\"\nupstream = \"http://h:1\"",
                "route /api: the name must not be empty",
            ),
            ("[client_ip]\nipv6_prefix = 129", "ipv6_prefix"),
            ("colour = 1", "colour"),
        ];
        for (text, expected) in cases {
            let error = ServeConfig::from_toml_str(text).unwrap_err().to_string();
            assert!(error.contains(expected), "{text:?}: {error}");
        }
    }

    #[test]
    fn keys_no_request_can_carry_are_refused() {
        let longest = "k".repeat(256);
        let too_long = "k".repeat(257);
        let exempt = |key: &str| format!("[limits]\nexempt_keys = [\"a\", \"{key}\"]");
        assert!(ServeConfig::from_toml_str(&exempt(&longest)).is_ok());
        assert!(ServeConfig::from_toml_str(&exempt(&format!("Bearer {longest}"))).is_ok());
        let error = ServeConfig::from_toml_str(&exempt(&too_long))
            .unwrap_err()
            .to_string();
        assert_eq!(
            error,
            "limits.exempt_keys[1] is longer than 256 bytes, the longest API key a request may carry"
        );
        let tenant = |key: &str| format!("[tenants]\nacme = [\"{key}\"]");
        assert!(ServeConfig::from_toml_str(&tenant(&longest)).is_ok());
        let error = ServeConfig::from_toml_str(&tenant(&too_long))
            .unwrap_err()
            .to_string();
        assert!(!error.contains(&too_long), "{error}");
        assert!(
            error.contains("tenant acme has a key longer than 256 bytes"),
            "{error}"
        );
    }

    #[test]
    fn a_host_budget_without_burst_has_burst_rpm() {
        let config = ServeConfig::from_toml_str(
            "[host]\nip = { rpm = 10 }\ntenant = { rpm = 6, burst = 2 }",
        )
        .unwrap();
        assert_eq!(config.host.ip, Some(Budget::new(10, 10).unwrap()));
        assert_eq!(config.host.tenant, Some(Budget::new(6, 2).unwrap()));
    }

    #[test]
    fn policies_counting_longer_than_idle_eviction_are_warned_about() {
        let config = ServeConfig::from_toml_str(
            "[limits]\nidle_eviction_s = 600\n\
             [limits.default_policy]\nalgorithm = \"fixed_window\"\nlimit = 5\nwindow_s = 601\n\
             [limits.tiers.a]\nalgorithm = \"sliding_log\"\nlimit = 5\nwindow_s = 600\n\
             [limits.tiers.b]\nalgorithm = \"token_bucket\"\nlimit = 3\nwindow_s = 400\nburst = 5\n\
             [limits.tiers.c]\nalgorithm = \"token_bucket\"\nlimit = 2\nwindow_s = 400\nburst = 3",
        )
        .unwrap();
        // a: 600 s, not longer. b: 5 tokens at 3 per 400 s fill in 666.7 s,
        // 667 rounded up. c: 3 at 2 per 400 s, exactly 600 s.
        assert_eq!(
            config.warnings(true),
            [
                "the default policy counts over 601 s, longer than limits.idle_eviction_s \
                 (600 s): a key idle that long starts over with its whole budget",
                "the policy of tier b counts over 667 s, longer than limits.idle_eviction_s \
                 (600 s): a key idle that long starts over with its whole budget",
            ]
        );
        // The Redis store keeps a key's state for as long as it counts.
        assert!(config.warnings(false).is_empty());
        assert!(ServeConfig::builtin().warnings(true).is_empty());
        // Route and host budgets: 1 per minute in bursts of 11 fills in
        // 660 s, of 10 in exactly 600 s.
        let budgets = ServeConfig::from_toml_str(
            "[limits]\nidle_eviction_s = 600\n\
             [host]\ntenant = { rpm = 1, burst = 11 }\nip = { rpm = 1, burst = 10 }\n\
             [[routes]]\nname = \"slow\"\nprefix = \"/slow\"\nupstream = \"http://h:1\"\n\
             rpm = 1\nburst = 11\n\
             [[routes]]\nprefix = \"/fast\"\nupstream = \"http://h:1\"\nrpm = 1\nburst = 10",
        )
        .unwrap();
        assert_eq!(
            budgets.warnings(true),
            [
                "the budget of route slow counts over 660 s, longer than \
                 limits.idle_eviction_s (600 s): a key idle that long starts over with its \
                 whole budget",
                "host.tenant counts over 660 s, longer than limits.idle_eviction_s (600 s): \
                 a key idle that long starts over with its whole budget",
            ]
        );
    }

    #[test]
    fn route_keys_are_read() {
        let key = |text: &str| {
            let toml = format!(
                "[[routes]]\nprefix = \"/api\"\nupstream = \"http://h:1\"\nrpm = 1\nkey = \"{text}\""
            );
            ServeConfig::from_toml_str(&toml).unwrap().routes[0]
                .key
                .clone()
        };
        assert_eq!(key("principal"), Some(RouteKey::Principal));
        assert_eq!(key("tenant"), Some(RouteKey::Tenant));
        assert_eq!(key("ip"), Some(RouteKey::Ip));
        assert_eq!(
            key("header:X-Client-Id"),
            Some(RouteKey::Header(http::HeaderName::from_static(
                "x-client-id"
            )))
        );
    }
}
