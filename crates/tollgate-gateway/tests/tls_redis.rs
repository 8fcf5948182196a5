//! Limits in a redis-server of the test's own that speaks TLS only
//! (`rediss://`), with certificates made by the test; run when `REDIS_URL`
//! is set, as the other Redis tests. And a CA file beside a URL without TLS,
//! refused.

mod tls_support;

use std::path::Path;

use tls_support::{Issued, TestCa, directory};
use tollgate_test_support::gateway::{Gateway, config, header};
use tollgate_test_support::loopback::{Upstream, free_port};
use tollgate_test_support::redis as redis_support;

/// A redis-server of the test's own that speaks TLS only, on a free
/// loopback port, with `issued`'s certificate; stopped when dropped.
struct TlsRedis {
    port: u16,
    child: std::process::Child,
}

impl TlsRedis {
    fn start(issued: &Issued, ca: &TestCa, files: &Path) -> TlsRedis {
        issued.write(files);
        std::fs::write(files.join("ca.pem"), &ca.pem).unwrap();
        let port = free_port();
        let path = |name: &str| files.join(name).display().to_string();
        let mut child = std::process::Command::new("redis-server")
            .args(["--port", "0", "--tls-port", &port.to_string()])
            .args(["--bind", "127.0.0.1", "--save", "", "--appendonly", "no"])
            .args(["--tls-cert-file", &path("cert.pem")])
            .args(["--tls-key-file", &path("key.pem")])
            .args(["--tls-ca-cert-file", &path("ca.pem")])
            .args(["--tls-auth-clients", "no"])
            .stdout(std::process::Stdio::null())
            .spawn()
            .expect("cannot run redis-server (install Debian's redis-server)");
        // Ready once it accepts TCP connections on its TLS port.
        for _ in 0..500 {
            if let Some(status) = child.try_wait().unwrap() {
                panic!("redis-server with TLS exited at start ({status})");
            }
            if std::net::TcpStream::connect(("127.0.0.1", port)).is_ok() {
                return TlsRedis { port, child };
            }
            std::thread::sleep(std::time::Duration::from_millis(20));
        }
        panic!("redis-server with TLS did not listen within 10 s");
    }
}

impl Drop for TlsRedis {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[cfg_attr(
    not(has_redis),
    ignore = "set REDIS_URL=redis://127.0.0.1:6379 to run (needs redis-server with TLS too)"
)]
async fn limits_are_decided_in_a_redis_reached_over_tls() {
    let _ = redis_support::require_redis_url();
    let ca = TestCa::new("redis CA");
    let files = directory("rediss");
    let redis = TlsRedis::start(&ca.issue(&["127.0.0.1"]), &ca, &files);
    let upstream = Upstream::start().await;
    let prefix = redis_support::prefix("rediss");
    let on_tls_redis = |route: &str, ca_file: &str| {
        config(&format!(
            "[store]\nurl = \"rediss://127.0.0.1:{}\"\nprefix = \"{prefix}\"\ntimeout = \"2s\"\n\
             failure = \"fail_closed\"\ntime = \"local\"\n{ca_file}\
             [limits.default_policy]\nalgorithm = \"fixed_window\"\nlimit = 2\nwindow_s = 60\n\
             [[routes]]\nname = \"{route}\"\nprefix = \"/\"\nupstream = \"http://{}\"\n",
            redis.port, upstream.address
        ))
    };
    let ca_file = format!("ca_file = \"{}\"\n", files.join("ca.pem").display());
    let gateway = Gateway::start(&on_tls_redis("rediss_trusted", &ca_file), 0).await;
    // Two allowed by the window of 2, then refused: decided in Redis.
    let first = gateway.get("/", "sk_tls").await;
    assert_eq!(first.status(), 200);
    assert_eq!(
        header(&first, "x-ratelimit-remaining").as_deref(),
        Some("1")
    );
    assert_eq!(gateway.status("/", "sk_tls").await, 200);
    assert_eq!(gateway.status("/", "sk_tls").await, 429);
    gateway.running.shutdown().await;

    // The same server without the CA file: its certificate is not trusted,
    // the store cannot decide, and fail_closed answers 503.
    let untrusted = Gateway::start(&on_tls_redis("rediss_untrusted", ""), 0).await;
    assert_eq!(untrusted.status("/", "sk_other").await, 503);
    untrusted.running.shutdown().await;
}

#[test]
fn a_ca_file_without_tls_is_refused() {
    let files = directory("redis-ca");
    let ca = TestCa::new("plain CA");
    std::fs::write(files.join("ca.pem"), &ca.pem).unwrap();
    let toml = config(&format!(
        "[store]\nurl = \"redis://127.0.0.1:1\"\nca_file = \"{}\"\n",
        files.join("ca.pem").display()
    ));
    let config = tollgate_gateway::ServeConfig::from_toml_str(&toml).unwrap();
    let runtime = tokio::runtime::Runtime::new().unwrap();
    let error = runtime
        .block_on(tollgate_gateway::start(
            tollgate_gateway::ServeOptions::new(config, None),
        ))
        .err()
        .unwrap()
        .to_string();
    assert!(
        error.contains("is for TLS: give the server as rediss://"),
        "{error}"
    );
}
