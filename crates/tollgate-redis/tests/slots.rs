//! Concurrency limits in Redis (`RedisSlots`, issue #26): the same grants
//! as core's `MemorySlots` for the same steps, never more than `max` slots
//! across two stores (two gateways) racing, leases renewed while held, and
//! a store that dies without releasing (as `kill -9` would) loses its slots
//! once their TTL ends. A redis-server at `REDIS_URL` (and a cluster at
//! `REDIS_CLUSTER_URL` for the cluster test); ignored otherwise.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use tollgate_core::{MemorySlots, SlotStore};
use tollgate_redis::{RedisConfig, RedisSlots};
use tollgate_test_support::redis as redis_support;

fn slots(url: &str, prefix: &str, lease_ttl: Duration) -> RedisSlots {
    let mut config = RedisConfig::new(url);
    config.prefix = prefix.to_owned();
    config.timeout = Duration::from_secs(2);
    RedisSlots::connect(&config, lease_ttl).unwrap()
}

/// 300 steps of a xorshift sequence: acquire (key 0..3, max 1..3) or release.
async fn same_grants_as_memory(url: &str, prefix: &str) {
    let redis = slots(url, prefix, Duration::from_secs(30));
    let memory = MemorySlots::new();
    let mut held = Vec::new();
    let mut state = 0x2545_F491_4F6C_DD1D_u64;
    for _ in 0..300 {
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        if state.is_multiple_of(3) && !held.is_empty() {
            let (in_redis, in_memory) = held.swap_remove((state as usize / 3) % held.len());
            redis.release_now(in_redis).await.unwrap();
            memory.release(in_memory);
        } else {
            let key = format!("slot-key-{}", state % 3);
            let max = 1 + (state >> 8) % 3;
            let in_redis = redis.acquire(&key, max).await.unwrap();
            let in_memory = memory.try_acquire(&key, max);
            assert_eq!(in_redis.is_some(), in_memory.is_some(), "{key} max {max}");
            if let (Some(in_redis), Some(in_memory)) = (in_redis, in_memory) {
                held.push((in_redis, in_memory));
            }
        }
        assert_eq!(redis.held(), memory.held());
    }
    for (in_redis, _) in held {
        redis.release_now(in_redis).await.unwrap();
    }
    assert_eq!(redis.held(), 0);
    assert!(redis_support::keys(url, &format!("{prefix}:*")).is_empty());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[cfg_attr(not(has_redis), ignore = "set REDIS_URL=redis://127.0.0.1:6379 to run")]
async fn redis_slots_grant_as_memory_slots_do() {
    let url = redis_support::require_redis_url();
    let prefix = redis_support::prefix("slots-differential");
    same_grants_as_memory(&url, &prefix).await;
    redis_support::cleanup(&url, &prefix);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[cfg_attr(
    not(has_redis_cluster),
    ignore = "set REDIS_CLUSTER_URL=redis-cluster://127.0.0.1:7000 to run (.ci/redis-cluster start DIR)"
)]
async fn on_a_cluster_slots_grant_as_memory_slots_do() {
    let url = redis_support::require_cluster_url();
    let prefix = redis_support::prefix("slots-cluster");
    let redis = slots(&url, &prefix, Duration::from_secs(30));
    // Keys in different hash slots, each its own set.
    let mut leases = Vec::new();
    for key in ["a", "b", "c", "d"] {
        leases.push(redis.acquire(key, 1).await.unwrap().unwrap());
        assert!(redis.acquire(key, 1).await.unwrap().is_none());
    }
    for lease in leases {
        redis.release_now(lease).await.unwrap();
    }
    assert!(redis.acquire("a", 1).await.unwrap().is_some());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[cfg_attr(not(has_redis), ignore = "set REDIS_URL=redis://127.0.0.1:6379 to run")]
async fn two_stores_racing_never_hold_more_than_max() {
    const MAX: u64 = 4;
    let url = redis_support::require_redis_url();
    let prefix = redis_support::prefix("slots-race");
    let stores = [
        Arc::new(slots(&url, &prefix, Duration::from_secs(30))),
        Arc::new(slots(&url, &prefix, Duration::from_secs(30))),
    ];
    let in_flight = Arc::new(AtomicU64::new(0));
    let most = Arc::new(AtomicU64::new(0));
    let mut tasks = Vec::new();
    for client in 0..50 {
        let store = Arc::clone(&stores[client % 2]);
        let (in_flight, most) = (Arc::clone(&in_flight), Arc::clone(&most));
        tasks.push(tokio::spawn(async move {
            let mut granted = 0;
            for _ in 0..20 {
                if let Some(lease) = store.acquire("hot", MAX).await.unwrap() {
                    let now = in_flight.fetch_add(1, Ordering::SeqCst) + 1;
                    most.fetch_max(now, Ordering::SeqCst);
                    tokio::task::yield_now().await;
                    in_flight.fetch_sub(1, Ordering::SeqCst);
                    store.release_now(lease).await.unwrap();
                    granted += 1;
                }
            }
            granted
        }));
    }
    let mut granted = 0;
    for task in tasks {
        granted += task.await.unwrap();
    }
    assert!(granted > 0);
    assert!(most.load(Ordering::SeqCst) <= MAX, "{most:?}");
    assert_eq!(stores[0].held() + stores[1].held(), 0);
    redis_support::cleanup(&url, &prefix);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[cfg_attr(not(has_redis), ignore = "set REDIS_URL=redis://127.0.0.1:6379 to run")]
async fn a_held_lease_is_renewed_and_a_dead_store_s_lease_ends_with_its_ttl() {
    let url = redis_support::require_redis_url();
    let prefix = redis_support::prefix("slots-ttl");
    let ttl = Duration::from_millis(600);
    let living = slots(&url, &prefix, ttl);
    let lease = living.acquire("renewed", 1).await.unwrap().unwrap();
    let other = slots(&url, &prefix, ttl);
    // Held across three TTLs (Redis's clock runs on its own): still held.
    for _ in 0..6 {
        tokio::time::sleep(ttl / 2).await;
        assert!(other.acquire("renewed", 1).await.unwrap().is_none());
    }
    living.release_now(lease).await.unwrap();
    assert!(other.acquire("renewed", 1).await.unwrap().is_some());

    // A store dropped without releasing (its renewal stops, as a killed
    // gateway's would): its slot comes back once the lease has ended.
    let dying = slots(&url, &prefix, ttl);
    let _lost = dying.acquire("orphaned", 1).await.unwrap().unwrap();
    drop(dying);
    assert!(other.acquire("orphaned", 1).await.unwrap().is_none());
    let mut attempts = 0;
    while other.acquire("orphaned", 1).await.unwrap().is_none() {
        attempts += 1;
        assert!(attempts < 100, "the orphaned lease never ended");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    redis_support::cleanup(&url, &prefix);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[cfg_attr(
    not(has_redis),
    ignore = "set REDIS_URL=redis://127.0.0.1:6379 to run (needs redis-server too)"
)]
async fn a_lease_granted_after_its_caller_gave_up_is_removed() {
    // A Redis of the test's own, stopped while a slot is asked for: the
    // call times out, and Redis grants the lease once it resumes. Nobody
    // holds that lease; it must not block the key for its TTL.
    let _ = redis_support::require_redis_url();
    let own = redis_support::OwnRedis::start();
    let url = own.url();
    let prefix = redis_support::prefix("slots-late");
    let mut config = RedisConfig::new(url.as_str());
    config.prefix.clone_from(&prefix);
    config.timeout = Duration::from_millis(200);
    let slots = RedisSlots::connect(&config, Duration::from_secs(30)).unwrap();
    // The connection and the script made before the stall.
    let warm = slots.acquire("warm", 1).await.unwrap().unwrap();
    slots.release_now(warm).await.unwrap();
    let stalled = redis_support::Stalled::stop(std::slice::from_ref(&url));
    assert!(slots.acquire("late", 1).await.is_err());
    drop(stalled);
    redis_support::wait_for_the_backlog(std::slice::from_ref(&url)).await;
    let mut left = Vec::new();
    for _ in 0..200 {
        left = redis_support::keys(&url, &format!("{prefix}:*"));
        if left.is_empty() {
            break;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    assert!(left.is_empty(), "{left:?}");
    assert!(slots.acquire("late", 1).await.unwrap().is_some());
    assert_eq!(slots.held(), 1);
}
