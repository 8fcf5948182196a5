//! Redis Sentinel (issue #28): the store on
//! `redis-sentinel://HOST:PORT,.../MASTER` reaches the primary three
//! sentinels name, through a failover made by `SENTINEL FAILOVER` and then
//! through one forced by killing the primary, while requests flow. Debian's
//! redis-server runs the primary, its replica and the three sentinels
//! (`--sentinel`) on loopback. Checked: limits keep working after each
//! failover (on the state the replica had); no request waits past the
//! store's timeout; while there is no primary the store answers with an
//! error, which the failure policy then decides.

use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use tollgate_core::{Limit, LimiterConfig, Policy, Store};
use tollgate_redis::{RedisConfig, RedisStore};
use tollgate_test_support::loopback::free_port;
use tollgate_test_support::redis as support;

const MASTER: &str = "tollgate-test";
/// The store's timeout: every call answers within it (and a little).
const TIMEOUT: Duration = Duration::from_millis(300);
/// What a call may take past the timeout on a busy machine.
const SLACK: Duration = Duration::from_millis(400);

/// The processes, killed when dropped.
struct Processes(Vec<(u16, Child)>);

impl Processes {
    fn kill(&mut self, port: u16) {
        if let Some((_, child)) = self.0.iter_mut().find(|(each, _)| *each == port) {
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}

impl Drop for Processes {
    fn drop(&mut self) {
        for (_, child) in &mut self.0 {
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}

fn redis_server(arguments: &[&str]) -> Child {
    Command::new("redis-server")
        .args(arguments)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("redis-server runs (apt-get install redis-server)")
}

fn query<T: redis::FromRedisValue>(port: u16, command: &mut redis::Cmd) -> redis::RedisResult<T> {
    let client = redis::Client::open(format!("redis://127.0.0.1:{port}"))?;
    let mut connection = client.get_connection_with_timeout(Duration::from_secs(1))?;
    command.query(&mut connection)
}

/// Waits (at most 30 s) until `ready` holds.
fn wait_until(what: &str, ready: impl Fn() -> bool) {
    for _ in 0..300 {
        if ready() {
            return;
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    panic!("{what} did not happen within 30 s");
}

/// The port of the primary the sentinel on `sentinel` names.
fn primary_port(sentinel: u16) -> Option<u16> {
    let address: Vec<String> = query(
        sentinel,
        redis::cmd("SENTINEL")
            .arg("GET-MASTER-ADDR-BY-NAME")
            .arg(MASTER),
    )
    .ok()?;
    address.get(1)?.parse().ok()
}

/// One decision of key `k`, timed: `Ok(remaining)` or `Err` (the store's
/// error, which the failure policy answers).
async fn decide(store: &RedisStore) -> (Result<u64, String>, Duration) {
    let started = Instant::now();
    let answer = store
        .acquire(&[Limit::Plan("sk_sentinel")])
        .await
        .map(|decisions| decisions[0].decision.remaining.unwrap_or(0))
        .map_err(|error| error.to_string());
    (answer, started.elapsed())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[cfg_attr(
    not(has_redis),
    ignore = "set REDIS_URL=redis://127.0.0.1:6379 to run (needs redis-server too)"
)]
async fn the_store_follows_the_primary_through_failovers() {
    let (primary, replica) = (free_port(), free_port());
    let sentinels = [free_port(), free_port(), free_port()];
    let directory = tempfile::tempdir().unwrap();
    let mut processes = Processes(Vec::new());
    let data = |port: u16| {
        // Its own directory: a replica's full sync writes its dump there,
        // not in the crate's.
        let own = directory.path().join(format!("redis-{port}"));
        std::fs::create_dir_all(&own).unwrap();
        vec![
            "--dir".to_owned(),
            own.display().to_string(),
            "--port".to_owned(),
            port.to_string(),
            "--bind".to_owned(),
            "127.0.0.1".to_owned(),
            "--save".to_owned(),
            String::new(),
            "--appendonly".to_owned(),
            "no".to_owned(),
        ]
    };
    let arguments = data(primary);
    processes.0.push((
        primary,
        redis_server(&arguments.iter().map(String::as_str).collect::<Vec<_>>()),
    ));
    let mut arguments = data(replica);
    arguments.extend([
        "--replicaof".to_owned(),
        "127.0.0.1".to_owned(),
        primary.to_string(),
    ]);
    processes.0.push((
        replica,
        redis_server(&arguments.iter().map(String::as_str).collect::<Vec<_>>()),
    ));
    for port in sentinels {
        let path = directory.path().join(format!("sentinel-{port}.conf"));
        std::fs::write(
            &path,
            format!(
                "port {port}\nbind 127.0.0.1\n\
                 sentinel monitor {MASTER} 127.0.0.1 {primary} 2\n\
                 sentinel down-after-milliseconds {MASTER} 1000\n\
                 sentinel failover-timeout {MASTER} 3000\n"
            ),
        )
        .unwrap();
        processes
            .0
            .push((port, redis_server(&[path.to_str().unwrap(), "--sentinel"])));
    }
    // The sentinels know the replica and one another.
    wait_until("the sentinels' discovery", || {
        sentinels.iter().all(|sentinel| {
            let replicas: redis::RedisResult<Vec<redis::Value>> = query(
                *sentinel,
                redis::cmd("SENTINEL").arg("REPLICAS").arg(MASTER),
            );
            let others: redis::RedisResult<Vec<redis::Value>> = query(
                *sentinel,
                redis::cmd("SENTINEL").arg("SENTINELS").arg(MASTER),
            );
            replicas.is_ok_and(|list| list.len() == 1) && others.is_ok_and(|list| list.len() == 2)
        })
    });

    let url = format!(
        "redis-sentinel://127.0.0.1:{},127.0.0.1:{},127.0.0.1:{}/{MASTER}",
        sentinels[0], sentinels[1], sentinels[2]
    );
    let mut config = RedisConfig::new(&url);
    config.prefix = format!("tollgate-test-sentinel-{}", std::process::id());
    config.timeout = TIMEOUT;
    let limits = LimiterConfig {
        default_policy: Policy::fixed_window(1000, 3600).unwrap(),
        ..LimiterConfig::default()
    };
    let store = RedisStore::connect(config, &limits).unwrap();

    // On the first primary: 5 decisions.
    let mut remaining = Vec::new();
    for _ in 0..5 {
        let (answer, _) = decide(&store).await;
        remaining.push(answer.unwrap());
    }
    // Replicated before the failover (WAIT: the replica has every write).
    let _: i64 = query(primary, redis::cmd("WAIT").arg(1).arg(1000)).unwrap();

    // A failover asked for, requests flowing: each answers within the
    // timeout, and once the replica is the primary they are decided again,
    // on the state it had.
    // (A sentinel refuses, NOGOODSLAVE, until it has seen the replica's
    // link up in its periodic INFO: asked again until it accepts.)
    wait_until("the failover accepted", || {
        query::<String>(
            sentinels[0],
            redis::cmd("SENTINEL").arg("FAILOVER").arg(MASTER),
        )
        .is_ok()
    });
    let mut decided_on_the_new = None;
    for _ in 0..200 {
        let (answer, took) = decide(&store).await;
        assert!(took <= TIMEOUT + SLACK, "a decision took {took:?}");
        if primary_port(sentinels[0]) == Some(replica)
            && let Ok(left) = answer
        {
            decided_on_the_new = Some(left);
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let left = decided_on_the_new.expect("decided on the new primary");
    // 1000 a window: every request so far was counted at most once, and
    // none of the five made before the failover was lost.
    assert!(left < remaining[4], "{left} left after {remaining:?}");
    // Once the old primary is a replica, every decision is the new
    // primary's: the script runs there, never on the old one (a replica
    // does not count replicated effects as script calls).
    wait_until("the old primary turning replica", || {
        let role: redis::RedisResult<Vec<redis::Value>> = query(primary, &mut redis::cmd("ROLE"));
        role.is_ok_and(
            |role| matches!(role.first(), Some(redis::Value::BulkString(kind)) if kind == b"slave"),
        )
    });
    let url_of = |port: u16| format!("redis://127.0.0.1:{port}");
    let (old_before, new_before) = (
        support::script_calls(&url_of(primary)),
        support::script_calls(&url_of(replica)),
    );
    for _ in 0..5 {
        let (answer, took) = decide(&store).await;
        assert!(took <= TIMEOUT + SLACK, "a decision took {took:?}");
        answer.unwrap();
    }
    assert_eq!(support::script_calls(&url_of(primary)), old_before);
    assert!(support::script_calls(&url_of(replica)) >= new_before + 5);

    // The new primary killed: until the sentinels promote the old one (a
    // replica now), calls fail within the timeout (the failure policy
    // answers them); then they are decided again.
    let _: i64 = query(replica, redis::cmd("WAIT").arg(1).arg(1000)).unwrap_or(0);
    processes.kill(replica);
    let mut failed = 0;
    let mut decided_again = None;
    for _ in 0..400 {
        let (answer, took) = decide(&store).await;
        assert!(took <= TIMEOUT + SLACK, "a decision took {took:?}");
        match answer {
            Err(_) => failed += 1,
            Ok(left) if primary_port(sentinels[1]) == Some(primary) => {
                decided_again = Some(left);
                break;
            }
            Ok(_) => {}
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert!(failed > 0, "no call failed while there was no primary");
    let again = decided_again.expect("decided on the promoted replica");
    assert!(again < 1000, "the key's count survived: {again} left");
}
