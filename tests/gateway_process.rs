//! The `tollgate serve` process and its signals: SIGHUP with a bad config
//! keeps serving, SIGTERM lets in-flight requests finish before exiting.

mod process;

use std::path::PathBuf;
use std::time::Duration;

use process::Process;
use tollgate_test_support::gateway::config;
use tollgate_test_support::loopback::Upstream;

/// A gateway of one route to `upstream`, whose plan is a sliding log of 5 per
/// hour: the process runs on the system clock, and a sliding log has no
/// window boundary for two requests to fall on either side of.
fn config_file(name: &str, upstream: &Upstream) -> PathBuf {
    let path = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join(name);
    let text = config(&format!(
        "[limits.default_policy]\nalgorithm = \"sliding_log\"\nlimit = 5\nwindow_s = 3600\n\
         [[routes]]\nprefix = \"/\"\nupstream = \"http://{}\"\n",
        upstream.address
    ));
    std::fs::write(&path, text).unwrap();
    path
}

#[tokio::test]
async fn sighup_with_a_bad_config_keeps_serving_on_the_old_one() {
    let upstream = Upstream::start().await;
    let path = config_file("sighup.toml", &upstream);
    let mut process = Process::start(&path).await;
    assert_eq!(process.get("/").await.status(), 200);
    std::fs::write(
        &path,
        "[[routes]]\nprefix = \"no-slash\"\nupstream = \"http://127.0.0.1:1\"\n",
    )
    .unwrap();
    process.signal("-HUP");
    let rejected = Process::wait_for(&mut process.logs, "configuration rejected").await;
    assert_eq!(rejected["level"], "ERROR");
    assert_eq!(
        rejected["fields"]["error"],
        format!(
            "{}: route no-slash: the prefix must start with /",
            path.display()
        )
    );
    let response = process.get("/").await;
    assert_eq!(response.status(), 200);
    assert_eq!(response.headers()["x-ratelimit-remaining"], "3");
    // A good file is taken.
    let good = config(&format!(
        "[limits.default_policy]\nalgorithm = \"fixed_window\"\nlimit = 50\nwindow_s = 60\n\
         [[routes]]\nprefix = \"/\"\nupstream = \"http://{}\"\n",
        upstream.address
    ));
    std::fs::write(&path, good).unwrap();
    process.signal("-HUP");
    Process::wait_for(&mut process.logs, "configuration reloaded").await;
    assert_eq!(process.get("/").await.headers()["x-ratelimit-limit"], "50");
}

#[tokio::test]
async fn sigterm_drains_in_flight_requests_before_exiting() {
    let upstream = Upstream::start().await;
    let path = config_file("sigterm.toml", &upstream);
    let mut process = Process::start(&path).await;
    let address = process.address.clone();
    let in_flight = tokio::spawn(async move {
        reqwest::Client::new()
            .get(format!("http://{address}/slow"))
            .header("authorization", "Bearer sk_a")
            .send()
            .await
            .unwrap()
    });
    // Wait until the upstream holds the request.
    let arrived = async {
        while upstream.requests() == 0 {
            tokio::task::yield_now().await;
        }
    };
    tokio::time::timeout(Duration::from_secs(30), arrived)
        .await
        .unwrap();
    let admin = process.admin_address.clone();
    process.signal("-TERM");
    Process::wait_for(&mut process.logs, "draining").await;
    // While the request is in flight, readiness says no (load balancers stop
    // sending) and the admin listener still answers.
    let ready = reqwest::get(format!("http://{admin}/readyz"))
        .await
        .unwrap();
    assert_eq!(ready.status(), 503);
    upstream.release.notify_one();
    let response = in_flight.await.unwrap();
    assert_eq!(response.status(), 200);
    assert_eq!(response.text().await.unwrap(), "finally");
    let status = tokio::time::timeout(Duration::from_secs(30), process.child.wait())
        .await
        .unwrap()
        .unwrap();
    assert!(status.success(), "{status}");
}

/// Starts a gateway with `drain_timeout` and holds one request in flight at
/// its upstream (never released), then sends SIGTERM.
async fn stopping_with_a_request_held(name: &str, drain_timeout: &str) -> (Process, Upstream) {
    let upstream = Upstream::start().await;
    let path = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join(name);
    // A top-level setting: before the tables `config` writes.
    let text = format!(
        "drain_timeout = \"{drain_timeout}\"\n{}",
        config(&format!(
            "[[routes]]\nprefix = \"/\"\nupstream = \"http://{}\"\n",
            upstream.address
        ))
    );
    std::fs::write(&path, text).unwrap();
    let mut process = Process::start(&path).await;
    let address = process.address.clone();
    tokio::spawn(async move {
        let _ = reqwest::Client::new()
            .get(format!("http://{address}/slow"))
            .header("authorization", "Bearer sk_a")
            .send()
            .await;
    });
    let arrived = async {
        while upstream.requests() == 0 {
            tokio::task::yield_now().await;
        }
    };
    tokio::time::timeout(Duration::from_secs(30), arrived)
        .await
        .unwrap();
    process.signal("-TERM");
    Process::wait_for(&mut process.logs, "draining").await;
    (process, upstream)
}

#[tokio::test]
async fn a_request_still_in_flight_after_the_drain_timeout_is_cut_off() {
    let (mut process, _upstream) = stopping_with_a_request_held("drain.toml", "1s").await;
    Process::wait_for(&mut process.logs, "cut off").await;
    // The process exits although the upstream never answered.
    let status = tokio::time::timeout(Duration::from_secs(30), process.child.wait())
        .await
        .expect("the gateway did not exit after its drain timeout")
        .unwrap();
    assert!(status.success(), "{status}");
}

#[tokio::test]
async fn a_second_sigterm_stops_at_once() {
    // A drain timeout far longer than the test waits: only the second
    // signal can make the process exit within it.
    let (mut process, _upstream) = stopping_with_a_request_held("second.toml", "1h").await;
    process.signal("-TERM");
    Process::wait_for(&mut process.logs, "a second signal").await;
    let status = tokio::time::timeout(Duration::from_secs(30), process.child.wait())
        .await
        .expect("the gateway did not exit on the second signal")
        .unwrap();
    assert!(status.success(), "{status}");
}

#[tokio::test]
async fn sighup_reads_the_known_keys_again_and_keeps_them_when_the_file_cannot_be_read() {
    let upstream = Upstream::start().await;
    let directory = PathBuf::from(env!("CARGO_TARGET_TMPDIR"));
    let keys = directory.join("sighup-known.keys");
    std::fs::write(&keys, "sk_b\n").unwrap();
    let path = directory.join("sighup-known.toml");
    std::fs::write(
        &path,
        config(&format!(
            "[keys]\nknown = \"{}\"\nunknown = \"refuse\"\n\
             [[routes]]\nprefix = \"/\"\nupstream = \"http://{}\"\n",
            keys.display(),
            upstream.address
        )),
    )
    .unwrap();
    let mut process = Process::start(&path).await;
    let mut passed = Vec::new();
    // `get` sends sk_a, not listed: refused before any budget.
    assert_eq!(process.get("/").await.status(), 401);
    std::fs::write(&keys, "sk_b\nsk_a\n").unwrap();
    process.signal("-HUP");
    Process::wait_keeping(&mut process.logs, "configuration reloaded", &mut passed).await;
    assert_eq!(process.get("/").await.status(), 200);
    // Gone: the list in force is kept, and the log says so, with no key.
    std::fs::remove_file(&keys).unwrap();
    process.signal("-HUP");
    let kept = Process::wait_keeping(
        &mut process.logs,
        "the file of known keys cannot be read: the list in force is kept",
        &mut passed,
    )
    .await;
    assert_eq!(kept["level"], "WARN");
    assert_eq!(kept["fields"]["kept"], 2);
    Process::wait_keeping(&mut process.logs, "configuration reloaded", &mut passed).await;
    assert_eq!(process.get("/").await.status(), 200);
    // Malformed: kept likewise, its line named, no key shown.
    std::fs::write(&keys, "sk_a\nsha256:zz\n").unwrap();
    process.signal("-HUP");
    let malformed = Process::wait_keeping(
        &mut process.logs,
        "the file of known keys cannot be read: the list in force is kept",
        &mut passed,
    )
    .await;
    let error = malformed["fields"]["error"].as_str().unwrap();
    assert!(error.contains("line 2"), "{error}");
    Process::wait_keeping(&mut process.logs, "configuration reloaded", &mut passed).await;
    assert_eq!(process.get("/").await.status(), 200);
    for line in passed.iter().chain([&kept, &malformed]) {
        let text = line.to_string();
        assert!(
            !text.contains("sk_a") && !text.contains("sk_b"),
            "a key in the log: {text}"
        );
    }
}
