//! The `tollgate serve` process and its signals: SIGHUP with a bad config
//! keeps serving, SIGTERM lets in-flight requests finish before exiting.

#[path = "support/process.rs"]
mod process;
#[path = "../crates/tollgate-gateway/tests/support/mod.rs"]
mod serve;

use std::path::PathBuf;
use std::time::Duration;

use process::Process;
use serve::Upstream;

fn config_file(name: &str, upstream: &Upstream) -> PathBuf {
    let path = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join(name);
    let text = serve::config(&format!(
        "[[routes]]\nprefix = \"/\"\nupstream = \"http://{}\"\n",
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
    assert!(
        rejected["fields"]["error"]
            .as_str()
            .unwrap()
            .contains("must start with /")
    );
    let response = process.get("/").await;
    assert_eq!(response.status(), 200);
    assert_eq!(response.headers()["x-ratelimit-remaining"], "3");
    // A good file is taken.
    let good = serve::config(&format!(
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
