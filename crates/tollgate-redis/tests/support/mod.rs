//! Finding the Redis the tests run against: `REDIS_URL`. Under `CI=true` a
//! missing or unreachable Redis fails the tests; elsewhere they are skipped
//! with a message saying how to run them.

#![allow(dead_code, unreachable_pub, missing_docs)]

use std::sync::atomic::{AtomicUsize, Ordering};

/// The Redis URL, or `None` (after saying why) when the tests are skipped.
pub fn redis_url() -> Option<String> {
    let in_ci = std::env::var("CI").is_ok_and(|value| value == "true");
    let url = match std::env::var("REDIS_URL") {
        Ok(url) if !url.is_empty() => url,
        _ if in_ci => panic!("REDIS_URL is not set: CI must provide a Redis (see .ci/run)"),
        _ => {
            eprintln!(
                "skipped: set REDIS_URL (for example REDIS_URL=redis://127.0.0.1:6379) to run \
                 the Redis tests; .ci/run starts a redis-server and sets it"
            );
            return None;
        }
    };
    let reachable = redis::Client::open(url.as_str())
        .and_then(|client| client.get_connection_with_timeout(std::time::Duration::from_secs(2)))
        .and_then(|mut connection| redis::cmd("PING").query::<String>(&mut connection));
    match reachable {
        Ok(_) => Some(url),
        Err(error) if in_ci => panic!("Redis at {url} is unreachable: {error}"),
        Err(error) => {
            eprintln!("skipped: Redis at {url} is unreachable ({error})");
            None
        }
    }
}

/// The Redis Cluster URL (`redis-cluster://host:port,...`) from
/// `REDIS_CLUSTER_URL`, or `None` (after saying why) when the cluster tests are
/// skipped; under `CI=true` a missing or unreachable cluster fails them.
pub fn redis_cluster_url() -> Option<String> {
    let in_ci = std::env::var("CI").is_ok_and(|value| value == "true");
    let url = match std::env::var("REDIS_CLUSTER_URL") {
        Ok(url) if !url.is_empty() => url,
        _ if in_ci => {
            panic!("REDIS_CLUSTER_URL is not set: CI must provide a Redis Cluster (see .ci/run)")
        }
        _ => {
            eprintln!(
                "skipped: set REDIS_CLUSTER_URL to run the Redis Cluster tests; \
                 `.ci/redis-cluster start DIR` starts a local cluster and prints it"
            );
            return None;
        }
    };
    let reachable = cluster_nodes(&url).first().map(|node| {
        redis::Client::open(node.as_str())
            .and_then(|client| {
                client.get_connection_with_timeout(std::time::Duration::from_secs(2))
            })
            .and_then(|mut connection| {
                redis::cmd("CLUSTER")
                    .arg("INFO")
                    .query::<String>(&mut connection)
            })
    });
    match reachable {
        Some(Ok(info)) if info.contains("cluster_state:ok") => Some(url),
        other if in_ci => panic!("the Redis Cluster at {url} is not usable: {other:?}"),
        other => {
            eprintln!("skipped: the Redis Cluster at {url} is not usable ({other:?})");
            None
        }
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

/// A redis-server of the test's own, on a free port, that the test can stop
/// and start again. `None` (after saying why) when no redis-server can be run
/// outside CI.
pub struct OwnRedis {
    pub port: u16,
    child: Option<std::process::Child>,
}

impl OwnRedis {
    pub fn start() -> Option<OwnRedis> {
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .ok()?
            .local_addr()
            .ok()?
            .port();
        let mut redis = OwnRedis { port, child: None };
        match redis.run() {
            Ok(()) => Some(redis),
            Err(error) if std::env::var("CI").is_ok_and(|value| value == "true") => {
                panic!("cannot run redis-server: {error}")
            }
            Err(error) => {
                eprintln!(
                    "skipped: cannot run redis-server ({error}); install Debian's redis-server"
                );
                None
            }
        }
    }

    pub fn url(&self) -> String {
        format!("redis://127.0.0.1:{}", self.port)
    }

    /// Starts the server and waits until it answers.
    pub fn run(&mut self) -> std::io::Result<()> {
        let child = std::process::Command::new("redis-server")
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
        self.child = Some(child);
        for _ in 0..200 {
            let ping = redis::Client::open(self.url().as_str())
                .and_then(|client| client.get_connection())
                .and_then(|mut connection| redis::cmd("PING").query::<String>(&mut connection));
            if ping.is_ok() {
                return Ok(());
            }
            std::thread::sleep(std::time::Duration::from_millis(20));
        }
        Err(std::io::Error::other("redis-server did not answer"))
    }

    pub fn stop(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}

impl Drop for OwnRedis {
    fn drop(&mut self) {
        self.stop();
    }
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

/// Waits until `store` has `policy` as its default policy, at most four
/// seconds; what it has at the end. A change made through another store
/// travels through a Redis channel within milliseconds; the wait stays under
/// the store's five-second re-read, so a message that does not arrive fails
/// the test rather than being made up for by the re-read.
pub async fn wait_for_default_policy(
    store: &impl tollgate_core::Store,
    policy: tollgate_core::Policy,
) -> tollgate_core::Policy {
    wait_for_default_policy_within(store, policy, 4).await
}

/// Waits until `store` has `policy` as its default policy, at most `seconds`;
/// what it has at the end.
pub async fn wait_for_default_policy_within(
    store: &impl tollgate_core::Store,
    policy: tollgate_core::Policy,
    seconds: u64,
) -> tollgate_core::Policy {
    let mut seen = store.default_policy().await.unwrap();
    for _ in 0..seconds * 100 {
        if seen == policy {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(10)).await;
        seen = store.default_policy().await.unwrap();
    }
    seen
}
