//! Readiness on a Redis Cluster follows the share of hash slots that answer.
//! The test starts a three-primary cluster of its own (`.ci/redis-cluster`,
//! Debian's `redis-server`), so that it can stall and stop its nodes:
//!
//! - one node stalled (SIGSTOP), before the others mark it failed: `/readyz`
//!   stays 200, "degraded", with the slots of the two others (10,923 of
//!   16,384), and `tollgate_store_up` reads that share. Before, one stalled
//!   node made `/readyz` 503;
//! - once the others have marked it failed, the cluster refuses every keyed
//!   command (`CLUSTERDOWN`, as `cluster-require-full-coverage` asks), though
//!   each live node still answers `PING`: `/readyz` is 503 under
//!   `fail_closed`;
//! - every node stopped: `/readyz` is 503 at every call, and
//!   `tollgate_store_up` 0. Before, it flipped between 200 and 503.
//!
//! It runs when `REDIS_URL` is set (and under `CI=true`), as the Redis
//! tests do, and is ignored otherwise (this crate's build script sets the
//! cfg `has_redis`).

use std::path::{Path, PathBuf};
use std::process::Command;

use tollgate_test_support::gateway::{Gateway, config};
use tollgate_test_support::loopback::Upstream;

/// A cluster of this test's own, stopped when dropped.
struct OwnCluster {
    directory: tempfile::TempDir,
    url: String,
}

impl OwnCluster {
    fn start() -> OwnCluster {
        let directory = tempfile::tempdir().unwrap();
        let output = Command::new("bash")
            .arg(script())
            .arg("start")
            .arg(directory.path())
            .output()
            .expect("bash runs .ci/redis-cluster");
        assert!(
            output.status.success(),
            "the cluster did not start: {}",
            String::from_utf8_lossy(&output.stderr)
        );
        let url = String::from_utf8(output.stdout).unwrap().trim().to_owned();
        OwnCluster { directory, url }
    }

    /// The nodes' ports, in the order `redis-cli --cluster create` was given
    /// them: the first serves slots 0 to 5460.
    fn ports(&self) -> Vec<String> {
        self.url
            .trim_start_matches("redis-cluster://")
            .split(',')
            .map(|node| node.rsplit_once(':').unwrap().1.to_owned())
            .collect()
    }

    /// Runs `redis-cli` against the node on `port` with `arguments`; its
    /// output.
    fn cli(&self, port: &str, arguments: &[&str]) -> String {
        let output = Command::new("redis-cli")
            .args(["-p", port])
            .args(arguments)
            .output()
            .unwrap();
        String::from_utf8_lossy(&output.stdout).into_owned()
    }

    /// Sends `signal` to the node on `port`.
    fn signal(&self, port: &str, signal: &str) {
        let pid_file = self.directory.path().join(port).join("redis.pid");
        let pid = std::fs::read_to_string(&pid_file).unwrap();
        let status = Command::new("kill")
            .arg(format!("-{signal}"))
            .arg(pid.trim())
            .status()
            .unwrap();
        assert!(status.success());
    }
}

impl Drop for OwnCluster {
    fn drop(&mut self) {
        for port in self.ports() {
            let pid_file = self.directory.path().join(&port).join("redis.pid");
            if let Ok(pid) = std::fs::read_to_string(&pid_file) {
                let _ = Command::new("kill").arg("-CONT").arg(pid.trim()).status();
            }
        }
        let _ = Command::new("bash")
            .arg(script())
            .arg("stop")
            .arg(self.directory.path())
            .status();
    }
}

fn script() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../.ci/redis-cluster")
}

/// `/readyz`'s status and body.
async fn readyz(gateway: &Gateway) -> (u16, String) {
    let response = gateway
        .client
        .get(gateway.admin_url("/readyz"))
        .send()
        .await
        .unwrap();
    (
        response.status().as_u16(),
        response.text().await.unwrap_or_default(),
    )
}

async fn store_up(gateway: &Gateway) -> Option<f64> {
    gateway.samples().await.value("tollgate_store_up", &[])
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[cfg_attr(
    not(has_redis),
    ignore = "set REDIS_URL=redis://127.0.0.1:6379 to run (needs redis-server and redis-cli too)"
)]
async fn readiness_counts_the_hash_slots_that_answer() {
    let cluster = OwnCluster::start();
    let upstream = Upstream::start().await;
    let toml = config(&format!(
        "[store]\nurl = \"{}\"\ntimeout = \"200ms\"\nfailure = \"fail_closed\"\n\
         [[routes]]\nname = \"cluster_ready\"\nprefix = \"/\"\nupstream = \"http://{}\"\n",
        cluster.url, upstream.address
    ));
    // A node is marked failed only after a minute of silence, so the stall
    // below is only a stall, whatever the machine's speed.
    let ports = cluster.ports();
    for port in &ports {
        cluster.cli(port, &["config", "set", "cluster-node-timeout", "60000"]);
    }
    let gateway = Gateway::start(&toml, 0).await;
    assert_eq!(readyz(&gateway).await, (200, "ready\n".to_owned()));
    assert_eq!(store_up(&gateway).await, Some(1.0));

    // The first node, serving slots 0 to 5460, stalls: the others' 5,462 +
    // 5,461 slots still answer.
    cluster.signal(&ports[0], "STOP");
    for _ in 0..3 {
        assert_eq!(
            readyz(&gateway).await,
            (
                200,
                "degraded: 10923 of 16384 hash slots of the Redis Cluster answer; \
                 keys in the others get 503 (fail_closed)\n"
                    .to_owned()
            )
        );
        assert_eq!(store_up(&gateway).await, Some(10_923.0 / 16_384.0));
    }

    // The others mark it failed within a second: the cluster is down for
    // every key, and so not ready under fail_closed.
    for port in &ports[1..] {
        cluster.cli(port, &["config", "set", "cluster-node-timeout", "1000"]);
    }
    let down = async {
        while !cluster
            .cli(&ports[1], &["cluster", "info"])
            .contains("cluster_state:fail")
        {
            tokio::time::sleep(std::time::Duration::from_millis(50)).await;
        }
    };
    tokio::time::timeout(std::time::Duration::from_secs(30), down)
        .await
        .expect("the live nodes mark the stalled one failed");
    let (status, body) = readyz(&gateway).await;
    assert_eq!(status, 503, "{body}");
    assert!(body.contains("requests get 503 (fail_closed)"), "{body}");
    assert_eq!(store_up(&gateway).await, Some(0.0));

    // Every node down: 503 at every call, and 0.
    cluster.signal(&ports[0], "CONT");
    for port in &ports {
        cluster.signal(port, "KILL");
    }
    for _ in 0..5 {
        let (status, body) = readyz(&gateway).await;
        assert_eq!(status, 503, "{body}");
        assert!(body.contains("requests get 503 (fail_closed)"), "{body}");
        assert_eq!(store_up(&gateway).await, Some(0.0));
    }
    gateway.running.shutdown().await;
}
