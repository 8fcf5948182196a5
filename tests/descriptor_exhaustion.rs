//! A `tollgate serve` process out of file descriptors keeps answering: it is
//! started with 128 of them (`prlimit`, util-linux) and an idle timeout of
//! a minute, and flooded with connections that send nothing until it can
//! accept no more. Its health check and a proxied request are then still
//! answered, each in far less than the idle timeout: a listener out of
//! descriptors closes the oldest idle connections (`tollgate-serve`'s
//! `shed.rs`) and accepts, and so does the connection to the upstream,
//! rather than take the upstream for down. Before, every client timed out
//! until the flood's connections went away.

mod process;

use std::path::PathBuf;
use std::process::Stdio;
use std::time::Duration;

use process::Process;
use tokio::io::{AsyncBufReadExt, BufReader};
use tokio::net::TcpStream;
use tokio::process::Command;
use tollgate_test_support::gateway::config;
use tollgate_test_support::loopback::Upstream;

/// The descriptors the gateway may hold.
const DESCRIPTORS: u32 = 128;

/// More connections than the gateway has descriptors.
const FLOOD: usize = 300;

#[tokio::test]
async fn out_of_descriptors_the_gateway_sheds_idle_connections_and_answers() {
    let upstream = Upstream::start().await;
    let path = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("descriptors.toml");
    let text = config(&format!(
        "[[routes]]\nprefix = \"/\"\nupstream = \"http://{}\"\n",
        upstream.address
    ));
    std::fs::write(
        &path,
        format!("idle_timeout = \"60s\"\nworkers = 1\n{text}"),
    )
    .unwrap();
    let mut child = Command::new("prlimit")
        .arg(format!("--nofile={DESCRIPTORS}:{DESCRIPTORS}"))
        .arg(env!("CARGO_BIN_EXE_tollgate"))
        .args(["serve", "--log-format", "json", "--config"])
        .arg(&path)
        .env("RUST_LOG", "info")
        .stderr(Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .expect("prlimit (util-linux) runs");
    let mut logs = BufReader::new(child.stderr.take().unwrap()).lines();
    let serving = Process::wait_for(&mut logs, "tollgate serving").await;
    let address = serving["fields"]["address"].as_str().unwrap().to_owned();
    let admin_address = serving["fields"]["admin_address"]
        .as_str()
        .unwrap()
        .to_owned();
    // The flood: the kernel completes each handshake, whether or not the
    // gateway can accept it.
    let mut flood = Vec::new();
    for _ in 0..FLOOD {
        flood.push(TcpStream::connect(&address).await.unwrap());
    }
    let client = reqwest::Client::builder()
        .timeout(Duration::from_secs(20))
        .build()
        .unwrap();
    let health = client
        .get(format!("http://{admin_address}/healthz"))
        .send()
        .await
        .expect("the health check is answered well within the idle timeout");
    assert_eq!(health.status(), 200);
    let proxied = client
        .get(format!("http://{address}/"))
        .header("authorization", "Bearer sk_a")
        .send()
        .await
        .expect("a request is answered well within the idle timeout");
    assert_eq!(proxied.status(), 200);
    // It ran out, and shed.
    let shed = Process::wait_for(&mut logs, "out of file descriptors").await;
    assert_eq!(shed["level"], "WARN");
    drop(flood);
}
