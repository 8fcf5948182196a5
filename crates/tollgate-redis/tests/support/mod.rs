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
    let client = redis::Client::open(url).unwrap();
    let mut connection = client.get_connection().unwrap();
    let keys: Vec<String> = redis::cmd("KEYS")
        .arg(format!("{prefix}:*"))
        .query(&mut connection)
        .unwrap();
    keys.into_iter()
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

/// Deletes every key under `prefix` (tests call it when done).
pub fn cleanup(url: &str, prefix: &str) {
    let client = redis::Client::open(url).unwrap();
    let mut connection = client.get_connection().unwrap();
    let keys: Vec<String> = redis::cmd("KEYS")
        .arg(format!("{prefix}:*"))
        .query(&mut connection)
        .unwrap();
    if !keys.is_empty() {
        let _: i64 = redis::cmd("DEL").arg(keys).query(&mut connection).unwrap();
    }
}
