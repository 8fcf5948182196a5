//! The gateway's configuration file (`gateway.toml`), one file per section:
//! `listen` and `workers` ([`listeners`]), `[admin]`, `[limits]` (the core's
//! [`LimiterConfig`], in the one layout `tollgate run --config` reads too,
//! [`layout`]), `[upstream]`, `[host]`, `[client_ip]`, `[refusal]`,
//! `[responses]`, `[tenants]`, `[[routes]]`, `[store]`, `[tls]`,
//! `[upstream_tls]` and `[access_log]`; the warnings a valid file can still
//! deserve, the settings only a restart changes, and the errors. Every
//! setting is documented in `docs/CONFIG.md`; `examples/gateway.toml` shows
//! them all.

mod access_log;
mod admin;
mod charge;
mod client_ip;
mod error;
mod format;
mod forward_auth;
mod host;
mod keys;
mod layout;
mod listeners;
mod refusal;
mod responses;
mod route_limits;
mod routes;
mod start_only;
mod store;
mod summary;
mod tenants;
mod tls;
mod upstream;
mod upstream_tls;
mod waiting;
mod warnings;

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::path::Path;

use serde::Deserialize;
use tollgate_core::LimiterConfig;

use crate::request::api_key::MAX_KEY_LENGTH;

pub use access_log::{
    AccessLogConfig, AccessLogFormat, DEFAULT_ACCESS_LOG_BUFFER, MAX_ACCESS_LOG_BUFFER,
};
pub use admin::AdminConfig;
pub use charge::{ChargeConfig, MAX_CHARGE};
pub use client_ip::{ClientIpConfig, ForwardingHeader};
pub use error::ServeConfigError;
pub use forward_auth::ForwardAuthConfig;
pub use host::HostConfig;
pub use keys::{KNOWN_KEYS_MAX_BYTES, KeysConfig, known_keys_report, load_known_keys};
pub use refusal::RefusalConfig;
pub use responses::{RateLimitHeaderSet, ResponsesConfig};
pub use routes::{InFlightKey, MAX_UPSTREAMS, Preflight, RouteConfig, RouteKey};
pub(crate) use start_only::{InForce, kept_until_restart, removed_tiers};
pub use store::{FailurePolicy, StoreConfig, StoreTime};
pub use summary::describe_plan;
pub use tls::TlsConfig;
pub use upstream::UpstreamConfig;
pub use upstream_tls::UpstreamTlsConfig;

/// The whole configuration of `tollgate serve`.
#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ServeConfig {
    /// Where clients connect. Default `127.0.0.1:8080`.
    #[serde(default = "listeners::default_listen")]
    pub listen: SocketAddr,
    /// Threads serving `listen`, each with its own event loop, listening
    /// socket (`SO_REUSEPORT`) and upstream connections. Default: the number
    /// of CPUs.
    #[serde(default)]
    pub workers: Option<usize>,
    /// How long SIGTERM waits for in-flight requests before cutting them off.
    /// Default `"30s"`.
    #[serde(
        default = "listeners::default_drain_timeout",
        deserialize_with = "format::duration"
    )]
    pub drain_timeout: std::time::Duration,
    /// How long a client connection may move no byte, with none of its
    /// requests in flight, before it is closed: before its first request
    /// (TLS handshake done or not), between keep-alive requests, an HTTP/2
    /// connection sending no request. Default `"30s"`; a reload applies it
    /// to connections accepted from then on.
    #[serde(
        default = "listeners::default_idle_timeout",
        deserialize_with = "format::duration"
    )]
    pub idle_timeout: std::time::Duration,
    /// The admin and operations listener.
    #[serde(default)]
    pub admin: AdminConfig,
    /// Plans: default policy, tiers, exempt keys, eviction, key cap.
    #[serde(default = "configured_limits")]
    pub limits: LimiterConfig,
    /// Upstream connections.
    #[serde(default)]
    pub upstream: UpstreamConfig,
    /// Defaults of routes: budgets per tenant and per client IP, and a
    /// concurrency limit.
    #[serde(default)]
    pub host: HostConfig,
    /// How the client IP is found.
    #[serde(default)]
    pub client_ip: ClientIpConfig,
    /// The decision endpoint for nginx `auth_request`, Caddy `forward_auth`
    /// and Traefik ForwardAuth; off by default.
    #[serde(default)]
    pub forward_auth: ForwardAuthConfig,
    /// The status of refused requests (429 by default), per tier too.
    #[serde(default)]
    pub refusal: RefusalConfig,
    /// Which rate-limit headers responses carry (all by default).
    #[serde(default)]
    pub responses: ResponsesConfig,
    /// The keys that exist, and what another key gets.
    #[serde(default)]
    pub keys: KeysConfig,
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
    /// The gateway listener's certificate: HTTPS when set, plain HTTP (the
    /// default) when not.
    #[serde(default)]
    pub tls: Option<TlsConfig>,
    /// How the certificates of `https://` upstreams are checked.
    #[serde(default)]
    pub upstream_tls: UpstreamTlsConfig,
    /// One line per request, to standard output or a file; off by default.
    #[serde(default)]
    pub access_log: AccessLogConfig,
    /// The settings of `[limits]` the file wrote at the top level, the old
    /// layout of `tollgate run --config`: read as if in `[limits]`, and warned
    /// about.
    #[serde(skip)]
    old_layout: Vec<&'static str>,
}

impl ServeConfig {
    /// The built-in defaults, used when no file is given: listen on
    /// 127.0.0.1:8080 and 127.0.0.1:8081, the contract's plans (5 requests per
    /// minute by default, tiers `pro` and `enterprise`, `sk_internal` exempt),
    /// no routes (the demo backend answers).
    pub fn builtin() -> Self {
        ServeConfig {
            listen: listeners::default_listen(),
            workers: None,
            drain_timeout: listeners::default_drain_timeout(),
            idle_timeout: listeners::default_idle_timeout(),
            admin: AdminConfig::default(),
            limits: LimiterConfig::default(),
            upstream: UpstreamConfig::default(),
            host: HostConfig::default(),
            client_ip: ClientIpConfig::default(),
            forward_auth: ForwardAuthConfig::default(),
            refusal: RefusalConfig::default(),
            responses: ResponsesConfig::default(),
            keys: KeysConfig::default(),
            tenants: BTreeMap::new(),
            routes: Vec::new(),
            store: StoreConfig::default(),
            tls: None,
            upstream_tls: UpstreamTlsConfig::default(),
            access_log: AccessLogConfig::default(),
            old_layout: Vec::new(),
        }
    }

    /// Parses and validates `gateway.toml` text.
    ///
    /// # Errors
    ///
    /// [`ServeConfigError`] naming the first problem.
    pub fn from_toml_str(text: &str) -> Result<Self, ServeConfigError> {
        let (mut config, old_layout): (ServeConfig, _) =
            tollgate_core::parse_toml_with(text, layout::move_old_limits)
                .map_err(ServeConfigError::Toml)?;
        config.old_layout = old_layout;
        config.validate()?;
        Ok(config)
    }

    /// The warnings about settings written in the old layout of
    /// `tollgate run --config` (`default_policy` at the top level, not in
    /// `[limits]`), one for each, naming the old and the new setting. They
    /// are among [`ServeConfig::warnings`] too.
    pub fn layout_warnings(&self) -> Vec<String> {
        self.old_layout
            .iter()
            .map(|name| layout::old_layout_warning(name))
            .collect()
    }

    /// Reads, parses and validates a configuration file.
    ///
    /// # Errors
    ///
    /// [`ServeConfigError`] naming the file and the first problem.
    pub fn from_file(path: &Path) -> Result<Self, ServeConfigError> {
        let in_file = |reason| ServeConfigError::File {
            path: path.display().to_string(),
            reason: Box::new(reason),
        };
        let bytes = tollgate_serve::read_regular_file(path, tollgate_serve::MAX_FILE_BYTES)
            .map_err(|error| match error {
                tollgate_serve::FileError::Io(error) => in_file(ServeConfigError::Read(error)),
                other => in_file(ServeConfigError::Read(std::io::Error::other(other))),
            })?;
        let text = String::from_utf8(bytes).map_err(|_| {
            in_file(ServeConfigError::Read(std::io::Error::new(
                std::io::ErrorKind::InvalidData,
                "stream did not contain valid UTF-8",
            )))
        })?;
        ServeConfig::from_toml_str(&text).map_err(in_file)
    }

    /// Puts `url` (a Redis URL from outside the file, such as `--store`) in
    /// place of `[store] url`; `None` changes nothing.
    pub fn override_store_url(&mut self, url: Option<&str>) {
        if let Some(url) = url {
            self.store.url = Some(url.to_owned());
        }
    }

    /// Checks what the types alone cannot, section by section.
    ///
    /// # Errors
    ///
    /// [`ServeConfigError`] naming the first problem.
    pub fn validate(&self) -> Result<(), ServeConfigError> {
        self.limits.validate()?;
        listeners::validate(self.workers)?;
        if self.listen == self.admin.listen && self.listen.port() != 0 {
            return Err(ServeConfigError::Invalid(format!(
                "listen and admin.listen are both {}: give the admin listener an address of \
                 its own",
                self.listen
            )));
        }
        for (name, timeout) in [
            ("upstream.timeout", self.upstream.timeout),
            ("upstream.connect_timeout", self.upstream.connect_timeout),
            (
                "upstream.body_idle_timeout",
                self.upstream.body_idle_timeout,
            ),
            ("store.timeout", self.store.timeout),
            ("drain_timeout", self.drain_timeout),
            ("idle_timeout", self.idle_timeout),
            ("store.lease_ttl", self.store.lease_ttl),
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
        if self.store.lease_ttl < std::time::Duration::from_secs(1) {
            return Err(ServeConfigError::Invalid(
                "store.lease_ttl must be at least 1s: a gateway renews its slots every third \
                 of it"
                    .into(),
            ));
        }
        self.client_ip.validate()?;
        self.upstream_tls.validate()?;
        self.forward_auth.validate()?;
        self.access_log.validate()?;
        self.refusal
            .validate(|tier| self.limits.tiers.contains_key(tier))?;
        for route in &self.routes {
            if let Some(status) = route.refused_status {
                refusal::check_status(&format!("routes.{}.refused_status", route.name()), status)?;
            }
        }
        routes::validate(&self.routes)?;
        waiting::validate(&self.routes, &self.limits, &self.refusal)?;
        self.host.validate().map_err(ServeConfigError::Invalid)?;
        self.keys.validate()?;
        if self.limits.tiers.contains_key(tollgate_core::KEYLESS) {
            return Err(ServeConfigError::Invalid(format!(
                "limits.tiers.{0}: the tier name {0} is reserved for requests without a key",
                tollgate_core::KEYLESS
            )));
        }
        route_limits::AroundRoutes {
            limits: &self.limits,
            host: &self.host,
            unknown: self.keys.unknown,
            on_redis: self.store.url.is_some(),
        }
        .validate(&self.routes)?;
        tenants::validate(&self.tenants)
    }
}

/// `[limits]` absent from a file means an empty table: the built-in default
/// policy, no tiers, no exempt keys (the built-in tiers are for the demo only).
fn configured_limits() -> LimiterConfig {
    LimiterConfig::from_toml_str("").unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;
    use tollgate_tower::Budget;

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
        let text = include_str!("../../../../examples/gateway.toml");
        let config = ServeConfig::from_toml_str(text).unwrap();
        assert!(!config.routes.is_empty());
        assert_eq!(config.warnings(), Vec::<String>::new());
        assert_eq!(
            config.admin.token.as_deref(),
            Some(admin::EXAMPLE_ADMIN_TOKEN)
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
                "[[routes]]\nprefix = \"/api\"\nupstream = \"ftp://example.com\"",
                "the upstream must be an http:// or https:// URL",
            ),
            (
                "[upstream_tls]\nca_file = \"/ca.pem\"\ninsecure_skip_verify = true",
                "upstream_tls: set ca_file or insecure_skip_verify, not both",
            ),
            ("[tls]\ncert = \"/cert.pem\"", "missing field `key`"),
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
                "route x (/b): another route has the same name",
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
            (
                "[admin]\nlisten = \"127.0.0.1:8080\"",
                "listen and admin.listen are both 127.0.0.1:8080: give the admin listener an \
                 address of its own",
            ),
            (
                "listen = \"127.0.0.1:9\"\nlisten = \"127.0.0.1:10\"",
                "line 2, column 1: duplicate key `listen`",
            ),
            (
                "[[routes]]\nprefix = \"/api\"\nupstream = \"http://h:1\"\nrpm = \"5\"",
                "line 4, column 7 (`routes[0].rpm`): invalid type: string, expected a whole \
                 number (numbers are written without quotes)",
            ),
            (
                "[client_ip]\nipv6_prefix = 300",
                "expected a whole number from 0 to 255",
            ),
            (
                "[[routes]]\nprefix = \"/api\"\nupstream = \"http://u:s3cret@h:1\"",
                "route /api: the upstream URL must not carry credentials (user:password@)",
            ),
        ];
        for (text, expected) in cases {
            let error = ServeConfig::from_toml_str(text).unwrap_err().to_string();
            assert!(error.contains(expected), "{text:?}: {error}");
            assert!(!error.contains("s3cret"), "{error}");
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
    fn policies_counting_longer_than_idle_eviction_are_not_warned_about() {
        // The in-memory limiter keeps each key's state until it is whole
        // again, however short idle_eviction_s is (core's
        // `tests/long_windows.rs`).
        let config = ServeConfig::from_toml_str(
            "[limits]\nidle_eviction_s = 600\n\
             [limits.default_policy]\nalgorithm = \"fixed_window\"\nlimit = 5\nwindow_s = 601\n\
             [limits.tiers.b]\nalgorithm = \"token_bucket\"\nlimit = 3\nwindow_s = 400\nburst = 5",
        )
        .unwrap();
        assert!(config.warnings().is_empty());
        assert!(ServeConfig::builtin().warnings().is_empty());
    }
}
