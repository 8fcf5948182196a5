//! `tollgate rlqs`: Envoy's Rate Limit Quota Service
//! (`envoy.service.rate_limit_quota.v3.RateLimitQuotaService/StreamRateLimitQuotas`),
//! used through Envoy's `envoy.filters.http.rate_limit_quota` filter. Each
//! Envoy enforces its assignment locally and reports, per bucket, what it
//! allowed and denied; the server splits each bucket's one limit among the
//! Envoys by their demand and answers with token-bucket assignments. No
//! request waits for the server.
//!
//! The limits come from `tollgate rls`'s YAML (envoyproxy/ratelimit's
//! format): the filter's `domain` is the YAML's `domain`, and a bucket's
//! entries are looked up as one descriptor ([`bucket`] gives the order).
//! The rules of sharing are `tollgate-core`'s (`QuotaDemand`, `QuotaRate`,
//! `split_by_demand`); this crate keeps their state ([`allocator`]) and
//! speaks the protocol:
//!
//! - [`bucket`]: a `BucketId` as a descriptor's entries, and its bounds;
//! - [`limit`]: a bucket's limit in the YAML;
//! - [`allocator`]: every bucket, its streams and their assignments;
//! - [`quotas`]: the allocator shared by the streams, and their queues;
//! - [`convert`]: the protocol's messages;
//! - [`service`]: the gRPC service;
//! - [`server`]: the listeners; [`debug`]: the debug pages;
//! - [`shared`]: each bucket's streams kept in Redis, for replicas;
//! - [`settings`]: the flags; [`run`]: the command as a whole.
//!
//! docs/RLQS.md says what Envoy 1.40's filter really does, and the
//! guarantee the sharing keeps.

#![forbid(unsafe_code)]

pub mod allocator;
pub mod bucket;
pub mod convert;
pub mod debug;
pub mod limit;
pub mod quotas;
pub mod run;
pub mod server;
pub mod service;
pub mod settings;
pub mod shared;

pub use run::{Rlqs, RlqsError, serve};
pub use settings::RlqsArguments;
