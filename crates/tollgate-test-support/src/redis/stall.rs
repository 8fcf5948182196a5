//! A Redis that stalls: its servers paused with SIGSTOP and resumed with
//! SIGCONT, as a long command, a fork or a stopped host stalls one.

use std::time::{Duration, Instant};

use super::keys::connect;
use super::stats::script_calls;

/// The process id of the Redis server (or cluster node) at `url`, from
/// `INFO server`.
pub fn process_id(url: &str) -> u32 {
    let info: String = redis::cmd("INFO")
        .arg("server")
        .query(&mut connect(url))
        .unwrap();
    info.lines()
        .find_map(|line| line.strip_prefix("process_id:"))
        .and_then(|pid| pid.trim().parse().ok())
        .expect("INFO server names the process id")
}

/// Sends `signal` (`STOP`, `CONT`) to the process `pid`.
fn signal(pid: u32, signal: &str) {
    let status = std::process::Command::new("kill")
        .arg(format!("-{signal}"))
        .arg(pid.to_string())
        .status()
        .unwrap();
    assert!(status.success(), "kill -{signal} {pid}");
}

/// Redis servers stopped with SIGSTOP, resumed with SIGCONT when this is
/// dropped (also when a test fails, so that no server stays stopped). Only
/// for servers of the test's own ([`super::OwnRedis`]) or that nothing
/// else uses meanwhile.
pub struct Stalled(Vec<u32>);

impl Stalled {
    /// Stops the servers at `urls`.
    pub fn stop(urls: &[String]) -> Stalled {
        let pids: Vec<u32> = urls.iter().map(|url| process_id(url)).collect();
        for &pid in &pids {
            signal(pid, "STOP");
        }
        Stalled(pids)
    }
}

impl Drop for Stalled {
    fn drop(&mut self) {
        for &pid in &self.0 {
            signal(pid, "CONT");
        }
    }
}

/// Waits until the servers at `urls` have run every call queued during a
/// stall: until their count of script calls stops moving for 200 ms
/// (nothing else calls scripts meanwhile), at most 20 s.
pub async fn wait_for_the_backlog(urls: &[String]) {
    let give_up = Instant::now() + Duration::from_secs(20);
    let calls = || -> Vec<u64> { urls.iter().map(|url| script_calls(url)).collect() };
    let mut seen = calls();
    let mut still = 0;
    while still < 4 {
        assert!(Instant::now() < give_up, "Redis kept running calls");
        tokio::time::sleep(Duration::from_millis(50)).await;
        let now = calls();
        still = if now == seen { still + 1 } else { 0 };
        seen = now;
    }
}
