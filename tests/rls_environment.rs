//! `tollgate rls` started as the Go service is deployed: by environment
//! variables alone. Every one of the 49 variables it reads is set to a value
//! other than its default, and the debug listener's `/settings` page must
//! show each value taken (a misspelt variable name in tollgate would keep its
//! default and fail here); every Go setting tollgate does not support stops
//! the start with an error naming it.

use std::process::Stdio;
use std::time::Duration;

use tokio::io::{AsyncBufReadExt, BufReader};
use tokio::process::Command;
use tollgate_test_support::loopback::free_port;

/// The system's CA bundle, a PEM file `REDIS_TLS_CACERT` can name.
const CA_BUNDLE: &str = "/etc/ssl/certs/ca-certificates.crt";

#[tokio::test]
async fn every_go_variable_is_read_and_shown_in_force() {
    let root = tempfile::tempdir().unwrap();
    let config = root.path().join("rl/cfg/config");
    std::fs::create_dir_all(&config).unwrap();
    std::fs::write(
        config.join("rl.yaml"),
        "domain: d\ndescriptors:\n  - key: k\n    rate_limit: {unit: minute, requests_per_unit: 5}\n",
    )
    .unwrap();
    let redis = free_port();
    let root_text = root.path().display().to_string();
    // (variable, value set, value `/settings` shows), every value other
    // than the default.
    let settings: Vec<(&str, String, String)> = vec![
        ("HOST", "127.0.0.1".into(), "127.0.0.1".into()),
        ("PORT", "0".into(), "0".into()),
        ("GRPC_HOST", "127.0.0.1".into(), "127.0.0.1".into()),
        ("GRPC_PORT", "0".into(), "0".into()),
        ("DEBUG_HOST", "127.0.0.1".into(), "127.0.0.1".into()),
        ("DEBUG_PORT", "0".into(), "0".into()),
        ("RUNTIME_ROOT", root_text.clone(), root_text),
        ("RUNTIME_SUBDIRECTORY", "rl".into(), "rl".into()),
        ("RUNTIME_APPDIRECTORY", "cfg".into(), "cfg".into()),
        ("RUNTIME_IGNOREDOTFILES", "true".into(), "true".into()),
        ("RUNTIME_WATCH_ROOT", "false".into(), "false".into()),
        ("MERGE_DOMAIN_CONFIG", "T".into(), "true".into()),
        (
            "HEALTHY_WITH_AT_LEAST_ONE_CONFIG_LOADED",
            "true".into(),
            "true".into(),
        ),
        // Go-style: host:port, the password put into the URL, never shown.
        (
            "REDIS_URL",
            format!("127.0.0.1:{redis}"),
            format!("rediss://127.0.0.1:{redis}"),
        ),
        ("REDIS_TYPE", "single".into(), "single".into()),
        ("REDIS_SOCKET_TYPE", "tcp".into(), "tcp".into()),
        ("REDIS_AUTH", "pw-not-shown".into(), "(set)".into()),
        ("REDIS_SENTINEL_AUTH", "s-not-shown".into(), "(set)".into()),
        ("REDIS_TLS", "1".into(), "true".into()),
        ("REDIS_TLS_CACERT", CA_BUNDLE.into(), CA_BUNDLE.into()),
        ("REDIS_TIMEOUT", "7s".into(), "7s".into()),
        ("CACHE_KEY_PREFIX", "envtest_".into(), "envtest_".into()),
        ("NEAR_LIMIT_RATIO", "0.5".into(), "0.5".into()),
        (
            "STOP_CACHE_KEY_INCREMENT_WHEN_OVERLIMIT",
            "true".into(),
            "true".into(),
        ),
        ("LOCAL_CACHE_SIZE_IN_BYTES", "1000".into(), "1000".into()),
        ("SHADOW_MODE", "true".into(), "true".into()),
        ("QUOTA_MODE", "true".into(), "true".into()),
        ("RESPONSE_DYNAMIC_METADATA", "true".into(), "true".into()),
        (
            "LIMIT_RESPONSE_HEADERS_ENABLED",
            "true".into(),
            "true".into(),
        ),
        ("LIMIT_LIMIT_HEADER", "X-L".into(), "X-L".into()),
        ("LIMIT_REMAINING_HEADER", "X-R".into(), "X-R".into()),
        ("LIMIT_RESET_HEADER", "X-T".into(), "X-T".into()),
        ("DISABLE_STATS", "true".into(), "true".into()),
        ("USE_STATSD", "false".into(), "false".into()),
        (
            "STATSD_HOST",
            "statsd.invalid".into(),
            "statsd.invalid".into(),
        ),
        ("STATSD_PORT", "9125".into(), "9125".into()),
        ("STATS_FLUSH_INTERVAL", "3s".into(), "3s".into()),
        ("USE_PROMETHEUS", "true".into(), "true".into()),
        (
            "PROMETHEUS_ADDR",
            "127.0.0.1:0".into(),
            "127.0.0.1:0".into(),
        ),
        ("PROMETHEUS_PATH", "/m".into(), "/m".into()),
        ("LOG_LEVEL", "info".into(), "info".into()),
        ("LOG_FORMAT", "json".into(), "json".into()),
        ("TOLLGATE_CONFIG_EXTENSIONS", "true".into(), "true".into()),
        ("TOLLGATE_ALL_OR_NOTHING", "true".into(), "true".into()),
        ("TOLLGATE_RETRY_AFTER_HEADER", "true".into(), "true".into()),
        ("TOLLGATE_IETF_HEADERS", "true".into(), "true".into()),
        ("TOLLGATE_REFUNDS", "true".into(), "true".into()),
        (
            "TOLLGATE_STORE_FAILURE",
            "fail_closed".into(),
            "fail_closed".into(),
        ),
        ("TOLLGATE_STORE_TIMEOUT", "30ms".into(), "30ms".into()),
        ("TOLLGATE_WORKERS", "3".into(), "3".into()),
        ("TOLLGATE_IDLE_TIMEOUT", "45s".into(), "45s".into()),
    ];
    assert_eq!(settings.len(), 51);
    let mut command = Command::new(env!("CARGO_BIN_EXE_tollgate"));
    command
        .arg("rls")
        .env_clear()
        .stderr(Stdio::piped())
        .kill_on_drop(true);
    for (name, value, _) in &settings {
        command.env(name, value);
    }
    let mut child = command.spawn().unwrap();
    let mut lines = BufReader::new(child.stderr.take().unwrap()).lines();
    let mut logs = String::new();
    let mut debug = None;
    let _ = tokio::time::timeout(Duration::from_secs(30), async {
        while let Some(line) = lines.next_line().await.unwrap() {
            logs.push_str(&line);
            logs.push('\n');
            let entry: serde_json::Value = serde_json::from_str(&line).unwrap_or_default();
            if entry["fields"]["message"] == "Listening for debug" {
                debug = entry["fields"]["address"].as_str().map(str::to_owned);
                return;
            }
        }
    })
    .await;
    let debug = debug.unwrap_or_else(|| panic!("no debug listener:\n{logs}"));
    let page = reqwest::get(format!("http://{debug}/settings"))
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    let expected: String = settings
        .iter()
        .map(|(name, _, shown)| format!("{name}: {shown}\n"))
        .collect();
    let mut page_lines: Vec<&str> = page.lines().collect();
    let mut expected_lines: Vec<&str> = expected.lines().collect();
    page_lines.sort_unstable();
    expected_lines.sort_unstable();
    assert_eq!(page_lines, expected_lines);
    for secret in ["pw-not-shown", "s-not-shown"] {
        assert!(!page.contains(secret) && !logs.contains(secret), "{secret}");
    }
    let _ = child.start_kill();
    let _ = child.wait().await;
}

#[tokio::test]
async fn every_unsupported_go_setting_is_refused_by_name() {
    for setting in tollgate_rls::settings::UNSUPPORTED {
        // "true" asks for what each one turns on (a backend, a protocol,
        // a file), which tollgate would have to ignore.
        let output = tokio::time::timeout(
            Duration::from_secs(30),
            Command::new(env!("CARGO_BIN_EXE_tollgate"))
                .arg("rls")
                .env_clear()
                .env("USE_STATSD", "false")
                .env("HOST", "127.0.0.1")
                .env("PORT", "0")
                .env("GRPC_HOST", "127.0.0.1")
                .env("GRPC_PORT", "0")
                .env("DEBUG_PORT", "0")
                .env("DEBUG_HOST", "127.0.0.1")
                .env(setting.name, "true")
                .kill_on_drop(true)
                .output(),
        )
        .await
        .unwrap_or_else(|_| panic!("{} did not stop the start", setting.name))
        .unwrap();
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert_eq!(output.status.code(), Some(2), "{}: {stderr}", setting.name);
        assert!(stderr.contains(setting.name), "{}: {stderr}", setting.name);
    }
}

#[tokio::test]
async fn a_start_on_the_defaults_logs_at_info_and_says_once_where_statsd_goes() {
    // The Go defaults but for loopback listeners on kernel-chosen ports, a
    // configuration, a statsd port nothing listens on and a short flush:
    // statsd is on by the Go default, never asked for.
    let root = tempfile::tempdir().unwrap();
    let config = root.path().join("rl/config");
    std::fs::create_dir_all(&config).unwrap();
    std::fs::write(
        config.join("rl.yaml"),
        "domain: d\ndescriptors:\n  - key: k\n    rate_limit: {unit: minute, requests_per_unit: 5}\n",
    )
    .unwrap();
    let statsd = free_port();
    let mut command = Command::new(env!("CARGO_BIN_EXE_tollgate"));
    command
        .arg("rls")
        .env_clear()
        .envs([
            ("HOST", "127.0.0.1"),
            ("GRPC_HOST", "127.0.0.1"),
            ("DEBUG_HOST", "127.0.0.1"),
            ("PORT", "0"),
            ("GRPC_PORT", "0"),
            ("DEBUG_PORT", "0"),
            ("RUNTIME_ROOT", &root.path().display().to_string()),
            ("RUNTIME_SUBDIRECTORY", "rl"),
            ("STATSD_PORT", &statsd.to_string()),
            ("STATS_FLUSH_INTERVAL", "50ms"),
            ("LOG_FORMAT", "json"),
        ])
        .stderr(Stdio::piped())
        .kill_on_drop(true);
    let mut child = command.spawn().unwrap();
    let mut lines = BufReader::new(child.stderr.take().unwrap()).lines();
    let mut entries: Vec<serde_json::Value> = Vec::new();
    let mut http = None;
    let _ = tokio::time::timeout(Duration::from_secs(30), async {
        while let Some(line) = lines.next_line().await.unwrap() {
            let entry: serde_json::Value = serde_json::from_str(&line).unwrap();
            if entry["fields"]["message"] == "Listening for HTTP" {
                http = entry["fields"]["address"].as_str().map(str::to_owned);
            }
            let debug = entry["fields"]["message"] == "Listening for debug";
            entries.push(entry);
            if debug && http.is_some() {
                return;
            }
        }
    })
    .await;
    let http = http.unwrap_or_else(|| panic!("no HTTP listener: {entries:?}"));
    // A decision, so the counters have something to send.
    let answer = reqwest::Client::new()
        .post(format!("http://{http}/json"))
        .body(r#"{"domain": "d", "descriptors": [{"entries": [{"key": "k", "value": "v"}]}]}"#)
        .send()
        .await
        .unwrap();
    assert_eq!(answer.status(), 200);
    // Twenty flushes or more, each failing to reach statsd.
    let _ = tokio::time::timeout(Duration::from_secs(1), async {
        while let Some(line) = lines.next_line().await.unwrap() {
            entries.push(serde_json::from_str(&line).unwrap());
        }
    })
    .await;
    let _ = child.start_kill();
    let _ = child.wait().await;
    let loud: Vec<_> = entries
        .iter()
        .filter(|entry| entry["level"] != "INFO")
        .collect();
    assert!(loud.is_empty(), "lines above INFO: {loud:?}");
    let statsd_lines: Vec<_> = entries
        .iter()
        .filter(|entry| entry.to_string().contains("statsd"))
        .collect();
    assert_eq!(statsd_lines.len(), 1, "{statsd_lines:?}");
    assert_eq!(
        statsd_lines[0]["fields"]["address"],
        format!("localhost:{statsd}")
    );
    let said = statsd_lines[0]["fields"]["message"].as_str().unwrap();
    assert!(said.contains("USE_STATSD is true by default"), "{said}");
}
