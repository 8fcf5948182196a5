//! The Redis a test runs against: the shared one (`REDIS_URL`), a Redis
//! Cluster (`REDIS_CLUSTER_URL`) or a redis-server of the test's own
//! ([`OwnRedis`]); key prefixes of a test's own and their cleanup
//! ([`prefix`], [`cleanup`]); a test's store settings ([`on_manual_clock`],
//! [`by_message_only`]); counting script calls ([`script_calls`]); a
//! Redis that stalls ([`Stalled`]); and a Sentinel deployment of a
//! primary, its replica and three sentinels ([`Sentinels`]).
//!
//! A Redis test carries
//! `#[cfg_attr(not(has_redis), ignore = "set REDIS_URL=redis://127.0.0.1:6379 to run")]`
//! (`has_redis_cluster` and `REDIS_CLUSTER_URL` for a cluster test): its
//! package's build script sets the cfg when the variable is set, and always
//! under `CI=true` (`crates/tollgate-redis/build/redis_peers.rs`), so without
//! a Redis the test shows as ignored, never as passed. A test that runs calls
//! [`require_redis_url`] (or [`require_cluster_url`], [`OwnRedis::start`]),
//! which fails it when its peer is missing or does not answer. Tests that
//! start a redis-server of their own are Redis tests too: they run when
//! `REDIS_URL` is set, and need `redis-server` on the `PATH`.

mod keys;
mod own;
mod sentinel;
mod stall;
mod stats;
mod store;

use std::time::Duration;

pub use keys::{cleanup, connect, keys, keys_and_ttls, prefix, state_keys_and_ttls};
pub use own::OwnRedis;
pub use sentinel::{MASTER, Sentinels, query, query_as, wait_until};
pub use stall::{Stalled, process_id, wait_for_the_backlog};
pub use stats::{reset_stats, script_calls};
pub use store::{by_message_only, on_manual_clock, wait_for_default_policy};

/// The Redis URL of a test that runs (`REDIS_URL`). Panics, failing the
/// test, when it is not set or Redis does not answer a `PING` within 2 s.
pub fn require_redis_url() -> String {
    let url = std::env::var("REDIS_URL")
        .ok()
        .filter(|url| !url.is_empty())
        .unwrap_or_else(|| {
            panic!(
                "REDIS_URL is not set: under CI=true the Redis tests need a Redis \
                 (.ci/run starts one; for example REDIS_URL=redis://127.0.0.1:6379)"
            )
        });
    let reachable = redis::Client::open(url.as_str())
        .and_then(|client| client.get_connection_with_timeout(Duration::from_secs(2)))
        .and_then(|mut connection| redis::cmd("PING").query::<String>(&mut connection));
    if let Err(error) = reachable {
        panic!("the Redis at REDIS_URL={url} does not answer: {error}");
    }
    url
}

/// The Redis Cluster URL (`redis-cluster://host:port,...`) of a cluster test
/// that runs (`REDIS_CLUSTER_URL`). Panics, failing the test, when it is not
/// set or its first node does not report `cluster_state:ok`.
pub fn require_cluster_url() -> String {
    let url = std::env::var("REDIS_CLUSTER_URL")
        .ok()
        .filter(|url| !url.is_empty())
        .unwrap_or_else(|| {
            panic!(
                "REDIS_CLUSTER_URL is not set: under CI=true the Redis Cluster tests need \
                 a cluster (`.ci/redis-cluster start DIR` starts one and prints its URL)"
            )
        });
    let info = cluster_nodes(&url).first().map(|node| {
        redis::Client::open(node.as_str())
            .and_then(|client| client.get_connection_with_timeout(Duration::from_secs(2)))
            .and_then(|mut connection| {
                redis::cmd("CLUSTER")
                    .arg("INFO")
                    .query::<String>(&mut connection)
            })
    });
    match info {
        Some(Ok(info)) if info.contains("cluster_state:ok") => url,
        other => panic!("the Redis Cluster at REDIS_CLUSTER_URL={url} is not usable: {other:?}"),
    }
}

/// The `redis://` URLs of the nodes of a `redis-cluster://` URL.
pub fn cluster_nodes(url: &str) -> Vec<String> {
    url.trim_start_matches("redis-cluster://")
        .split(',')
        .map(|node| format!("redis://{}", node.trim()))
        .collect()
}

/// The servers of `url`: every node of a `redis-cluster://` URL, else the
/// one server.
fn servers(url: &str) -> Vec<String> {
    if url.starts_with("redis-cluster://") {
        cluster_nodes(url)
    } else {
        vec![url.to_owned()]
    }
}
