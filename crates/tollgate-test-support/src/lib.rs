//! What tollgate's tests share, one module per concern. A dev-dependency
//! only: no crate's `src/` uses it, and it is never published.
//!
//! Each module that needs more than the standard library is behind a
//! feature of its name, so that a package's tests build only what they use:
//!
//! - `models` (feature `models`): the reference models of the three
//!   algorithms, written independently of the engine, for the property
//!   tests of the in-memory limiter and of the Redis store.
//! - `redis` (`redis`): the Redis a test runs against, a redis-server of a
//!   test's own, key prefixes and their cleanup, a Redis that stalls, a test
//!   store's settings.
//! - `envoy` (`envoy`): finding and starting an Envoy in front of a test
//!   upstream, its rate limit filter asking a `tollgate rls`; `envoy_quota`
//!   (`envoy`): Envoys whose rate limit quota filter asks a `tollgate rlqs`,
//!   and a load client at a fixed rate.
//! - `loopback`: a free port on 127.0.0.1; with the feature `loopback`, a
//!   test upstream there.
//! - `websocket` (`websocket`): a WebSocket upstream and client.
//! - `exposition`: the Prometheus text of a `/metrics` read into samples.
//! - `grafana` (`grafana`): the metric names a Grafana dashboard queries.
//! - `gateway` (`gateway`): a gateway started in process on a manual clock.
//! - `rls` (`rls`): `tollgate rls` started in process on loopback.
//! - `rlqs` (`rlqs`): `tollgate rlqs` started in process on loopback.
//! - `wait` (`wait`, and with `redis` or `loopback`): waiting until a
//!   condition holds, polled every 10 ms for at most 10 s.
//! - `conformance` (`rls`): the envoyproxy/ratelimit conformance cases
//!   (`tests/conformance/envoy-rls/`), each file's count of cases pinned.
//!
//! # Tests that need a peer
//!
//! A test that needs a peer (Redis, a Redis Cluster, Envoy, nginx, Caddy)
//! fails under `CI=true` when the peer cannot be had, and elsewhere is
//! skipped with a message saying how to run it: it carries
//! `#[cfg_attr(not(has_redis), ignore = "set REDIS_URL=redis://127.0.0.1:6379 to run")]`
//! (`has_redis_cluster`, `has_envoy`, ...), a cfg its package's build script
//! sets when the peer is named (`REDIS_URL`, `REDIS_CLUSTER_URL`, `ENVOY` or
//! an `envoy` on the `PATH`) and always under `CI=true`, so that a test that
//! cannot run shows as ignored, never as passed. A test that runs asks for
//! its peer here (`redis::require_redis_url`, `envoy::envoy_binary`,
//! ...), which fails it when the peer is missing or does not answer.

#[cfg(feature = "rls")]
pub mod conformance;
#[cfg(feature = "envoy")]
pub mod envoy;
#[cfg(feature = "envoy")]
pub mod envoy_quota;
pub mod exposition;
#[cfg(feature = "gateway")]
pub mod gateway;
#[cfg(feature = "grafana")]
pub mod grafana;
pub mod loopback;
#[cfg(feature = "models")]
pub mod models;
#[cfg(feature = "redis")]
pub mod redis;
#[cfg(feature = "rlqs")]
pub mod rlqs;
#[cfg(feature = "rls")]
pub mod rls;
#[cfg(feature = "wait")]
pub mod wait;
#[cfg(feature = "websocket")]
pub mod websocket;
