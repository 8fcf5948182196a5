//! The `tollgate serve` process and its signals: SIGHUP with a bad config
//! keeps serving, SIGTERM lets in-flight requests finish before exiting.

mod serve;

use std::path::PathBuf;
use std::process::Stdio;
use std::time::Duration;

use serve::Upstream;
use tokio::io::{AsyncBufReadExt, BufReader, Lines};
use tokio::process::{Child, ChildStderr, Command};

struct Process {
    child: Child,
    logs: Lines<BufReader<ChildStderr>>,
    address: String,
}

impl Process {
    /// Starts `tollgate serve --config <path>` with JSON logs and waits for it
    /// to say where it listens.
    async fn start(path: &PathBuf) -> Process {
        let mut child = Command::new(env!("CARGO_BIN_EXE_tollgate"))
            .args(["serve", "--log-format", "json", "--config"])
            .arg(path)
            .env("RUST_LOG", "info")
            .stderr(Stdio::piped())
            .kill_on_drop(true)
            .spawn()
            .unwrap();
        let mut logs = BufReader::new(child.stderr.take().unwrap()).lines();
        let serving = Process::wait_for(&mut logs, "tollgate serving").await;
        let address = serving["fields"]["address"].as_str().unwrap().to_owned();
        Process {
            child,
            logs,
            address,
        }
    }

    /// Reads log lines until one whose message contains `message`.
    async fn wait_for(
        logs: &mut Lines<BufReader<ChildStderr>>,
        message: &str,
    ) -> serde_json::Value {
        let read = async {
            while let Some(line) = logs.next_line().await.unwrap() {
                let entry: serde_json::Value = serde_json::from_str(&line).unwrap();
                if entry["fields"]["message"]
                    .as_str()
                    .is_some_and(|text| text.contains(message))
                {
                    return entry;
                }
            }
            panic!("the log ended before {message:?}");
        };
        tokio::time::timeout(Duration::from_secs(30), read)
            .await
            .expect("log line in time")
    }

    fn signal(&self, name: &str) {
        let pid = self.child.id().unwrap().to_string();
        let status = std::process::Command::new("kill")
            .args([name, &pid])
            .status()
            .unwrap();
        assert!(status.success());
    }

    async fn get(&self, path: &str) -> reqwest::Response {
        reqwest::Client::new()
            .get(format!("http://{}{path}", self.address))
            .header("authorization", "Bearer sk_a")
            .send()
            .await
            .unwrap()
    }
}

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
    process.signal("-TERM");
    Process::wait_for(&mut process.logs, "draining").await;
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
