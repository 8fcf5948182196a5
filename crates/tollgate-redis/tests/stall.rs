//! A Redis that stalls and resumes (paused with SIGSTOP, then SIGCONT: a
//! redis-server of the test's own, and a Redis Cluster of its own): the calls
//! whose callers were answered "unavailable" during the stall stay queued on
//! the connection and Redis runs them when it resumes; they must charge
//! nothing. Every path that writes state is used during the stall: the shared
//! calls, a call of its own (a replayed time), several limits with their own
//! units, and on a cluster a one-slot call and the steps of limits in
//! different slots.

use std::sync::Arc;
use std::time::{Duration, Instant};

use futures_util::future::join_all;
use tollgate_core::{
    Limit, LimitDecision, LimitUnits, LimiterConfig, ManualClock, Policy, Store, StoreError,
};
use tollgate_redis::{RedisConfig, RedisStore, TimeSource};
use tollgate_test_support::redis as support;
use tollgate_test_support::redis::{Stalled, wait_for_the_backlog};

/// 2100-01-01T00:00:10Z in nanoseconds: far from today (a fallback to
/// Redis's `TIME` would show), ten seconds into a minute (a 60 s window does
/// not end during the test).
const START: u64 = 4_102_444_810_000_000_000;

/// The store under test: every plan on a fixed window of 20 per 60 s, a 200 ms
/// timeout (shorter than the tests' stalls), decisions on a manual clock
/// (the calls' deadlines are on Redis's clock all the same).
fn store(url: &str, prefix: &str) -> RedisStore {
    let limits = LimiterConfig {
        policy_lists: Default::default(),
        default_policy: Policy::fixed_window(20, 60).unwrap(),
        ..LimiterConfig::default()
    };
    let mut config = RedisConfig::new(url);
    config.prefix = prefix.to_owned();
    config.timeout = Duration::from_millis(200);
    config.time = TimeSource::Clock(Arc::new(ManualClock::new(START)));
    // Redis expires keys on its own clock: keep them through the test.
    config.minimum_ttl = Duration::from_secs(600);
    RedisStore::connect(config, &limits).unwrap()
}

/// Asserts that every outcome is the store's "unavailable".
fn all_unavailable(outcomes: &[Result<Vec<LimitDecision>, StoreError>]) {
    for outcome in outcomes {
        assert!(
            matches!(outcome, Err(StoreError::Unavailable(_))),
            "{outcome:?}"
        );
    }
}

/// What each limit has left, read with 0 units (a look takes nothing), once
/// Redis answers again.
async fn remaining(store: &RedisStore, limits: &[Limit<'_>]) -> Vec<Option<u64>> {
    let looks: Vec<LimitUnits<'_>> = limits
        .iter()
        .map(|&limit| LimitUnits { limit, units: 0 })
        .collect();
    let give_up = Instant::now() + Duration::from_secs(20);
    loop {
        match store.acquire_units(&looks).await {
            Ok(decisions) => {
                return decisions
                    .iter()
                    .map(|decision| decision.decision.remaining)
                    .collect();
            }
            Err(error) => assert!(Instant::now() < give_up, "Redis did not come back: {error}"),
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// What each limit has left after a request takes one unit of each, once
/// Redis answers again.
async fn taken(store: &RedisStore, limits: &[Limit<'_>]) -> Vec<Option<u64>> {
    let give_up = Instant::now() + Duration::from_secs(20);
    loop {
        match store.acquire(limits).await {
            Ok(decisions) => {
                return decisions
                    .iter()
                    .map(|decision| decision.decision.remaining)
                    .collect();
            }
            Err(error) => assert!(Instant::now() < give_up, "Redis did not come back: {error}"),
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[cfg_attr(not(has_redis), ignore = "set REDIS_URL=redis://127.0.0.1:6379 to run")]
async fn calls_refused_during_a_stall_charge_nothing_when_redis_resumes() {
    let redis = support::OwnRedis::start();
    let url = redis.url();
    let store = store(&url, &support::prefix("stall"));
    let route = store
        .prepare(Policy::fixed_window(20, 60).unwrap())
        .unwrap();
    let search = store
        .prepare(Policy::token_bucket(20, 60, 20).unwrap())
        .unwrap();
    let plan_a = Limit::Plan("sk_a");
    let plan_b = Limit::Plan("sk_b");
    let plan_c = Limit::Plan("sk_c");
    let orders = Limit::Policy {
        key: "route:/orders",
        policy: &route,
    };
    let searches = Limit::Policy {
        key: "route:/search",
        policy: &search,
    };
    let every = [plan_a, plan_b, plan_c, orders, searches];
    // Connected, and Redis's clock known: every limit has its 20.
    assert_eq!(remaining(&store, &every).await, vec![Some(20); 5]);

    let one = [plan_a];
    let units = [
        LimitUnits {
            limit: plan_b,
            units: 3,
        },
        LimitUnits {
            limit: orders,
            units: 2,
        },
    ];
    let shared = [
        LimitUnits {
            limit: plan_c,
            units: 4,
        },
        LimitUnits {
            limit: searches,
            units: 1,
        },
    ];
    let now_us = START / 1000;
    let stalled = Stalled::stop(std::slice::from_ref(&url));
    // Shared calls: three rounds of 10 requests at once, each round's calls
    // sent after the last round's callers gave up.
    for _ in 0..3 {
        all_unavailable(&join_all((0..10).map(|_| store.acquire(&one))).await);
    }
    // Calls of their own (a replayed time), several limits with their units.
    let alone = (0..5).map(|_| store.acquire_units_at(&units, Some(now_us)));
    all_unavailable(&join_all(alone).await);
    // Several limits with their units in shared calls.
    all_unavailable(&join_all((0..5).map(|_| store.acquire_units(&shared))).await);
    drop(stalled);

    wait_for_the_backlog(std::slice::from_ref(&url)).await;
    // Untouched: 20 of 20 each.
    assert_eq!(remaining(&store, &every).await, vec![Some(20); 5]);
    // And decisions go on: the next request takes one.
    assert_eq!(taken(&store, &one).await, vec![Some(19)]);
}

/// A Redis Cluster of the test's own (`.ci/redis-cluster`: three primaries
/// on free ports), stopped when dropped.
struct OwnCluster {
    dir: std::path::PathBuf,
    url: String,
}

impl OwnCluster {
    const SCRIPT: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../../.ci/redis-cluster");

    /// Starts one and waits until it is up. Panics, failing the test, when
    /// it cannot start (`redis-server` and `redis-cli` are needed).
    fn start() -> OwnCluster {
        let dir = std::path::PathBuf::from(env!("CARGO_TARGET_TMPDIR"))
            .join(format!("stall-cluster-{}", std::process::id()));
        let output = std::process::Command::new(Self::SCRIPT)
            .arg("start")
            .arg(&dir)
            .stderr(std::process::Stdio::inherit())
            .output()
            .unwrap_or_else(|error| panic!("cannot run {}: {error}", Self::SCRIPT));
        let cluster = OwnCluster {
            dir,
            url: String::from_utf8(output.stdout).unwrap().trim().to_owned(),
        };
        assert!(
            output.status.success(),
            "cannot start a Redis Cluster (install Debian's redis-server): {}",
            output.status
        );
        cluster
    }

    fn nodes(&self) -> Vec<String> {
        support::cluster_nodes(&self.url)
    }
}

impl Drop for OwnCluster {
    fn drop(&mut self) {
        let _ = std::process::Command::new(Self::SCRIPT)
            .arg("stop")
            .arg(&self.dir)
            .status();
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[cfg_attr(
    not(has_redis_cluster),
    ignore = "set REDIS_CLUSTER_URL (a cluster; this test starts one of its own) to run"
)]
async fn calls_refused_during_a_cluster_stall_charge_nothing_when_it_resumes() {
    let cluster = OwnCluster::start();
    let store = store(&cluster.url, &support::prefix("cluster-stall"));
    let route = store
        .prepare(Policy::fixed_window(20, 60).unwrap())
        .unwrap();
    let plan_a = Limit::Plan("sk_a");
    let plan_b = Limit::Plan("sk_b");
    let orders = Limit::Policy {
        key: "route:/orders",
        policy: &route,
    };
    let every = [plan_a, plan_b, orders];
    // Connected to every node, each slot's clock known: 20 each.
    assert_eq!(remaining(&store, &every).await, vec![Some(20); 3]);

    let nodes = cluster.nodes();
    let one = [plan_a];
    let units = [
        LimitUnits {
            limit: plan_b,
            units: 3,
        },
        LimitUnits {
            limit: orders,
            units: 2,
        },
    ];
    // Short, so that the nodes do not take each other for failed (their
    // cluster-node-timeout is 2 s): every request at once.
    let stalled = Stalled::stop(&nodes);
    // One slot: each request a call of its own.
    let one_slot = join_all((0..25).map(|_| store.acquire(&one)));
    // Two slots: decided in steps.
    let two_slots = join_all((0..5).map(|_| store.acquire_units(&units)));
    let (one_slot, two_slots) = tokio::join!(one_slot, two_slots);
    all_unavailable(&one_slot);
    all_unavailable(&two_slots);
    drop(stalled);

    wait_for_the_backlog(&nodes).await;
    assert_eq!(remaining(&store, &every).await, vec![Some(20); 3]);
    assert_eq!(
        taken(&store, &[plan_b, orders]).await,
        vec![Some(19), Some(19)]
    );
}
