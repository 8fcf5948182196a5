#![doc = include_str!("../README.md")]
//!
//! # Example
//!
//! `examples/axum.rs`, with `examples/host.json` beside it:
//!
//! ```no_run
#![doc = include_str!("../examples/axum.rs")]
//! ```
#![forbid(unsafe_code)]

mod budget;
mod headers;
mod host;
mod key;
mod limits;
mod metrics;
mod problem;
mod rate_limit;

pub use budget::{Budget, BudgetError};
pub use headers::{HeaderTemplate, RATELIMIT, RATELIMIT_POLICY, RateLimitField, advertised_quota};
pub use host::{HostDefaults, HostDefaultsError};
pub use key::{
    ClientIpResolver, ForwardedHeader, KeyKind, KeySelector, PeerAddr, Principal, RequestParts,
    Tenant,
};
pub use limits::{RateLimits, RateLimitsBuilder};
pub use metrics::{DENIALS_METRIC, PLUGIN, record_denial};
pub use problem::{PROBLEM_JSON, Problem};
pub use rate_limit::{RateLimit, ResponseFuture, RouteLimit};
