//! The Redis store on a Redis Cluster (`REDIS_CLUSTER_URL`, started by
//! `.ci/run`): keys spread over every node, each limit exact; a plan and a
//! route budget in different slots decided all or nothing, also under races;
//! tiers, resets, the shared default policy and the key count across nodes.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};

use tollgate_core::{Limit, LimiterConfig, ManualClock, Policy, PreparedPolicy, Store};
use tollgate_redis::{RedisConfig, RedisStore, TimeSource};
use tollgate_test_support::redis as support;

/// 2100-01-01T00:00:10Z in nanoseconds: ten seconds into a minute, so a
/// 60-second window does not end during a test; far from today, so a
/// decision that took Redis's clock instead would show.
const START: u64 = 4_102_444_810_000_000_000;

/// A store on the cluster at `url` on `clock`, learning of a new default
/// policy only by message.
fn store(url: &str, prefix: &str, clock: &Arc<ManualClock>) -> RedisStore {
    let mut config = LimiterConfig::default(); // default 5 per 60 s; pro 20
    config
        .tiers
        .insert("tiny".into(), Policy::fixed_window(2, 60).unwrap());
    config
        .tiers
        .insert("wide".into(), Policy::fixed_window(1000, 60).unwrap());
    config
        .tiers
        .insert("twenty".into(), Policy::sliding_log(20, 60).unwrap());
    let mut redis = RedisConfig::new(url);
    redis.prefix = prefix.to_owned();
    redis.timeout = Duration::from_secs(5);
    redis.time = TimeSource::Clock(Arc::clone(clock) as Arc<dyn tollgate_core::Clock>);
    redis.minimum_ttl = Duration::from_secs(600);
    support::by_message_only(&mut redis);
    RedisStore::connect(redis, &config).unwrap()
}

/// Limited keys' keys (`PREFIX:{DIGEST}:...`) on each node of the cluster.
fn keys_per_node(url: &str, prefix: &str) -> Vec<usize> {
    support::cluster_nodes(url)
        .iter()
        .map(|node| support::keys(node, &format!("{prefix}:{{*")).len())
        .collect()
}

#[tokio::test]
#[cfg_attr(
    not(has_redis_cluster),
    ignore = "set REDIS_CLUSTER_URL to run (.ci/redis-cluster start DIR prints one)"
)]
async fn keys_spread_over_every_node_and_each_limit_is_exact() {
    let url = support::require_cluster_url();
    let prefix = support::prefix("cluster-spread");
    let clock = Arc::new(ManualClock::new(START));
    let store = store(&url, &prefix, &clock);
    // 30 keys, 7 requests each, 5 per minute: 5 pass per key.
    for key in 0..30 {
        let name = format!("sk_spread_{key}");
        let mut passed = 0;
        for _ in 0..7 {
            let decisions = store.acquire(&[Limit::Plan(&name)]).await.unwrap();
            passed += decisions[0].decision.allowed;
        }
        assert_eq!(passed, 5, "{name}");
    }
    // Every node holds some of the 30 keys. (A key's slot comes from its
    // name alone, not the prefix, and the cluster splits the slots evenly:
    // the same keys land on the same nodes in every run.)
    let per_node = keys_per_node(&url, &prefix);
    assert_eq!(per_node.iter().sum::<usize>(), 30);
    assert!(per_node.iter().all(|&keys| keys > 0), "{per_node:?}");
    // stats counts the state keys on every node.
    assert_eq!(store.stats().await.unwrap().tracked_keys, 30);
    // A minute later, every key has its 5 again.
    clock.advance(Duration::from_secs(60));
    let decisions = store.acquire(&[Limit::Plan("sk_spread_0")]).await.unwrap();
    assert_eq!(decisions[0].decision.remaining, Some(4));
    support::cleanup(&url, &prefix);
}

#[tokio::test]
#[cfg_attr(
    not(has_redis_cluster),
    ignore = "set REDIS_CLUSTER_URL to run (.ci/redis-cluster start DIR prints one)"
)]
async fn a_plan_and_a_route_in_different_slots_are_all_or_nothing() {
    let url = support::require_cluster_url();
    let prefix = support::prefix("cluster-split");
    let clock = Arc::new(ManualClock::new(START));
    let store = store(&url, &prefix, &clock);
    // The route allows 3 per minute, the plan 5: the route refuses first and
    // the plan is charged only for the 3 that passed.
    let route = store.prepare(Policy::fixed_window(3, 60).unwrap()).unwrap();
    let limits = [
        Limit::Plan("sk_split"),
        Limit::Policy {
            key: "route:/orders",
            policy: &route,
        },
    ];
    for expected_remaining in [2, 1, 0] {
        let decisions = store.acquire(&limits).await.unwrap();
        assert!(decisions[0].decision.is_allowed());
        assert!(decisions[1].decision.is_allowed());
        assert_eq!(decisions[1].decision.remaining, Some(expected_remaining));
    }
    let refused = store.acquire(&limits).await.unwrap();
    assert!(!refused[1].decision.is_allowed());
    // 50 s left in the window (10 s into the minute).
    assert_eq!(refused[1].decision.retry_after, Duration::from_secs(50));
    assert_eq!(refused[0].decision.allowed, 0);
    assert_eq!(refused[0].decision.remaining, Some(2), "plan: 5 - 3");
    let report = store.inspect("sk_split").await.unwrap();
    assert_eq!(report.state.unwrap().remaining, Some(2));

    // The plan refuses first ("tiny": 2 per minute): the route is charged
    // only for the 2 that passed.
    store.assign_tier("sk_tiny", "tiny").await.unwrap();
    let wide = store
        .prepare(Policy::fixed_window(10, 60).unwrap())
        .unwrap();
    let limits = [
        Limit::Plan("sk_tiny"),
        Limit::Policy {
            key: "route:/search",
            policy: &wide,
        },
    ];
    let mut passed = 0;
    for _ in 0..4 {
        let decisions = store.acquire(&limits).await.unwrap();
        assert_eq!(decisions[0].tier.as_deref(), Some("tiny"));
        passed += decisions[0].decision.allowed;
    }
    assert_eq!(passed, 2);
    let route_only = [Limit::Policy {
        key: "route:/search",
        policy: &wide,
    }];
    let decisions = store.acquire(&route_only).await.unwrap();
    assert_eq!(
        decisions[0].decision.remaining,
        Some(7),
        "route: 10 - 2 - 1"
    );

    // A reset frees the plan again.
    assert!(store.reset("sk_split").await.unwrap());
    assert_eq!(store.inspect("sk_split").await.unwrap().state, None);
    support::cleanup(&url, &prefix);
}

/// 64 requests at once for the plan of `key` and the route `route`: how many
/// passed both (each must pass both or neither).
async fn race(store: &Arc<RedisStore>, key: &'static str, route: &Arc<PreparedPolicy>) -> u64 {
    let tasks: Vec<_> = (0..64)
        .map(|_| {
            let store = Arc::clone(store);
            let route = Arc::clone(route);
            tokio::spawn(async move {
                let limits = [
                    Limit::Plan(key),
                    Limit::Policy {
                        key: "route:/race",
                        policy: &route,
                    },
                ];
                let decisions = store.acquire(&limits).await.unwrap();
                let both = decisions[0].decision.is_allowed() && decisions[1].decision.is_allowed();
                let neither =
                    !decisions[0].decision.is_allowed() && !decisions[1].decision.is_allowed();
                assert!(both || neither, "all or nothing: {decisions:?}");
                u64::from(both)
            })
        })
        .collect();
    let mut passed = 0;
    for task in tasks {
        passed += task.await.unwrap();
    }
    passed
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[cfg_attr(
    not(has_redis_cluster),
    ignore = "set REDIS_CLUSTER_URL to run (.ci/redis-cluster start DIR prints one)"
)]
async fn concurrent_requests_across_slots_give_back_what_a_refusal_took() {
    let url = support::require_cluster_url();
    let prefix = support::prefix("cluster-race");
    let clock = Arc::new(ManualClock::new(START));
    let store = Arc::new(store(&url, &prefix, &clock));
    // The route (10 per minute) refuses: most requests pass the check and
    // race for its last units; those it refuses give the plan's unit back.
    store.assign_tier("sk_race", "wide").await.unwrap();
    let route = Arc::new(
        store
            .prepare(Policy::fixed_window(10, 60).unwrap())
            .unwrap(),
    );
    assert_eq!(race(&store, "sk_race", &route).await, 10);
    let plan = store.inspect("sk_race").await.unwrap();
    assert_eq!(plan.state.unwrap().remaining, Some(990), "1000 - 10");

    // Both can refuse (a plan of 20 in a sliding log, a route of 10 in a
    // token bucket). Units are taken one limit after the other in the same
    // order by every request, so the 10 route units go to requests that hold
    // a plan unit: exactly 10 pass, and each limit holds exactly those.
    store.assign_tier("sk_both", "twenty").await.unwrap();
    let bucket = Arc::new(
        store
            .prepare(Policy::token_bucket(1, 60, 10).unwrap())
            .unwrap(),
    );
    let passed = race(&store, "sk_both", &bucket).await;
    assert_eq!(passed, 10);
    let plan = store.inspect("sk_both").await.unwrap();
    assert_eq!(plan.state.unwrap().remaining, Some(20 - passed));
    let route_only = [Limit::Policy {
        key: "route:/race",
        policy: &bucket,
    }];
    let read = store.acquire(&route_only).await.unwrap();
    // One more taken now, if any was left: 10 - passed - 1.
    assert_eq!(
        read[0].decision.allowed + read[0].decision.remaining.unwrap(),
        10 - passed
    );
    support::cleanup(&url, &prefix);
}

#[tokio::test]
#[cfg_attr(
    not(has_redis_cluster),
    ignore = "set REDIS_CLUSTER_URL to run (.ci/redis-cluster start DIR prints one)"
)]
async fn decisions_on_redis_time_leave_keys_with_ttls() {
    let url = support::require_cluster_url();
    // Redis's own TIME, the default: every node's clock.
    let prefix = support::prefix("cluster-time");
    let mut redis = RedisConfig::new(url.as_str());
    redis.prefix = prefix.clone();
    redis.timeout = Duration::from_secs(5);
    let store = RedisStore::connect(redis, &LimiterConfig::default()).unwrap();
    let decisions = store.acquire(&[Limit::Plan("sk_time")]).await.unwrap();
    assert_eq!(decisions[0].decision.remaining, Some(4));
    // The state key has a TTL, no longer than the 60-second window (the
    // shared configuration, `PREFIX:config`, has none by design).
    let mut states = 0;
    for node in support::cluster_nodes(&url) {
        for (key, ttl) in support::keys_and_ttls(&node, &prefix) {
            if key.ends_with(":config") {
                continue;
            }
            states += 1;
            assert!(ttl > 0 && ttl <= 60_000, "{key}: {ttl}");
        }
    }
    assert_eq!(states, 1);
    support::cleanup(&url, &prefix);
}

/// The fields `policy` and `generation` of `PREFIX:config`, from the node
/// holding it, once one does (waited for up to 30 s).
async fn shared_policy(url: &str, prefix: &str) -> (Option<String>, Option<String>) {
    let key = format!("{prefix}:config");
    for _ in 0..3000 {
        for node in support::cluster_nodes(url) {
            if support::keys(&node, &key).len() == 1 {
                return redis::cmd("HMGET")
                    .arg(&key)
                    .arg("policy")
                    .arg("generation")
                    .query(&mut support::connect(&node))
                    .unwrap();
            }
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    panic!("no node holds {key}");
}

#[tokio::test]
#[cfg_attr(
    not(has_redis_cluster),
    ignore = "set REDIS_CLUSTER_URL to run (.ci/redis-cluster start DIR prints one)"
)]
async fn a_default_policy_replaced_through_one_gateway_reaches_another() {
    let url = support::require_cluster_url();
    let prefix = support::prefix("cluster-configure");
    let clock = Arc::new(ManualClock::new(START));
    let first = store(&url, &prefix, &clock);
    let second = store(&url, &prefix, &clock);
    // The first read sets the file's policy in Redis, with its generation
    // (in one MULTI, on the node of `PREFIX:config`'s slot).
    let shared = shared_policy(&url, &prefix).await;
    assert_eq!(
        shared,
        (
            Some(r#"{"algorithm":"fixed_window","limit":5,"window_s":60}"#.to_owned()),
            Some("0".to_owned())
        )
    );
    let policy = Policy::fixed_window(2, 60).unwrap();
    first.configure(policy).await.unwrap();
    // The change travels through a Redis channel: wait for it to arrive.
    assert_eq!(
        support::wait_for_default_policy(&second, policy).await,
        policy
    );
    let mut passed = 0;
    for _ in 0..4 {
        passed += second
            .acquire(&[Limit::Plan("sk_configured")])
            .await
            .unwrap()[0]
            .decision
            .allowed;
    }
    assert_eq!(passed, 2);
    support::cleanup(&url, &prefix);
}

#[tokio::test]
#[cfg_attr(
    not(has_redis_cluster),
    ignore = "set REDIS_CLUSTER_URL to run (.ci/redis-cluster start DIR prints one)"
)]
async fn a_first_node_that_never_answers_does_not_stop_the_shared_default_policy() {
    let url = support::require_cluster_url();
    let prefix = support::prefix("cluster-silent-node");
    let clock = Arc::new(ManualClock::new(START));
    let first = store(&url, &prefix, &clock);
    let policy = Policy::fixed_window(3, 60).unwrap();
    first.configure(policy).await.unwrap();
    // The first node listed, where the channel is subscribed first, is a
    // socket that accepts connections (the kernel's backlog) and never
    // answers; the real nodes follow it.
    let silent = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let nodes = url.trim_start_matches("redis-cluster://");
    let through_silent = format!("redis-cluster://{},{nodes}", silent.local_addr().unwrap());
    let mut redis = RedisConfig::new(through_silent.as_str());
    redis.prefix = prefix.clone();
    redis.timeout = Duration::from_millis(1500);
    redis.time = TimeSource::Clock(Arc::clone(&clock) as Arc<dyn tollgate_core::Clock>);
    // Subscribing on the silent node is given up after half a second; no
    // re-read after a silence, so a change arrives by subscribing or by
    // message only.
    redis.policy_subscribe_timeout = Duration::from_millis(500);
    redis.policy_resubscribe_after = Duration::from_millis(50);
    support::by_message_only(&mut redis);
    let late = RedisStore::connect(redis, &LimiterConfig::default()).unwrap();
    // The policy already in Redis is read without waiting for the channel,
    // whose subscription never completes.
    assert_eq!(
        support::wait_for_default_policy(&late, policy).await,
        policy
    );
    // A later change arrives once the channel is subscribed on the next
    // node (the read after subscribing, or the message).
    let later = Policy::fixed_window(4, 60).unwrap();
    first.configure(later).await.unwrap();
    assert_eq!(support::wait_for_default_policy(&late, later).await, later);
    // Subscribed on a real node now, the next change can only come by
    // message.
    let last = Policy::fixed_window(6, 60).unwrap();
    first.configure(last).await.unwrap();
    assert_eq!(support::wait_for_default_policy(&late, last).await, last);
    drop(silent);
    support::cleanup(&url, &prefix);
}

#[tokio::test]
#[cfg_attr(
    not(has_redis_cluster),
    ignore = "set REDIS_CLUSTER_URL to run (.ci/redis-cluster start DIR prints one)"
)]
async fn a_cluster_node_given_as_a_server_is_named_in_the_error() {
    let url = support::require_cluster_url();
    // One node of the cluster behind `redis://`: a call whose keys sit in two
    // slots is refused (CROSSSLOT), a key served by another node is moved
    // (MOVED); either way the error says which URL to give.
    let node = support::cluster_nodes(&url).remove(0);
    let prefix = support::prefix("cluster-as-server");
    let mut redis = RedisConfig::new(node.as_str());
    redis.prefix = prefix.clone();
    redis.timeout = Duration::from_secs(5);
    let store = RedisStore::connect(redis, &LimiterConfig::default()).unwrap();
    let route = store
        .prepare(Policy::token_bucket(10, 60, 10).unwrap())
        .unwrap();
    let limits = [
        Limit::Plan("sk_a"),
        Limit::Policy {
            key: "route:/x",
            policy: &route,
        },
    ];
    let error = store.acquire(&limits).await.unwrap_err().to_string();
    assert!(
        error.contains("if this Redis is part of a cluster, give its nodes as redis-cluster://"),
        "{error}"
    );
    support::cleanup(&url, &prefix);
}

/// A TCP relay to `target` that can be frozen: it then keeps every connection
/// open and passes nothing on, as a node that stopped answering.
async fn freezable_relay(target: String) -> (std::net::SocketAddr, Arc<AtomicBool>) {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let address = listener.local_addr().unwrap();
    let frozen = Arc::new(AtomicBool::new(false));
    let relay_frozen = Arc::clone(&frozen);
    tokio::spawn(async move {
        while let Ok((client, _)) = listener.accept().await {
            let Ok(server) = tokio::net::TcpStream::connect(&target).await else {
                continue;
            };
            let (client_read, client_write) = client.into_split();
            let (server_read, server_write) = server.into_split();
            for (mut from, mut to) in [(client_read, server_write), (server_read, client_write)] {
                let frozen = Arc::clone(&relay_frozen);
                tokio::spawn(async move {
                    let mut buffer = [0u8; 4096];
                    loop {
                        let Ok(read) = from.read(&mut buffer).await else {
                            return;
                        };
                        if read == 0 {
                            return;
                        }
                        while frozen.load(Ordering::SeqCst) {
                            tokio::time::sleep(Duration::from_millis(50)).await;
                        }
                        if to.write_all(&buffer[..read]).await.is_err() {
                            return;
                        }
                    }
                });
            }
        }
    });
    (address, frozen)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[cfg_attr(
    not(has_redis_cluster),
    ignore = "set REDIS_CLUSTER_URL to run (.ci/redis-cluster start DIR prints one)"
)]
async fn a_node_that_stops_answering_after_subscribing_is_left_for_the_next() {
    let url = support::require_cluster_url();
    let prefix = support::prefix("cluster-frozen-node");
    let nodes: Vec<String> = url
        .trim_start_matches("redis-cluster://")
        .split(',')
        .map(str::to_owned)
        .collect();
    // The channel is subscribed first through a relay to the last node; the
    // next node listed is the first real one.
    let (relay, frozen) = freezable_relay(nodes[nodes.len() - 1].clone()).await;
    let mut redis =
        RedisConfig::new(format!("redis-cluster://{relay},{}", nodes.join(",")).as_str());
    redis.prefix = prefix.clone();
    redis.timeout = Duration::from_millis(1500);
    // A silence of 300 ms is followed by a ping, which gets 500 ms.
    redis.policy_reread_after = Duration::from_millis(300);
    redis.policy_subscribe_timeout = Duration::from_millis(500);
    redis.policy_resubscribe_after = Duration::from_millis(50);
    let _store = RedisStore::connect(redis, &LimiterConfig::default()).unwrap();
    let channel = format!("{prefix}:config");
    let subscribers = |node: &str| -> i64 {
        let (_, count): (String, i64) = redis::cmd("PUBSUB")
            .arg("NUMSUB")
            .arg(&channel)
            .query(&mut support::connect(&format!("redis://{node}")))
            .unwrap();
        count
    };
    let mut waited = 0;
    while subscribers(&nodes[nodes.len() - 1]) != 1 && waited < 1000 {
        tokio::time::sleep(Duration::from_millis(10)).await;
        waited += 1;
    }
    assert_eq!(
        subscribers(&nodes[nodes.len() - 1]),
        1,
        "subscribed through the relay"
    );
    assert_eq!(subscribers(&nodes[0]), 0);
    // Frozen: after 300 ms without a message the store pings, gives up 500 ms
    // later and subscribes on the first real node (waited for up to 20 s).
    frozen.store(true, Ordering::SeqCst);
    let mut waited = 0;
    while subscribers(&nodes[0]) != 1 && waited < 200 {
        tokio::time::sleep(Duration::from_millis(100)).await;
        waited += 1;
    }
    assert_eq!(subscribers(&nodes[0]), 1, "subscribed on the next node");
    support::cleanup(&url, &prefix);
}
