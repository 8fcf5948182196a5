//! The rate limit configuration, as envoyproxy/ratelimit's `src/config`
//! package (config.go, config_impl.go) and its file provider handle it: the
//! YAML files found and watched ([`files`]), read with yaml.v2's rules
//! ([`yaml`], [`document`], [`validate`], [`loader`]), built into each
//! domain's tree of descriptors ([`tree`], its limits [`rate_limit`] with
//! their [`unit`], [`wildcard`] patterns and [`metadata`]), looked up as
//! `GetLimit` does ([`lookup`]) and dumped for `/rlconfig` ([`dump`]); the
//! errors worded as the Go service's ([`error`]) and the stats a configured
//! limit is counted under ([`stats`]).
//!
//! Everything here is read-only once loaded, and imports none of the
//! crate's other concerns: deciding a request is [`crate::service`]'s,
//! serving it [`crate::server`]'s, and reading the environment
//! [`crate::settings`]' (which builds the [`files::ConfigSource`] the
//! settings name).

pub(crate) mod document;
pub(crate) mod dump;
pub(crate) mod error;
pub(crate) mod files;
pub(crate) mod loader;
pub(crate) mod lookup;
pub(crate) mod metadata;
pub(crate) mod rate_limit;
pub(crate) mod stats;
pub(crate) mod tree;
pub(crate) mod unit;
pub(crate) mod validate;
pub(crate) mod wildcard;
pub(crate) mod yaml;
