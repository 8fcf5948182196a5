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

/// What `tollgate check-config --store` says of the default policy with a
/// Redis store: the one Redis shares wins over the file's (a gateway puts
/// the file's in Redis only when Redis holds none), so it reads Redis's
/// and says which is in force. `None` without `[store] url`. Never shows
/// the URL's credentials or the client's text.
pub async fn default_policy_in_force(config: &ServeConfig) -> Option<String> {
    let url = config.store.url.as_deref()?;
    let shown = tollgate_redis::redacted_url(url);
    let file = config::describe_plan(&config.limits.default_plan());
    let timeout = config.store.timeout.max(std::time::Duration::from_secs(2));
    Some(
        match tollgate_redis::shared_default_policy(
            url,
            &config.store.prefix,
            timeout,
            config.store.ca_file.as_deref(),
        )
        .await
        {
            Ok(Some(shared)) if shared == config.limits.default_plan() => {
                format!("default policy in force: this file's, as Redis ({shown}) shares it")
            }
            Ok(Some(shared)) => format!(
                "default policy in force: Redis's ({shown}, prefix {}): {}; this file's ({file}) \
                 is not applied: PUT /admin/policy puts a policy in force on every gateway",
                config.store.prefix,
                config::describe_plan(&shared)
            ),
            Ok(None) => format!(
                "default policy in force: this file's, which the first gateway to start puts in \
                 Redis ({shown} holds none yet)"
            ),
            Err(_) => format!(
                "default policy in force: not known, Redis ({shown}) did not answer: Redis's \
                 shared policy wins over this file's once one is there"
            ),
        },
    )
}

/// The README's Rust examples, compiled and run as doctests.
#[cfg(doctest)]
#[doc = include_str!("../../../README.md")]
pub struct ReadmeDoctests;
