//! The service's own counters (envoyproxy/ratelimit's `ServiceStats` in
//! src/stats/manager_impl.go), full statsd names: configuration loads, calls
//! that failed, and tollgate's store-failure answers. A descriptor's counters
//! are named by the configuration ([`crate::LimitStatNames`]).

/// A configuration (re)load that succeeded.
pub const CONFIG_LOAD_SUCCESS: &str = "ratelimit.service.config_load_success";
/// A configuration (re)load that failed (the previous one stays in force).
pub const CONFIG_LOAD_ERROR: &str = "ratelimit.service.config_load_error";
/// An OVER_LIMIT answer turned into OK by the global `SHADOW_MODE`.
pub const GLOBAL_SHADOW_MODE: &str = "ratelimit.service.global_shadow_mode";
/// A call that failed because the store did (Go: a Redis error).
pub const REDIS_ERROR: &str = "ratelimit.service.call.should_rate_limit.redis_error";
/// A call refused by the service itself (empty domain, no descriptors, no
/// configuration).
pub const SERVICE_ERROR: &str = "ratelimit.service.call.should_rate_limit.service_error";
/// A store failure answered OK by `TOLLGATE_STORE_FAILURE=fail_open`
/// (tollgate's; also counted in [`REDIS_ERROR`]).
pub const STORE_FAILURE_FAIL_OPEN: &str = "ratelimit.service.store_failure.fail_open";
/// A store failure answered OVER_LIMIT by
/// `TOLLGATE_STORE_FAILURE=fail_closed` (tollgate's; also counted in
/// [`REDIS_ERROR`]).
pub const STORE_FAILURE_FAIL_CLOSED: &str = "ratelimit.service.store_failure.fail_closed";
