//! `tollgate serve`: the rate-limiting reverse proxy. Every request's API key
//! is limited by its plan and its route's budget, all or nothing, before it is
//! forwarded to the route's upstream; an admin API and `/metrics`, `/healthz`,
//! `/readyz` listen apart. SIGTERM drains in-flight requests; SIGHUP reloads
//! the configuration file.
//!
//! [`start`] binds and serves and returns a [`Running`] handle; [`run`] also
//! waits for signals. Every decision goes through a [`tollgate_core::Store`]:
//! the in-memory one, or Redis (`tollgate-redis`) for limits shared by many
//! gateways.

#![forbid(unsafe_code)]

mod admin;
mod app;
pub mod config;
mod observe;
mod proxy;
mod request;
mod serve;

pub use config::{ServeConfig, ServeConfigError};
pub use serve::error::StartError;
pub use serve::start::{Running, ServeOptions, run, start};

/// Reads the files `config` names as a start would, without starting: the
/// listener's certificate and key (`[tls]`, the key checked against the
/// certificate) and the roots of `https://` upstreams (`[upstream_tls]`), for
/// `tollgate check-config`; and the file of known keys (`[keys] known`).
/// Returns the list of known keys read, for its report
/// ([`config::known_keys_report`]).
///
/// # Errors
///
/// [`ServeConfigError::Invalid`] naming the setting and the file, as a start
/// would refuse it.
pub fn check_files(
    config: &ServeConfig,
) -> Result<Option<std::sync::Arc<tollgate_core::KnownKeys>>, ServeConfigError> {
    if let Some(tls) = &config.tls {
        serve::tls::ListenerTls::new(tls)?;
    }
    proxy::upstream_tls::client_config(&config.routes, &config.upstream_tls)?;
    config::load_known_keys(&config.keys)
}

/// Checks `config`'s `[store] url` (the command line's when given) as a
/// start reads it, without connecting: the start calls it too, so
/// `tollgate check-config` refuses exactly the URLs `tollgate serve` would.
/// `config_path` names the file in the error.
///
/// # Errors
///
/// [`StartError::StoreUrl`] for a URL that is not a Redis URL (neither it nor
/// the Redis client's text shown: either may hold a password).
pub fn check_store_url(
    config: &ServeConfig,
    config_path: Option<&std::path::Path>,
) -> Result<(), StartError> {
    match &config.store.url {
        Some(url) if tollgate_redis::check_url(url).is_err() => Err(StartError::StoreUrl {
            file: config_path.map(|path| path.display().to_string()),
        }),
        _ => Ok(()),
    }
}

/// The README's Rust examples, compiled and run as doctests.
#[cfg(doctest)]
#[doc = include_str!("../../../README.md")]
pub struct ReadmeDoctests;
