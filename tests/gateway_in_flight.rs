//! Concurrency limits shared through Redis (issue #26), with `tollgate
//! serve` processes: three gateways on one Redis never let more than
//! `max_in_flight` requests of a key reach the upstream at once, and a
//! gateway killed with `kill -9` mid-request loses its slot once its lease's
//! TTL has ended. Real clients on the wire; only order and counts are
//! asserted, never durations. Ignored without `REDIS_URL`.

mod process;

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use process::Process;
use tollgate_test_support::gateway::config;
use tollgate_test_support::loopback::Upstream;
use tollgate_test_support::redis as redis_support;

/// A gateway process on `url` under `prefix`, every path on a route limited
/// to `max` requests in flight per API key, its leases lasting `lease_ttl`.
async fn gateway(
    url: &str,
    prefix: &str,
    upstream: &Upstream,
    max: u64,
    lease_ttl: &str,
    name: &str,
) -> Process {
    let path = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join(format!("{name}.toml"));
    let text = config(&format!(
        "[store]\nurl = \"{url}\"\nprefix = \"{prefix}\"\ntimeout = \"2s\"\nlease_ttl = \"{lease_ttl}\"\n\
         [limits.default_policy]\nalgorithm = \"fixed_window\"\nlimit = 100000\nwindow_s = 60\n\
         [[routes]]\nprefix = \"/\"\nupstream = \"http://{}\"\nmax_in_flight = {max}\n",
        upstream.address
    ));
    std::fs::write(&path, text).unwrap();
    Process::start(&path).await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[cfg_attr(not(has_redis), ignore = "set REDIS_URL=redis://127.0.0.1:6379 to run")]
async fn three_gateways_never_let_more_than_max_in_flight_through() {
    const MAX: usize = 4;
    let url = redis_support::require_redis_url();
    let prefix = redis_support::prefix("in-flight-three");
    let upstream = Upstream::start().await;
    let mut gateways = Vec::new();
    for index in 0..3 {
        let name = format!("in-flight-three-{index}");
        gateways.push(Arc::new(
            gateway(&url, &prefix, &upstream, MAX as u64, "30s", &name).await,
        ));
    }
    // 50 clients, each sending 6 requests one after another to `/busy`
    // (20 ms at the upstream), spread over the gateways, one API key.
    let barrier = Arc::new(tokio::sync::Barrier::new(50));
    let clients: Vec<_> = (0..50)
        .map(|index| {
            let gateway = Arc::clone(&gateways[index % 3]);
            let barrier = Arc::clone(&barrier);
            tokio::spawn(async move {
                barrier.wait().await;
                let mut statuses = Vec::new();
                for _ in 0..6 {
                    statuses.push(gateway.get("/busy").await.status().as_u16());
                }
                statuses
            })
        })
        .collect();
    let mut passed = 0;
    let mut refused = 0;
    for client in clients {
        for status in client.await.unwrap() {
            match status {
                200 => passed += 1,
                429 => refused += 1,
                other => panic!("status {other}"),
            }
        }
    }
    assert_eq!(passed + refused, 300);
    assert!(passed >= MAX, "{passed} passed");
    assert!(refused > 0, "50 clients at once must meet the limit");
    assert_eq!(upstream.requests(), passed);
    assert!(
        upstream.most_in_flight() <= MAX,
        "the upstream had {} in flight at once",
        upstream.most_in_flight()
    );
    // Every slot given back: no lease left in Redis (releases are sent as
    // the responses end; wait for the last of them).
    let mut left = Vec::new();
    for _ in 0..200 {
        left = redis_support::keys(&url, &format!("{prefix}:*:f"));
        if left.is_empty() {
            break;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    assert!(left.is_empty(), "leases left: {left:?}");
    redis_support::cleanup(&url, &prefix);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[cfg_attr(not(has_redis), ignore = "set REDIS_URL=redis://127.0.0.1:6379 to run")]
async fn a_killed_gateway_s_slot_comes_back_within_its_lease_ttl() {
    let url = redis_support::require_redis_url();
    let prefix = redis_support::prefix("in-flight-kill");
    let upstream = Upstream::start().await;
    let doomed = gateway(&url, &prefix, &upstream, 1, "1s", "in-flight-doomed").await;
    let survivor = gateway(&url, &prefix, &upstream, 1, "1s", "in-flight-survivor").await;
    // A request held at the upstream through the doomed gateway.
    let client = reqwest::Client::new();
    let held = tokio::spawn(
        client
            .get(format!("http://{}/slow", doomed.address))
            .header("authorization", "Bearer sk_a")
            .send(),
    );
    for _ in 0..500 {
        if upstream.requests() == 1 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    assert_eq!(upstream.requests(), 1);
    // Held across several renewals (a third of a second each): refused.
    for _ in 0..3 {
        assert_eq!(survivor.get("/x").await.status(), 429);
        tokio::time::sleep(Duration::from_millis(400)).await;
    }
    assert_eq!(survivor.get("/x").await.status(), 429);
    doomed.signal("-KILL");
    assert!(
        held.await.unwrap().is_err(),
        "the killed gateway's client is cut off"
    );
    // The lease is no longer renewed: the slot comes back once it ends, at
    // most lease_ttl (1 s) after its last renewal, which came before the
    // kill.
    let killed = std::time::Instant::now();
    let mut refusals_after_kill = 0;
    loop {
        match survivor.get("/x").await.status().as_u16() {
            200 => break,
            429 => refusals_after_kill += 1,
            other => panic!("status {other}"),
        }
        assert!(
            refusals_after_kill < 200,
            "the killed gateway's slot never came back"
        );
        tokio::time::sleep(Duration::from_millis(25)).await;
    }
    let back_after = killed.elapsed();
    // 1 s of lease, and twice as much again for the requests that poll for
    // it on a loaded machine (a lease still renewed would never come back).
    assert!(
        back_after < Duration::from_secs(3),
        "the slot came back {back_after:?} after the kill"
    );
    upstream.release.notify_waiters();
    // The survivor's request has ended: no lease is left in Redis.
    let mut left = Vec::new();
    for _ in 0..500 {
        left = redis_support::keys(&url, &format!("{prefix}:*:f"));
        if left.is_empty() {
            break;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    assert!(left.is_empty(), "leases left: {left:?}");
    redis_support::cleanup(&url, &prefix);
}
