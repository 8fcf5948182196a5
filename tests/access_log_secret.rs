//! The access log under a key secret, end to end (issue #27): a `tollgate
//! serve` process with `[store] key_secret_env` set writes each key as its
//! HMAC-SHA-256 fingerprint under that secret (never the key, nor its
//! plain SHA-256 fingerprint), logs a delayed request with its wait, and
//! `tollgate replay` under the same secret reproduces every decision and
//! names the key by the same fingerprint. Real clients on the wire; only
//! orders and counts are asserted, never durations.

mod process;

use std::path::PathBuf;

use process::Process;
use tollgate_test_support::gateway::config;
use tollgate_test_support::loopback::Upstream;

/// The secret, in the environment variable the configuration names.
const SECRET: (&str, &str) = ("TOLLGATE_ACCESS_LOG_TEST_SECRET", "al-secret");

/// Python: `hmac.new(b"al-secret", b"plan\0sk_secret_key",
/// hashlib.sha256).hexdigest()[:16]`.
const FINGERPRINT: &str = "71e39fb0388785d2";
/// Python: `hashlib.sha256(b"plan\0sk_secret_key").hexdigest()[:16]`, the
/// fingerprint without a secret.
const PLAIN_FINGERPRINT: &str = "5106b66e1549f8a1";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn keys_are_logged_as_fingerprints_under_the_secret_and_replayed_alike() {
    let upstream = Upstream::start().await;
    let directory = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("access-log-secret");
    let _ = std::fs::remove_dir_all(&directory);
    std::fs::create_dir_all(&directory).unwrap();
    let log = directory.join("access.log");
    let path = directory.join("gateway.toml");
    // A plan of 2 an hour, all at once: no token comes back during the test.
    // `/wait`: a token every 3 s per client, a bucket one deep, 4 s of delay.
    std::fs::write(
        &path,
        config(&format!(
            "[store]\nkey_secret_env = \"{}\"\n\
             [limits.default_policy]\nalgorithm = \"token_bucket\"\nlimit = 2\nwindow_s = 3600\nburst = 2\n\
             [access_log]\nenabled = true\npath = \"{}\"\n\
             [[routes]]\nname = \"as_api\"\nprefix = \"/api\"\nupstream = \"http://{2}\"\n\
             [[routes]]\nname = \"as_wait\"\nprefix = \"/wait\"\nupstream = \"http://{2}\"\n\
             api_key = \"none\"\nkey = \"ip\"\nrpm = 20\nburst = 1\ndelay = \"4s\"\n",
            SECRET.0,
            log.display(),
            upstream.address
        )),
    )
    .unwrap();
    let mut gateway = Process::start_with_env(&path, &[SECRET]).await;
    let client = reqwest::Client::new();
    let url = |path: &str| format!("http://{}{path}", gateway.address);
    let mut statuses = Vec::new();
    for _ in 0..3 {
        let response = client
            .get(url("/api/x"))
            .header("authorization", "Bearer sk_secret_key")
            .send()
            .await
            .unwrap();
        statuses.push(response.status().as_u16());
    }
    // /wait: the first at once; of two more, one waits for its turn (3 s),
    // and the other, whose turn would be 6 s away, more than 4 s, is
    // refused (whichever the gateway decides first waits).
    statuses.push(
        client
            .get(url("/wait"))
            .send()
            .await
            .unwrap()
            .status()
            .as_u16(),
    );
    let second = tokio::spawn(client.get(url("/wait")).send());
    let third = tokio::spawn(client.get(url("/wait")).send());
    let mut pair = [
        second.await.unwrap().unwrap().status().as_u16(),
        third.await.unwrap().unwrap().status().as_u16(),
    ];
    pair.sort_unstable();
    assert_eq!(statuses, [200, 200, 429, 200]);
    assert_eq!(pair, [200, 429]);
    // SIGTERM: the lines of every request are written before the exit.
    gateway.signal("-TERM");
    gateway.child.wait().await.unwrap();
    let text = std::fs::read_to_string(&log).unwrap();
    assert!(!text.contains("sk_secret_key") && !text.contains(PLAIN_FINGERPRINT));
    let lines: Vec<serde_json::Value> = text
        .lines()
        .map(|line| serde_json::from_str(line).unwrap())
        .collect();
    let seen: Vec<(&str, &str, &str)> = lines
        .iter()
        .map(|line| {
            (
                line["route"].as_str().unwrap(),
                line["decision"].as_str().unwrap(),
                line["key"].as_str().unwrap_or("-"),
            )
        })
        .collect();
    // Written as responses end: the refused /wait before the one that
    // waited.
    assert_eq!(
        seen,
        [
            ("as_api", "allowed", FINGERPRINT),
            ("as_api", "allowed", FINGERPRINT),
            ("as_api", "refused", FINGERPRINT),
            ("as_wait", "allowed", "-"),
            ("as_wait", "refused", "-"),
            ("as_wait", "delayed", "-"),
        ]
    );
    assert_eq!(lines[4]["wait_us"], 0);
    assert!(lines[5]["wait_us"].as_u64().unwrap() > 0, "{}", lines[5]);
    // Replayed under the same secret: every decision reproduced, the key
    // shown by the same fingerprint.
    let replayed = std::process::Command::new(env!("CARGO_BIN_EXE_tollgate"))
        .args(["replay", "--format", "json", "--config"])
        .arg(&path)
        .arg(&log)
        .env(SECRET.0, SECRET.1)
        .output()
        .unwrap();
    assert!(replayed.status.success(), "{replayed:?}");
    let report: serde_json::Value = serde_json::from_slice(&replayed.stdout).unwrap();
    let result = &report["configs"][0];
    assert_eq!(result["agreement"]["compared"], 6, "{result}");
    assert_eq!(result["agreement"]["agreed"], 6, "{result}");
    let api = &result["routes"]["as_api"];
    assert_eq!(
        (api["requests"].as_u64(), api["refused"].as_u64()),
        (Some(3), Some(1))
    );
    assert_eq!(api["most_refused"][0]["key"], FINGERPRINT);
    let wait = &result["routes"]["as_wait"];
    assert_eq!(
        (wait["requests"].as_u64(), wait["refused"].as_u64()),
        (Some(3), Some(1))
    );
    let _ = std::fs::remove_dir_all(&directory);
}
