//! A Redis Sentinel deployment on loopback ([`Sentinels`]): Debian's
//! redis-server as a primary and its replica, each in a directory of its
//! own, and three sentinels (`redis-server --sentinel`) monitoring them as
//! [`MASTER`], a quorum of two. Its processes are killed when it is
//! dropped. Used by the store's failover test and by the gateway's and
//! `tollgate rls`'s.

use std::process::{Child, Command, Stdio};
use std::time::Duration;

/// The name the sentinels know the primary by.
pub const MASTER: &str = "tollgate-test";

/// A primary, its replica and three sentinels on loopback.
pub struct Sentinels {
    /// The first primary's port (a replica after a failover).
    pub primary: u16,
    /// Its replica's port (the primary after a failover).
    pub replica: u16,
    /// The sentinels' ports.
    pub sentinels: [u16; 3],
    processes: Vec<(u16, Child)>,
    directory: tempfile::TempDir,
    /// The primary's and replica's password (`requirepass`), if any.
    password: Option<String>,
    /// The sentinels' own password (`requirepass`), if any.
    sentinel_password: Option<String>,
}

impl Drop for Sentinels {
    fn drop(&mut self) {
        for (_, child) in &mut self.processes {
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}

fn redis_server(arguments: &[String]) -> Child {
    Command::new("redis-server")
        .args(arguments)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("redis-server runs (apt-get install redis-server)")
}

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|listener| listener.local_addr())
        .map(|address| address.port())
        .expect("a free port on loopback")
}

/// `command` sent to the Redis (or sentinel) on `port`, with a 1 s
/// connection timeout.
///
/// # Errors
///
/// The connection's or the command's.
pub fn query<T: redis::FromRedisValue>(
    port: u16,
    command: &mut redis::Cmd,
) -> redis::RedisResult<T> {
    query_as(port, None, command)
}

/// [`query`] as a client of `password` (`None`: none).
///
/// # Errors
///
/// The connection's or the command's.
pub fn query_as<T: redis::FromRedisValue>(
    port: u16,
    password: Option<&str>,
    command: &mut redis::Cmd,
) -> redis::RedisResult<T> {
    let credentials = password
        .map(|password| format!(":{password}@"))
        .unwrap_or_default();
    let client = redis::Client::open(format!("redis://{credentials}127.0.0.1:{port}"))?;
    let mut connection = client.get_connection_with_timeout(Duration::from_secs(1))?;
    command.query(&mut connection)
}

/// Waits (at most 30 s, blocking the thread) until `ready` holds; panics
/// naming `what` otherwise.
pub fn wait_until(what: &str, ready: impl Fn() -> bool) {
    for _ in 0..300 {
        if ready() {
            return;
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    panic!("{what} did not happen within 30 s");
}

impl Sentinels {
    /// Starts the five processes and waits (at most 30 s) until every
    /// sentinel knows the replica and the two other sentinels.
    pub fn start() -> Sentinels {
        Sentinels::start_with_passwords(None, None)
    }

    /// [`Sentinels::start`], the primary and replica asking for `password`
    /// (`requirepass`, the replica's `masterauth`, the sentinels'
    /// `auth-pass`) and the sentinels for `sentinel_password`.
    pub fn start_with_passwords(
        password: Option<&str>,
        sentinel_password: Option<&str>,
    ) -> Sentinels {
        let directory = tempfile::tempdir().unwrap();
        let (primary, replica) = (free_port(), free_port());
        let sentinels = [free_port(), free_port(), free_port()];
        let mut processes = Vec::new();
        let data = |port: u16| {
            // Its own directory: a replica's full sync writes its dump there.
            let own = directory.path().join(format!("redis-{port}"));
            std::fs::create_dir_all(&own).unwrap();
            [
                "--dir",
                &own.display().to_string(),
                "--port",
                &port.to_string(),
                "--bind",
                "127.0.0.1",
                "--save",
                "",
                "--appendonly",
                "no",
            ]
            .map(str::to_owned)
            .into_iter()
            .chain(password.into_iter().flat_map(|password| {
                ["--requirepass", password, "--masterauth", password].map(str::to_owned)
            }))
            .collect::<Vec<_>>()
        };
        processes.push((primary, redis_server(&data(primary))));
        let mut arguments = data(replica);
        arguments.extend(["--replicaof", "127.0.0.1", &primary.to_string()].map(str::to_owned));
        processes.push((replica, redis_server(&arguments)));
        for port in sentinels {
            let path = directory.path().join(format!("sentinel-{port}.conf"));
            std::fs::write(
                &path,
                format!(
                    "port {port}\nbind 127.0.0.1\n\
                     sentinel monitor {MASTER} 127.0.0.1 {primary} 2\n\
                     sentinel down-after-milliseconds {MASTER} 1000\n\
                     sentinel failover-timeout {MASTER} 3000\n{}{}",
                    password
                        .map(|password| format!("sentinel auth-pass {MASTER} {password}\n"))
                        .unwrap_or_default(),
                    sentinel_password
                        .map(|password| format!("requirepass {password}\n"))
                        .unwrap_or_default(),
                ),
            )
            .unwrap();
            let arguments = [path.display().to_string(), "--sentinel".to_owned()];
            processes.push((port, redis_server(&arguments)));
        }
        let deployment = Sentinels {
            primary,
            replica,
            sentinels,
            processes,
            directory,
            password: password.map(str::to_owned),
            sentinel_password: sentinel_password.map(str::to_owned),
        };
        wait_until("the sentinels' discovery", || {
            sentinels.iter().all(|sentinel| {
                let replicas: redis::RedisResult<Vec<redis::Value>> = query_as(
                    *sentinel,
                    sentinel_password,
                    redis::cmd("SENTINEL").arg("REPLICAS").arg(MASTER),
                );
                let others: redis::RedisResult<Vec<redis::Value>> = query_as(
                    *sentinel,
                    sentinel_password,
                    redis::cmd("SENTINEL").arg("SENTINELS").arg(MASTER),
                );
                replicas.is_ok_and(|list| list.len() == 1)
                    && others.is_ok_and(|list| list.len() == 2)
            })
        });
        deployment
    }

    /// The store's URL: `redis-sentinel://127.0.0.1:PORT,.../MASTER`.
    pub fn url(&self) -> String {
        let [first, second, third] = self.sentinels;
        format!("redis-sentinel://127.0.0.1:{first},127.0.0.1:{second},127.0.0.1:{third}/{MASTER}")
    }

    /// envoyproxy/ratelimit's `REDIS_URL` for `REDIS_TYPE=SENTINEL`:
    /// `MASTER,HOST:PORT,...`.
    pub fn go_url(&self) -> String {
        let [first, second, third] = self.sentinels;
        format!("{MASTER},127.0.0.1:{first},127.0.0.1:{second},127.0.0.1:{third}")
    }

    /// The port of the primary the sentinel `index` (0 to 2) names now.
    pub fn primary_named_by(&self, index: usize) -> Option<u16> {
        let address: Vec<String> = query_as(
            self.sentinels[index],
            self.sentinel_password.as_deref(),
            redis::cmd("SENTINEL")
                .arg("GET-MASTER-ADDR-BY-NAME")
                .arg(MASTER),
        )
        .ok()?;
        address.get(1)?.parse().ok()
    }

    /// Waits (at most 1 s) until the Redis on `port` has its writes on a
    /// replica (`WAIT 1 1000`).
    pub fn replicate(&self, port: u16) {
        let _: redis::RedisResult<i64> = query_as(
            port,
            self.password.as_deref(),
            redis::cmd("WAIT").arg(1).arg(1000),
        );
    }

    /// Asks the first sentinel for a failover, again until it accepts (it
    /// refuses, NOGOODSLAVE, until its periodic INFO has seen the
    /// replica's link up).
    pub fn fail_over(&self) {
        wait_until("the failover accepted", || {
            query_as::<String>(
                self.sentinels[0],
                self.sentinel_password.as_deref(),
                redis::cmd("SENTINEL").arg("FAILOVER").arg(MASTER),
            )
            .is_ok()
        });
    }

    /// Waits (at most 30 s, blocking the thread) until the Redis on `port`
    /// is a replica whose link to its primary is up and synced (`ROLE`:
    /// `slave`, state `connected`): killing its primary before then could
    /// leave it to be promoted with a dataset cut short by its full sync.
    pub fn until_synced_replica(&self, port: u16) {
        wait_until("a synced replica", || {
            let role: redis::RedisResult<Vec<redis::Value>> =
                query_as(port, self.password.as_deref(), &mut redis::cmd("ROLE"));
            let text = |value: Option<&redis::Value>| match value {
                Some(redis::Value::BulkString(text)) => String::from_utf8_lossy(text).into_owned(),
                Some(redis::Value::SimpleString(text)) => text.clone(),
                _ => String::new(),
            };
            role.is_ok_and(|role| text(role.first()) == "slave" && text(role.get(3)) == "connected")
        });
    }

    /// Kills the process on `port` (a primary, say).
    pub fn kill(&mut self, port: u16) {
        if let Some((_, child)) = self.processes.iter_mut().find(|(each, _)| *each == port) {
            let _ = child.kill();
            let _ = child.wait();
        }
    }

    /// The directory holding the processes' files.
    pub fn directory(&self) -> &std::path::Path {
        self.directory.path()
    }
}
