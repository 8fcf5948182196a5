//! A redis-server of a test's own.

use std::time::Duration;

use super::keys::connect;

/// A redis-server of the test's own, without persistence, on a free port,
/// that the test can stop, start again and restart; stopped when dropped.
/// The place for tests that stop Redis, pause it or count its commands
/// (`INFO commandstats` counts for the whole server, so the shared one
/// would count other tests' calls too).
pub struct OwnRedis {
    /// The port it listens on, on 127.0.0.1.
    pub port: u16,
    child: Option<std::process::Child>,
}

impl OwnRedis {
    /// Starts one and waits until it answers. Panics, failing the test, when
    /// no port can be had or `redis-server` does not start.
    pub fn start() -> OwnRedis {
        let port = crate::loopback::free_port();
        let mut redis = OwnRedis { port, child: None };
        if let Err(error) = redis.run() {
            panic!(
                "cannot run redis-server on port {port}: {error} (the Redis tests that \
                 stop or count Redis start their own: install Debian's redis-server)"
            );
        }
        redis
    }

    /// `redis://127.0.0.1:PORT`.
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
