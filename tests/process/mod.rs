//! A `tollgate serve` process started by a test, with its JSON logs.

#![allow(dead_code, unreachable_pub, missing_docs)]

use std::path::PathBuf;
use std::process::Stdio;
use std::time::Duration;

use tokio::io::{AsyncBufReadExt, BufReader, Lines};
use tokio::process::{Child, ChildStderr, Command};

pub struct Process {
    pub child: Child,
    pub logs: Lines<BufReader<ChildStderr>>,
    /// The log lines before the one that says where it listens.
    pub early: Vec<serde_json::Value>,
    pub address: String,
    pub admin_address: String,
}

impl Process {
    /// Starts `tollgate serve --config <path>` with JSON logs and waits for it
    /// to say where it listens.
    pub async fn start(path: &PathBuf) -> Process {
        Process::start_with_env(path, &[]).await
    }

    /// [`Process::start`] with the environment variables `env` set too.
    pub async fn start_with_env(path: &PathBuf, env: &[(&str, &str)]) -> Process {
        let mut child = Command::new(env!("CARGO_BIN_EXE_tollgate"))
            .args(["serve", "--log-format", "json", "--config"])
            .arg(path)
            .env("RUST_LOG", "info")
            .envs(env.iter().copied())
            .stderr(Stdio::piped())
            .kill_on_drop(true)
            .spawn()
            .unwrap();
        let mut logs = BufReader::new(child.stderr.take().unwrap()).lines();
        let mut early = Vec::new();
        let serving = Process::wait_keeping(&mut logs, "tollgate serving", &mut early).await;
        let address = serving["fields"]["address"].as_str().unwrap().to_owned();
        let admin_address = serving["fields"]["admin_address"]
            .as_str()
            .unwrap()
            .to_owned();
        Process {
            child,
            logs,
            early,
            address,
            admin_address,
        }
    }

    /// Reads log lines until one whose message contains `message`.
    pub async fn wait_for(
        logs: &mut Lines<BufReader<ChildStderr>>,
        message: &str,
    ) -> serde_json::Value {
        Process::wait_keeping(logs, message, &mut Vec::new()).await
    }

    /// [`Process::wait_for`], keeping the lines passed over in `passed`.
    pub async fn wait_keeping(
        logs: &mut Lines<BufReader<ChildStderr>>,
        message: &str,
        passed: &mut Vec<serde_json::Value>,
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
                passed.push(entry);
            }
            panic!("the log ended before {message:?}");
        };
        tokio::time::timeout(Duration::from_secs(30), read)
            .await
            .expect("log line in time")
    }

    pub fn signal(&self, name: &str) {
        let pid = self.child.id().unwrap().to_string();
        let status = std::process::Command::new("kill")
            .args([name, &pid])
            .status()
            .unwrap();
        assert!(status.success());
    }

    pub async fn get(&self, path: &str) -> reqwest::Response {
        reqwest::Client::new()
            .get(format!("http://{}{path}", self.address))
            .header("authorization", "Bearer sk_a")
            .send()
            .await
            .unwrap()
    }
}
