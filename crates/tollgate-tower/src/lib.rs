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
mod header_fields;
mod host;
mod host_limits;
mod in_flight;
mod key;
mod metrics;
mod problem;
mod route_limit;
mod usage_body;

pub use budget::{Budget, BudgetError, BudgetFields};
pub use header_fields::{
    HeaderTemplate, RATELIMIT, RATELIMIT_POLICY, RateLimitField, advertised_quota,
};
pub use host::{HostDefaults, HostDefaultsError};
pub use host_limits::{HostLimits, HostLimitsBuilder};
pub use in_flight::{InFlightBody, InFlightLimit, InFlightLimitLayer, InFlightResponse};
pub use key::{
    ClientIpResolver, ForwardedHeader, KeySelector, PeerAddr, Principal, RequestParts, Tenant,
};
pub use metrics::{
    DELAYED_METRIC, DENIALS_METRIC, PLUGIN, SHADOW_DENIALS_METRIC, STORE_FAILURES_METRIC,
    describe_metrics, record_delayed, record_denial, record_shadow_denial, record_store_failure,
};
pub use problem::{PROBLEM_JSON, Problem};
pub use route_limit::{
    ChargeError, CostError, DEFAULT_MAX_WAITING, DelayError, MAX_DELAY, ResponseFuture, RouteLimit,
    RouteLimitLayer,
};
pub use tollgate_core::FailurePolicy;
pub use tollgate_core::{KnownKeys, MAX_COST, MemorySlots, SlotStore, UnknownKeys};
pub use tollgate_core::{RouteKeyKind, Store};
pub use usage_body::{
    Settle, SettledTrailers, UsageBody, accepts_trailers, can_send_trailers, read_usage,
    settle_in_background, status_has_body,
};
