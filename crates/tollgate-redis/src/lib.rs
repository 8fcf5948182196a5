//! The Redis store of tollgate: limits shared by every gateway process pointed
//! at one Redis, decided inside Redis by Lua scripts that perform the engine's
//! exact transitions (fixed window, counting refused units or not, sliding
//! log, token bucket; one Lua file each), atomically and in one round trip,
//! each limit of a request with its own units by core's rule
//! (`Limiter::acquire_units`). On a Redis Cluster, a request whose limits sit
//! in different slots (a plan and a route budget) takes a few round trips
//! instead, still keeping that rule (see `RedisStore`).
//!
//! ```no_run
//! use tollgate_core::{LimiterConfig, Limit, Store};
//! use tollgate_redis::{RedisConfig, RedisStore};
//!
//! # async fn example() -> Result<(), Box<dyn std::error::Error>> {
//! let store = RedisStore::connect(RedisConfig::new("redis://127.0.0.1:6379"), &LimiterConfig::default())?;
//! let decisions = store.acquire(&[Limit::Plan("sk_a")]).await?;
//! assert!(decisions[0].decision.is_allowed());
//! # Ok(())
//! # }
//! ```
//!
//! Numbers in Redis's Lua are doubles, exact up to 2^53: the store computes in
//! microseconds and refuses policies whose quantities could go beyond 2^52
//! (windows over 142 years, limits over 4.5 × 10^15, token buckets whose
//! burst × window in microseconds is that large) with
//! [`PolicyError::Unsupported`](tollgate_core::PolicyError). Within that range
//! it decides exactly what the in-memory gateway decides, one server or a
//! cluster, except that on a cluster a request whose limits sit in different
//! slots can be refused near a limit while another request briefly holds
//! units it then gives back.

#![forbid(unsafe_code)]

mod admin;
mod batch;
mod batchers;
mod ca_file;
#[cfg(test)]
mod calendar_boundaries;
mod call;
mod config;
mod connection;
mod context;
mod count;
mod give_back;
mod keys;
mod plans;
mod policy_sync;
mod protocol;
mod reach;
mod records;
mod redaction;
mod refund;
mod reserve;
mod script;
mod script_limits;
mod sentinel;
mod slots;
mod split;
mod store;

pub use config::{RedisConfig, TimeSource};
pub use connection::check_url;
pub use give_back::overdraw_is_exact;
pub use policy_sync::shared_default_policy;
pub use records::RedisRecords;
pub use redaction::{UNREADABLE_URL, redacted_url};
pub use slots::RedisSlots;
pub use store::{RedisStore, RedisStoreError};
