//! tollgate's replacement for Envoy's rate limit service, envoyproxy/ratelimit:
//! its YAML configuration, read with the Go service's rules and errors, and the
//! descriptor lookup (`GetLimit`) with its stats keys; the service on top
//! ([`RateLimitService`]: `ShouldRateLimit` on a tollgate store), the
//! protocol's messages in proto3 JSON ([`proto`]) and the step harness behind
//! `tollgate rls run` ([`harness`]).
//!
//! ```
//! use tollgate_rls::{LoaderOptions, MemoryStats, RateLimitConfig, Unit};
//!
//! let yaml = "
//! domain: edge
//! descriptors:
//!   - key: remote_address
//!     rate_limit: {unit: minute, requests_per_unit: 60}
//! ";
//! let config = RateLimitConfig::from_sources(&[("edge.yaml", yaml)], &LoaderOptions::default())
//!     .unwrap();
//! let stats = MemoryStats::new();
//! let found = config
//!     .get_limit("edge", &[("remote_address", "10.0.0.1")], None, &stats)
//!     .unwrap();
//! assert_eq!((found.limit.requests_per_unit, found.limit.unit), (60, Unit::Minute));
//! assert_eq!(&*found.stats_key, "edge.remote_address");
//! assert!(config.get_limit("other", &[("a", "b")], None, &stats).is_none());
//! assert_eq!(stats.get("ratelimit.service.rate_limit.other.domain_not_found"), 1);
//! ```
//!
//! The Go service reads YAML with gopkg.in/yaml.v2 (YAML 1.1: `yes` is a
//! boolean, `010` is 8, a scalar goes into a string field as its source text);
//! this crate parses with serde_yaml_ng and resolves scalars itself with
//! yaml.v2's rules, so files mean what they mean to the Go service.
//!
//! The crate is laid out by concern, as envoyproxy/ratelimit's `src/` is:
//! `config/` loads, checks, looks up and dumps the YAML configuration;
//! `service/` decides a request (`ShouldRateLimit` on a tollgate store, and
//! the step harness); [`server`] serves it over gRPC and HTTP; [`settings`]
//! reads the Go service's environment variables and flags; [`proto`] holds
//! the protocol's messages every one of them speaks.

#![forbid(unsafe_code)]

mod config;
pub mod proto;
pub mod server;
mod service;
pub mod settings;

pub use config::error::{ConfigError, ConfigErrorKind};
pub use config::files::{
    ConfigDirError, ConfigFile, ConfigFiles, ConfigSource, MAX_CONFIG_FILE_BYTES, POLL_INTERVAL,
    ReloadCounters, ReloadTarget, watch as watch_config,
};
pub use config::loader::{LoaderOptions, ParsedFile};
pub use config::lookup::{DescriptorEntry, MatchedLimit};
pub use config::metadata::{Metadata, MetadataValue, metadata_to_json};
pub use config::rate_limit::{Enforcement, LimitOverride, RateLimit};
pub use config::stats::{
    LimitStatNames, MemoryStats, NoStats, RATE_LIMIT_SCOPE, StatsSink, domain_not_found_stat,
    sanitize_stat_name,
};
pub use config::tree::RateLimitConfig;
pub use config::unit::Unit;
pub use server::{Rls, RlsError, serve};
pub use service::harness;
pub use service::service_stats;
pub use service::{Extensions, RateLimitService, ServiceError, ServiceSettings};
pub use settings::RlsArguments;
