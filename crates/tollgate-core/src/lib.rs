//! The tollgate limiting engine: exact fixed window, sliding log and token bucket
//! over per-key state, the in-memory [`Limiter`] with tiers, exempt keys and idle
//! eviction, and the JSON operations [`Harness`] behind `tollgate run`.
//!
//! ```
//! use tollgate_core::{Limiter, LimiterConfig, Policy, Resolution};
//!
//! // The built-in defaults: 5 requests per 60 s window, tiers `pro` and
//! // `enterprise`, `sk_internal` exempt. Time is in seconds here.
//! let limiter = Limiter::new(&LimiterConfig::default(), Resolution::Seconds).unwrap();
//! for _ in 0..5 {
//!     assert!(limiter.request("sk_a", 600).is_allowed());
//! }
//! let denied = limiter.request("sk_a", 601);
//! assert!(!denied.is_allowed());
//! assert_eq!(denied.retry_after_seconds(), 59); // the window [600, 660) ends in 59 s
//!
//! // A token bucket of 5 tokens refilled at 1 token per second.
//! limiter.configure(Policy::token_bucket(60, 60, 5).unwrap()).unwrap();
//! let batch = limiter.request_batch("sk_b", 700, 1_000_000_000_000_000.try_into().unwrap());
//! assert_eq!((batch.allowed, batch.remaining), (5, Some(0)));
//! assert_eq!(batch.retry_after_seconds(), 1);
//! ```
//!
//! Every decision is integer arithmetic: no floating point, no overflow for any
//! value up to 2^63-1, and a batch costs the same whatever its size. For a server,
//! build the limiter with [`Resolution::Nanoseconds`] and take `now` from a
//! [`Clock`]: [`SystemClock`] in production, [`ManualClock`] in tests.

#![forbid(unsafe_code)]

mod algorithm;
mod calendar;
mod caller;
mod clock;
mod config;
mod decision;
mod failure_policy;
mod fingerprint;
mod harness;
mod heavy_hitters;
mod in_flight;
mod key;
mod known_keys;
mod limiter;
mod plan;
mod policy;
mod quota_assignment;
mod quota_demand;
mod quota_split;
mod quota_window;
mod ratelimit_fields;
mod reach;
mod resolution;
mod route_budget;
mod store;
mod tier_defaults;
mod toml_text;
mod usage_charge;

pub use calendar::{CALENDAR_LAST_BOUNDARY_S, Calendar, CalendarError, CalendarPeriod};
pub use caller::{ApiKeyRequirement, Caller, CallerRefusal, KEYLESS, KeyRules, Keyless};
pub use clock::{Clock, DurationParseError, ManualClock, Stopwatch, SystemClock};
pub use config::{
    ConfigError, DEFAULT_IDLE_EVICTION_S, DEFAULT_MAX_TRACKED_KEYS, DEFAULT_TIER, LimiterConfig,
    describe_toml_error, parse_toml, parse_toml_with,
};
pub use decision::Decision;
pub use failure_policy::FailurePolicy;
pub use fingerprint::{Fingerprint, Fingerprinter, KeySpace, key_digest};
pub use harness::{Harness, InputError, Output};
pub use heavy_hitters::{Counted, HeavyHitters};
pub use in_flight::{MAX_IN_FLIGHT, MemorySlots, SlotLease, SlotStore, in_flight_kind};
pub use key::{ApiKey, Redacted};
pub use known_keys::{KnownKeys, KnownKeysError, MAX_KNOWN_KEY_LENGTH, UnknownKeys};
pub use limiter::{
    Limit, LimitDecision, LimitUnits, Limiter, PolicyDecision, PolicyReport, PreparedPolicy,
    Reservation, Stats, UnknownTier,
};
pub use plan::{
    MAX_PLAN_POLICIES, MAX_POLICY_NAME, NamedPolicy, PlanError, PlanPolicies, PolicyList,
};
pub use policy::{Algorithm, MAX_VALUE, Policy, PolicyError, PolicyField};
pub use quota_assignment::{QuotaAssignment, QuotaRate};
pub use quota_demand::{
    BucketReport, FIRST_REPORT_SPAN_NS, KEEP_WITHIN, QuotaDemand, SHORTEST_SPAN_NS, StreamRecord,
    stale_after_ns,
};
pub use quota_split::{MAX_DEMAND, split_by_demand};
pub use quota_window::{
    COUNTED_WINDOW_S, LENDING_HORIZON_S, WindowCount, admitted_at_part, unreported,
};
pub use ratelimit_fields::{
    RateLimitItem, advertised_quota, push_structured_string, rate_limit_fields,
};
pub use reach::Reach;
pub use resolution::Resolution;
pub use route_budget::{
    MAX_COST, RouteBudgetChoice, RouteBudgets, RouteKeyKind, route_store_key,
    route_store_key_prefix,
};
pub use store::{KeyReport, MemoryStore, Store, StoreError, StoreFuture};
pub use tier_defaults::{MAX_DELAY, MaxWait, TierDefaults};
pub use usage_charge::{
    MAX_CHARGE, Settled, Settlement, UsageReport, apply_settlement, settle_usage,
};
