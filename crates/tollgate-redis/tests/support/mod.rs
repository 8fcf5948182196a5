//! What the Redis tests share: finding the Redis they run against
//! (`REDIS_URL`, `REDIS_CLUSTER_URL`), a redis-server of a test's own
//! ([`OwnRedis`]), key prefixes and cleanup, counting script calls, and
//! waiting for a default policy to arrive.
//!
//! A Redis test carries
//! `#[cfg_attr(not(has_redis), ignore = "set REDIS_URL=redis://127.0.0.1:6379 to run")]`
//! (`has_redis_cluster` and `REDIS_CLUSTER_URL` for a cluster test): the
//! crate's build script sets the cfg when the variable is set, and always
//! under `CI=true`, so without a Redis the test shows as ignored, never as
//! passed. A test that runs calls [`require_redis_url`] (or
//! [`require_cluster_url`], [`OwnRedis::start`]), which fails it when its
//! peer is missing or does not answer. Tests that start a redis-server of
//! their own are Redis tests too: they run when `REDIS_URL` is set, and need
//! `redis-server` on the `PATH`.

#![allow(dead_code, unreachable_pub, missing_docs)]

use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

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

/// A key prefix of this test run alone.
pub fn prefix(test: &str) -> String {
    static RUN: AtomicUsize = AtomicUsize::new(0);
    format!(
        "tollgate-test-{}-{}-{test}",
        std::process::id(),
        RUN.fetch_add(1, Ordering::Relaxed)
    )
}

/// Every key under `prefix` with its TTL in milliseconds (-1: none).
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
    let nodes = if url.starts_with("redis-cluster://") {
        cluster_nodes(url)
    } else {
        vec![url.to_owned()]
    };
    nodes
        .iter()
        .flat_map(|node| keys_and_ttls(node, prefix))
        .filter(|(key, _)| key.contains(":{"))
        .collect()
}

/// A redis-server of the test's own, without persistence, on a free port,
/// that the test can stop, start again and restart; stopped when dropped.
/// The place for tests that stop Redis or count its commands (`INFO
/// commandstats` counts for the whole server, so the shared one would count
/// other tests' calls too).
pub struct OwnRedis {
    pub port: u16,
    child: Option<std::process::Child>,
}

impl OwnRedis {
    /// Starts one and waits until it answers. Panics, failing the test, when
    /// no port can be had or `redis-server` does not start.
    pub fn start() -> OwnRedis {
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .and_then(|listener| listener.local_addr())
            .unwrap_or_else(|error| panic!("no free local port for a redis-server: {error}"))
            .port();
        let mut redis = OwnRedis { port, child: None };
        if let Err(error) = redis.run() {
            panic!(
                "cannot run redis-server on port {port}: {error} (the Redis tests that \
                 stop or count Redis start their own: install Debian's redis-server)"
            );
        }
        redis
    }

    pub fn url(&self) -> String {
        format!("redis://127.0.0.1:{}", self.port)
    }

    /// Starts the server on its port and waits (at most 10 s) until it
    /// answers.
    pub fn run(&mut self) -> std::io::Result<()> {
        let mut child = std::process::Command::new("redis-server")
            .args([
                "--port",
                &self.port.to_string(),
                "--bind",
                "127.0.0.1",
                "--save",
                "",
                "--appendonly",
                "no",
            ])
            .stdout(std::process::Stdio::null())
            .spawn()?;
        for _ in 0..500 {
            if let Some(status) = child.try_wait()? {
                return Err(std::io::Error::other(format!(
                    "redis-server exited at start ({status})"
                )));
            }
            let ping = redis::Client::open(self.url().as_str())
                .and_then(|client| client.get_connection())
                .and_then(|mut connection| redis::cmd("PING").query::<String>(&mut connection));
            if ping.is_ok() {
                self.child = Some(child);
                return Ok(());
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        let _ = child.kill();
        let _ = child.wait();
        Err(std::io::Error::other(
            "redis-server did not answer within 10 s",
        ))
    }

    /// Kills the server (it keeps nothing).
    pub fn stop(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }

    /// Restarts the server as an operator would one without persistence:
    /// `SHUTDOWN NOSAVE`, then a new server on the same port, empty.
    pub fn restart(&mut self) {
        let mut connection = connect(&self.url());
        // The server closes the connection instead of answering.
        let _: redis::RedisResult<()> = redis::cmd("SHUTDOWN").arg("NOSAVE").query(&mut connection);
        if let Some(mut child) = self.child.take() {
            child.wait().expect("redis-server did not exit");
        }
        self.run().expect("redis-server did not start again");
    }
}

impl Drop for OwnRedis {
    fn drop(&mut self) {
        self.stop();
    }
}

/// How many script calls (`EVALSHA` and `EVAL`, answered or failed) the
/// server at `url` has run since it started or since [`reset_stats`], from
/// `INFO commandstats` (whose `cmdstat_NAME:calls=N,...` lines count for
/// the whole server).
pub fn script_calls(url: &str) -> u64 {
    let info: String = redis::cmd("INFO")
        .arg("commandstats")
        .query(&mut connect(url))
        .unwrap();
    let count = |name: &str| -> u64 {
        let line = format!("cmdstat_{name}:");
        info.lines()
            .find_map(|row| row.strip_prefix(line.as_str()))
            .map(|fields| {
                let field = |key: &str| -> u64 {
                    fields
                        .split(',')
                        .find_map(|pair| pair.strip_prefix(key))
                        .map_or(0, |value| value.parse().unwrap())
                };
                // Calls Redis refused before running them count apart.
                field("calls=") + field("rejected_calls=")
            })
            .unwrap_or(0)
    };
    count("evalsha") + count("eval")
}

/// Zeroes the server's command statistics (`CONFIG RESETSTAT`).
pub fn reset_stats(url: &str) {
    let _: () = redis::cmd("CONFIG")
        .arg("RESETSTAT")
        .query(&mut connect(url))
        .unwrap();
}

/// Deletes every key under `prefix` (tests call it when done), on a Redis
/// server or on every node of a `redis-cluster://` URL.
pub fn cleanup(url: &str, prefix: &str) {
    let nodes = if url.starts_with("redis-cluster://") {
        cluster_nodes(url)
    } else {
        vec![url.to_owned()]
    };
    for node in nodes {
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

/// Settings under which a store learns of a new default policy only by a
/// message on its channel (or by subscribing again after a failure): the
/// re-read after a silence waits an hour, longer than any test.
pub fn by_message_only(config: &mut tollgate_redis::RedisConfig) {
    config.policy_reread_after = Duration::from_secs(3600);
}

/// Waits until `store` has `policy` as its default policy, at most 30 s; what
/// it has at the end. Give the store [`by_message_only`] settings, so that
/// what arrives came by message (or by subscribing), never by a re-read
/// however slow the machine.
pub async fn wait_for_default_policy(
    store: &impl tollgate_core::Store,
    policy: tollgate_core::Policy,
) -> tollgate_core::Policy {
    let mut seen = store.default_policy().await.unwrap();
    for _ in 0..3000 {
        if seen == policy {
            break;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
        seen = store.default_policy().await.unwrap();
    }
    seen
}
