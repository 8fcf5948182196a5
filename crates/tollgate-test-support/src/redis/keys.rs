//! Key prefixes of a test's own, the keys under them, and their cleanup.

use std::sync::atomic::{AtomicUsize, Ordering};

use super::servers;

/// A key prefix of this test run alone: `tollgate-test-PID-N-test`.
pub fn prefix(test: &str) -> String {
    static RUN: AtomicUsize = AtomicUsize::new(0);
    format!(
        "tollgate-test-{}-{}-{test}",
        std::process::id(),
        RUN.fetch_add(1, Ordering::Relaxed)
    )
}

/// Every key under `prefix` with its TTL in milliseconds (-1: none), on the
/// server (or cluster node) at `url`.
pub fn keys_and_ttls(url: &str, prefix: &str) -> Vec<(String, i64)> {
    let mut connection = connect(url);
    keys(url, &format!("{prefix}:*"))
        .into_iter()
        .map(|key| {
            let ttl: i64 = redis::cmd("PTTL").arg(&key).query(&mut connection).unwrap();
            (key, ttl)
        })
        .collect()
}

/// Every key of a limited key under `prefix` (not the store's shared
/// `config`) with its TTL (ms), on a server or on every node of a cluster.
pub fn state_keys_and_ttls(url: &str, prefix: &str) -> Vec<(String, i64)> {
    servers(url)
        .iter()
        .flat_map(|node| keys_and_ttls(node, prefix))
        .filter(|(key, _)| key.contains(":{"))
        .collect()
}

/// Deletes every key under `prefix` (tests call it when done), on a Redis
/// server or on every node of a `redis-cluster://` URL.
pub fn cleanup(url: &str, prefix: &str) {
    for node in servers(url) {
        let mut connection = connect(&node);
        // One DEL per key: on a cluster node keys of several slots cannot go
        // in one command.
        for key in keys(&node, &format!("{prefix}:*")) {
            let _: i64 = redis::cmd("DEL").arg(key).query(&mut connection).unwrap();
        }
    }
}

/// A connection to the Redis server (or cluster node) at `url`.
pub fn connect(url: &str) -> redis::Connection {
    redis::Client::open(url).unwrap().get_connection().unwrap()
}

/// The keys matching the glob `pattern` on the server (or node) at `url`.
pub fn keys(url: &str, pattern: &str) -> Vec<String> {
    redis::cmd("KEYS")
        .arg(pattern)
        .query(&mut connect(url))
        .unwrap()
}
