//! Decisions per second through the Redis store with 64 concurrent callers,
//! and their latency percentiles, on 10,000 keys of the default policy.
//!
//! Run: `REDIS_URL=redis://127.0.0.1:6379 cargo bench -p tollgate-redis --bench throughput`
//! (`bench/redis.sh` runs it beside `redis-benchmark` on the same Redis).
//! Optional: `SECONDS` (default 10), `CALLERS` (default 64). The client runs
//! on one worker thread with the `tollgate` binary's allocator (mimalloc).

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use hdrhistogram::Histogram;

/// The allocator of the `tollgate` binary, which the store runs in.
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;
use tollgate_core::{Limit, LimiterConfig, Policy, Store};
use tollgate_redis::{RedisConfig, RedisStore};

fn main() {
    let Ok(url) = std::env::var("REDIS_URL") else {
        eprintln!("set REDIS_URL (for example redis://127.0.0.1:6379) to run this benchmark");
        return;
    };
    let seconds: u64 = std::env::var("SECONDS")
        .ok()
        .and_then(|text| text.parse().ok())
        .unwrap_or(10);
    let callers: usize = std::env::var("CALLERS")
        .ok()
        .and_then(|text| text.parse().ok())
        .unwrap_or(64);
    // One worker thread: on a two-core machine the other core is Redis's
    // (two client threads and Redis time-slice one core, and every slice is
    // a few milliseconds of latency).
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .enable_all()
        .build()
        .unwrap();
    runtime.block_on(async move {
        let mut config = RedisConfig::new(url);
        config.prefix = format!("tollgate-bench-{}", std::process::id());
        config.timeout = Duration::from_secs(1);
        let limits = LimiterConfig {
            policy_lists: Default::default(),
            default_policy: Policy::token_bucket(1_000_000, 60, 1_000_000).unwrap(),
            ..LimiterConfig::default()
        };
        let store = Arc::new(RedisStore::connect(config, &limits).unwrap());
        // Warm up: the script loaded, the connection up.
        store.acquire(&[Limit::Plan("warm-up")]).await.unwrap();
        let stop = Arc::new(AtomicBool::new(false));
        let started = Instant::now();
        let tasks: Vec<_> = (0..callers)
            .map(|caller| {
                let store = Arc::clone(&store);
                let stop = Arc::clone(&stop);
                tokio::spawn(async move {
                    let mut latencies = Histogram::<u64>::new(3).unwrap();
                    let mut key = caller;
                    while !stop.load(Ordering::Relaxed) {
                        key = (key + 7919) % 10_000;
                        let name = format!("sk_bench_{key}");
                        let begun = Instant::now();
                        store.acquire(&[Limit::Plan(&name)]).await.unwrap();
                        let micros = u64::try_from(begun.elapsed().as_micros()).unwrap_or(u64::MAX);
                        latencies.record(micros.max(1)).unwrap();
                    }
                    latencies
                })
            })
            .collect();
        tokio::time::sleep(Duration::from_secs(seconds)).await;
        stop.store(true, Ordering::Relaxed);
        let mut all = Histogram::<u64>::new(3).unwrap();
        for task in tasks {
            all.add(task.await.unwrap()).unwrap();
        }
        let elapsed = started.elapsed().as_secs_f64();
        println!(
            "tollgate RedisStore: {callers} callers, {:.0} decisions/s, p50 {} us, p99 {} us, p99.9 {} us",
            all.len() as f64 / elapsed,
            all.value_at_quantile(0.50),
            all.value_at_quantile(0.99),
            all.value_at_quantile(0.999),
        );
    });
}
