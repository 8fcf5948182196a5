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

mod access_log;
mod admin;
mod admin_guard;
mod admin_route_budget;
mod admission;
mod api_key;
mod app;
mod body_timeout;
mod client;
mod client_body;
pub mod config;
mod demo;
mod error;
mod forward_auth;
mod forward_auth_endpoint;
mod hop_by_hop;
mod listener;
mod metrics;
mod path;
mod problem;
mod proxy;
mod rate_limit_headers;
mod reload;
mod reloadable;
mod routes;
mod servers;
mod shadow;
mod start;
mod store;
mod tls;
mod upgrade;
mod upstream;
mod upstream_health;
mod upstream_tls;
mod workers;

pub use config::{ServeConfig, ServeConfigError};
pub use error::StartError;
pub use start::{Running, ServeOptions, run, start};

/// Reads the files `config` names as a start would, without starting: the
/// listener's certificate and key (`[tls]`, the key checked against the
/// certificate) and the roots of `https://` upstreams (`[upstream_tls]`), for
/// `tollgate check-config`.
///
/// # Errors
///
/// [`ServeConfigError::Invalid`] naming the setting and the file, as a start
/// would refuse it.
pub fn check_files(config: &ServeConfig) -> Result<(), ServeConfigError> {
    if let Some(tls) = &config.tls {
        tls::ListenerTls::new(tls)?;
    }
    upstream_tls::client_config(&config.routes, &config.upstream_tls)?;
    Ok(())
}

/// The README's Rust examples, compiled and run as doctests.
#[cfg(doctest)]
#[doc = include_str!("../../../README.md")]
pub struct ReadmeDoctests;
