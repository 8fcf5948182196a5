//! No Redis user name or password reaches a start line, an error,
//! `check-config`'s output or a metric, for every URL form tollgate accepts:
//! `redis://user:pw@`, `rediss://`, `redis+unix://...?user=&pass=`, cluster
//! lists (`redis-cluster://`, `rediss-cluster://`) and the Go service's
//! `REDIS_URL` with `REDIS_AUTH`. Each process is the real binary; every
//! Redis named is unreachable (a closed loopback port, a socket path that
//! does not exist), so the store fails as it would in production and logs
//! what it logs then.

use std::process::Stdio;
use std::time::Duration;

use tokio::io::{AsyncBufReadExt, AsyncReadExt, BufReader};
use tokio::process::Command;
use tollgate_test_support::loopback::free_port;

/// The user name every URL carries: found nowhere in any output.
const USER: &str = "tguser7k";
/// The password every URL carries (percent-encoding leaves it as it is).
const PASSWORD: &str = "pw-Zq9hidden";

/// Every URL form the gateway's `[store] url` (and `--store`) accepts, with
/// credentials, and how it is shown once redacted.
fn url_forms() -> Vec<(String, String)> {
    let (one, two) = (free_port(), free_port());
    vec![
        (
            format!("redis://{USER}:{PASSWORD}@127.0.0.1:{one}/2"),
            format!("redis://127.0.0.1:{one}/2"),
        ),
        (
            format!("rediss://{USER}:{PASSWORD}@127.0.0.1:{one}"),
            format!("rediss://127.0.0.1:{one}"),
        ),
        (
            format!("redis+unix:///nonexistent/tollgate.sock?user={USER}&pass={PASSWORD}"),
            "redis+unix:///nonexistent/tollgate.sock".to_owned(),
        ),
        (
            format!("redis-cluster://{USER}:{PASSWORD}@127.0.0.1:{one},127.0.0.1:{two}"),
            format!("redis-cluster://127.0.0.1:{one},127.0.0.1:{two}"),
        ),
        (
            format!("rediss-cluster://:{PASSWORD}@127.0.0.1:{one},127.0.0.1:{two}"),
            format!("rediss-cluster://127.0.0.1:{one},127.0.0.1:{two}"),
        ),
    ]
}

/// URLs that are not Redis URLs tollgate opens, each holding the
/// credentials where a naive split would show them.
fn unusable_urls() -> Vec<String> {
    vec![
        format!("redis-cluster://{USER}:pw,{PASSWORD}@127.0.0.1:1,127.0.0.1:2"),
        format!("redis-cluster://127.0.0.1:1,{USER}:{PASSWORD}@127.0.0.1:2"),
        format!("http://{USER}:{PASSWORD}@127.0.0.1:1"),
        format!("redis://{USER}:{PASSWORD}@"),
        // A raw '?', '#' or '/' before the '@': a URL parser would take part
        // of the credentials for the host.
        format!("redis://{USER}:{PASSWORD}?x@127.0.0.1:1"),
        format!("redis://{USER}:{PASSWORD}#x@127.0.0.1:1"),
        format!("rediss://{USER}:pw/{PASSWORD}@127.0.0.1:1"),
        format!("redis-cluster://{USER}:{PASSWORD}?x@127.0.0.1:1,127.0.0.1:2"),
    ]
}

fn assert_no_credentials(what: &str, text: &str) {
    assert!(
        !text.contains(USER) && !text.contains(PASSWORD),
        "{what} shows a credential:\n{text}"
    );
}

/// A gateway configuration on free loopback ports, with one route.
fn gateway_config(directory: &std::path::Path) -> std::path::PathBuf {
    let path = directory.join("gateway.toml");
    std::fs::write(
        &path,
        "listen = \"127.0.0.1:0\"\n[admin]\nlisten = \"127.0.0.1:0\"\ntoken = \"an-admin-token\"\n\
         [store]\ntimeout = \"20ms\"\n\
         [[routes]]\nprefix = \"/\"\nupstream = \"http://127.0.0.1:1\"\n",
    )
    .unwrap();
    path
}

/// Everything a finished command printed, both streams.
async fn output_of(command: &mut Command) -> (std::process::ExitStatus, String) {
    let output = tokio::time::timeout(Duration::from_secs(60), command.output())
        .await
        .expect("the command ends")
        .unwrap();
    let mut text = String::from_utf8_lossy(&output.stdout).into_owned();
    text.push_str(&String::from_utf8_lossy(&output.stderr));
    (output.status, text)
}

#[tokio::test]
async fn check_config_shows_where_limits_are_kept_without_credentials() {
    let directory = tempfile::tempdir().unwrap();
    let config = gateway_config(directory.path());
    for (url, shown) in url_forms() {
        let (status, text) = output_of(
            Command::new(env!("CARGO_BIN_EXE_tollgate"))
                .args(["check-config", "--store", &url])
                .arg(&config),
        )
        .await;
        assert!(status.success(), "{url}: {text}");
        assert!(
            text.contains(&format!("limits in Redis at {shown} ")),
            "{text}"
        );
        assert_no_credentials("check-config", &text);
    }
}

#[tokio::test]
async fn a_gateway_names_its_redis_without_credentials_in_logs_and_metrics() {
    let directory = tempfile::tempdir().unwrap();
    let config = gateway_config(directory.path());
    for (url, shown) in url_forms() {
        let mut child = Command::new(env!("CARGO_BIN_EXE_tollgate"))
            .args(["serve", "--log-format", "json", "--store", &url, "--config"])
            .arg(&config)
            .env("RUST_LOG", "debug")
            .stderr(Stdio::piped())
            .kill_on_drop(true)
            .spawn()
            .unwrap();
        let mut lines = BufReader::new(child.stderr.take().unwrap()).lines();
        let mut logs = String::new();
        let mut admin = None;
        let mut kept_in = None;
        let read = async {
            while let Some(line) = lines.next_line().await.unwrap() {
                logs.push_str(&line);
                logs.push('\n');
                let entry: serde_json::Value = serde_json::from_str(&line).unwrap_or_default();
                let message = entry["fields"]["message"].as_str().unwrap_or_default();
                if message == "limits kept in" {
                    kept_in = entry["fields"]["store"].as_str().map(str::to_owned);
                }
                if message.contains("tollgate serving") {
                    admin = entry["fields"]["admin_address"].as_str().map(str::to_owned);
                    return;
                }
            }
        };
        tokio::time::timeout(Duration::from_secs(30), read)
            .await
            .unwrap_or_else(|_| panic!("{url}: no start line in 30 s:\n{logs}"));
        assert_eq!(
            kept_in.as_deref(),
            Some(format!("{shown} under the prefix tollgate").as_str()),
            "{logs}"
        );
        let admin = admin.unwrap_or_else(|| panic!("{url}: the gateway did not start:\n{logs}"));
        let client = reqwest::Client::new();
        // A request decided by the unreachable store: its error is logged.
        let _ = client
            .get(format!("http://{admin}/readyz"))
            .send()
            .await
            .unwrap();
        let metrics = client
            .get(format!("http://{admin}/metrics"))
            .send()
            .await
            .unwrap()
            .text()
            .await
            .unwrap();
        assert!(metrics.contains("tollgate_store_up"), "{metrics}");
        assert_no_credentials("/metrics", &metrics);
        let pid = child.id().unwrap().to_string();
        let _ = std::process::Command::new("kill")
            .args(["-TERM", &pid])
            .status();
        let mut rest = String::new();
        let _ = tokio::time::timeout(Duration::from_secs(30), async {
            let mut stderr = lines.into_inner();
            let _ = stderr.read_to_string(&mut rest).await;
        })
        .await;
        let _ = child.wait().await;
        logs.push_str(&rest);
        assert_no_credentials("the gateway's log", &logs);
    }
}

#[tokio::test]
async fn an_unusable_url_is_refused_without_showing_it() {
    let directory = tempfile::tempdir().unwrap();
    let config = gateway_config(directory.path());
    for url in unusable_urls() {
        for command in ["serve", "check-config"] {
            let (status, text) = output_of(
                Command::new(env!("CARGO_BIN_EXE_tollgate"))
                    .args([command, "--store", &url, "--config"])
                    .arg(&config)
                    .env("RUST_LOG", "debug"),
            )
            .await;
            // Both refuse it: a start, and check-config as a start would.
            assert!(!status.success(), "{command} {url}: {text}");
            assert_no_credentials(command, &text);
        }
    }
}

/// `tollgate rls` with `settings` (environment variables) on free loopback
/// ports, until its gRPC listener is up (or it exits): its log, and its
/// debug listener's `/stats` page when it started.
async fn rls_logs(settings: &[(&str, String)]) -> (String, Option<String>) {
    let directory = tempfile::tempdir().unwrap();
    std::fs::write(
        directory.path().join("rl.yaml"),
        "domain: edge\ndescriptors:\n  - key: k\n    rate_limit: {unit: minute, requests_per_unit: 5}\n",
    )
    .unwrap();
    let mut command = Command::new(env!("CARGO_BIN_EXE_tollgate"));
    command
        .arg("rls")
        .arg("--config")
        .arg(directory.path())
        .env("LOG_FORMAT", "json")
        .env("LOG_LEVEL", "debug")
        .env("USE_STATSD", "false")
        .env("HOST", "127.0.0.1")
        .env("PORT", "0")
        .env("GRPC_HOST", "127.0.0.1")
        .env("GRPC_PORT", "0")
        .env("DEBUG_HOST", "127.0.0.1")
        .env("DEBUG_PORT", "0")
        .env("TOLLGATE_STORE_TIMEOUT", "20ms")
        .stderr(Stdio::piped())
        .kill_on_drop(true);
    for (name, value) in settings {
        command.env(name, value);
    }
    let mut child = command.spawn().unwrap();
    let mut lines = BufReader::new(child.stderr.take().unwrap()).lines();
    let mut logs = String::new();
    let mut debug = None;
    let mut started = false;
    let _ = tokio::time::timeout(Duration::from_secs(30), async {
        while let Some(line) = lines.next_line().await.unwrap() {
            logs.push_str(&line);
            logs.push('\n');
            let entry: serde_json::Value = serde_json::from_str(&line).unwrap_or_default();
            let message = entry["fields"]["message"].as_str().unwrap_or_default();
            if message == "Listening for debug" {
                debug = entry["fields"]["address"].as_str().map(str::to_owned);
            }
            if message == "Listening for gRPC" {
                started = true;
            }
            if started && debug.is_some() {
                return;
            }
        }
    })
    .await;
    let stats = match debug {
        Some(debug) => Some(
            reqwest::get(format!("http://{debug}/stats"))
                .await
                .unwrap()
                .text()
                .await
                .unwrap(),
        ),
        None => None,
    };
    let _ = child.start_kill();
    let mut rest = String::new();
    let _ = tokio::time::timeout(Duration::from_secs(30), async {
        let _ = lines.into_inner().read_to_string(&mut rest).await;
    })
    .await;
    let _ = child.wait().await;
    logs.push_str(&rest);
    (logs, stats)
}

#[tokio::test]
async fn the_rate_limit_service_names_its_redis_without_credentials() {
    let port = free_port();
    let auth = format!("{USER}:{PASSWORD}");
    // (settings, the store as the start line names it)
    let mut cases: Vec<(Vec<(&str, String)>, String)> = vec![
        (
            vec![
                ("REDIS_URL", format!("127.0.0.1:{port}")),
                ("REDIS_SOCKET_TYPE", "tcp".to_owned()),
                ("REDIS_AUTH", auth.clone()),
            ],
            format!("redis://127.0.0.1:{port}"),
        ),
        (
            vec![
                ("REDIS_URL", format!("127.0.0.1:{port},127.0.0.1:{port}")),
                ("REDIS_SOCKET_TYPE", "tcp".to_owned()),
                ("REDIS_TYPE", "cluster".to_owned()),
                ("REDIS_AUTH", PASSWORD.to_owned()),
            ],
            format!("redis-cluster://127.0.0.1:{port},127.0.0.1:{port}"),
        ),
        (
            vec![
                ("REDIS_URL", "/nonexistent/tollgate.sock".to_owned()),
                ("REDIS_SOCKET_TYPE", "unix".to_owned()),
                ("REDIS_AUTH", auth.clone()),
            ],
            "redis+unix:///nonexistent/tollgate.sock".to_owned(),
        ),
        (
            vec![
                ("REDIS_URL", format!("127.0.0.1:{port}")),
                ("REDIS_SOCKET_TYPE", "tcp".to_owned()),
                ("REDIS_TLS", "true".to_owned()),
                ("REDIS_AUTH", auth.clone()),
            ],
            format!("rediss://127.0.0.1:{port}"),
        ),
    ];
    for (url, shown) in url_forms() {
        cases.push((vec![("REDIS_URL", url)], shown));
    }
    for (settings, shown) in cases {
        let (logs, stats) = rls_logs(&settings).await;
        assert!(
            logs.contains(&format!(
                "\"store\":\"{shown} under the prefix tollgate-rls\""
            )),
            "{settings:?}: {logs}"
        );
        let stats = stats.unwrap_or_else(|| panic!("{settings:?}: did not start:\n{logs}"));
        assert_no_credentials("/stats", &stats);
        assert_no_credentials("the service's log", &logs);
    }
    // Go-style settings that cannot be used: the error names no credential.
    for settings in [
        vec![
            (
                "REDIS_URL",
                format!("redis://{USER}:{PASSWORD}@127.0.0.1:{port}"),
            ),
            ("REDIS_AUTH", auth.clone()),
        ],
        vec![("REDIS_URL", unusable_urls()[0].clone())],
        vec![("REDIS_URL", unusable_urls()[2].clone())],
    ] {
        let (logs, _) = rls_logs(&settings).await;
        assert_no_credentials("the service's error", &logs);
    }
}
