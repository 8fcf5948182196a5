//! `tollgate rlqs` as a process: its settings read from flags and
//! environment variables, refused with a clear message and exit code 2, and
//! a start on loopback that answers `/healthcheck` and stops on SIGTERM.

use std::io::{BufRead, BufReader, Read, Write};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

fn rlqs(arguments: &[&str], environment: &[(&str, &str)]) -> std::process::Output {
    let mut command = Command::new(env!("CARGO_BIN_EXE_tollgate"));
    command.arg("rlqs").args(arguments).env_remove("REDIS_URL");
    for (name, value) in environment {
        command.env(name, value);
    }
    command.output().unwrap()
}

#[test]
fn an_assignment_ttl_under_envoys_interval_is_refused() {
    let output = rlqs(&["--assignment-ttl", "2s"], &[]);
    assert_eq!(output.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        stderr.contains("'2s' is under 6s: Envoy 1.40 reports every 5 s"),
        "{stderr}"
    );
}

#[test]
fn settings_come_from_the_environment_too() {
    let output = rlqs(&[], &[("TOLLGATE_RLQS_MAX_STREAMS", "many")]);
    assert_eq!(output.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        stderr.contains("many") && stderr.contains("max-streams"),
        "{stderr}"
    );
}

#[test]
fn a_cap_of_zero_is_refused() {
    let output = rlqs(&["--max-streams", "0"], &[]);
    assert_eq!(output.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(stderr.contains("0 would refuse everything"), "{stderr}");
}

#[test]
fn a_tollgate_rls_setting_that_means_nothing_here_is_refused() {
    // A team reusing its rls environment: shadow mode would not make the
    // quota service a dry run, so it is refused rather than ignored.
    let output = rlqs(
        &["--config", "examples/rlqs/config"],
        &[("SHADOW_MODE", "true"), ("TOLLGATE_REFUNDS", "true")],
    );
    assert_eq!(output.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        stderr.contains("SHADOW_MODE, TOLLGATE_REFUNDS set, but tollgate rlqs does not use them"),
        "{stderr}"
    );
}

#[test]
fn it_starts_answers_its_healthcheck_and_stops_on_sigterm() {
    let directory = tempfile::tempdir().unwrap();
    std::fs::write(
        directory.path().join("quota.yaml"),
        "domain: edge\ndescriptors:\n  - key: name\n    rate_limit: {unit: second, requests_per_unit: 10}\n",
    )
    .unwrap();
    let mut child = Command::new(env!("CARGO_BIN_EXE_tollgate"))
        .args(["rlqs", "--config"])
        .arg(directory.path())
        .args([
            "--host",
            "127.0.0.1",
            "--port",
            "0",
            "--grpc-host",
            "127.0.0.1",
            "--grpc-port",
            "0",
            "--debug-host",
            "127.0.0.1",
            "--debug-port",
            "0",
        ])
        .env_remove("REDIS_URL")
        .env("LOG_FORMAT", "text")
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    // The start lines name each listener's address.
    let mut lines = BufReader::new(child.stderr.take().unwrap()).lines();
    let mut http = None;
    let deadline = Instant::now() + Duration::from_secs(30);
    while http.is_none() && Instant::now() < deadline {
        let Some(Ok(line)) = lines.next() else { break };
        if line.contains("Listening for HTTP") {
            http = line
                .split("address=")
                .nth(1)
                .map(|address| address.split_whitespace().next().unwrap_or("").to_owned());
        }
    }
    let http = http.expect("a start line names the HTTP listener");
    let mut connection = std::net::TcpStream::connect(&http).unwrap();
    connection
        .write_all(b"GET /healthcheck HTTP/1.1\r\nhost: rlqs\r\nconnection: close\r\n\r\n")
        .unwrap();
    let mut answer = String::new();
    connection.read_to_string(&mut answer).unwrap();
    assert!(answer.starts_with("HTTP/1.1 200 OK\r\n"), "{answer}");
    assert!(answer.ends_with("\r\n\r\nOK"), "{answer}");
    let status = Command::new("kill")
        .args(["-TERM", &child.id().to_string()])
        .status()
        .unwrap();
    assert!(status.success());
    let deadline = Instant::now() + Duration::from_secs(15);
    loop {
        if let Some(status) = child.try_wait().unwrap() {
            assert!(status.success(), "{status}");
            break;
        }
        assert!(
            Instant::now() < deadline,
            "still running 15 s after SIGTERM"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
}
