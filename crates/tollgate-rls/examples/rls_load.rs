//! The gRPC load generator of `bench/rls.sh`: `ShouldRateLimit` calls with one
//! descriptor (`key` = one of `--keys` values, in turn) over tonic.
//!
//! - `--mode closed`: `--concurrency` calls always in flight (each caller sends
//!   its next call when its last one is answered) for `--warmup` seconds, then
//!   counts the calls answered in the next `--seconds` seconds.
//! - `--mode open --rate R`: calls scheduled every 1/R seconds whatever the
//!   answers (one thread starts every call that is due, polls the answers and
//!   sleeps until the next call is due); each call's latency runs from its
//!   *scheduled* time, so a late answer also delays, in the figures, the calls
//!   queued behind it (no coordinated omission). Calls scheduled in the warm-up are not
//!   counted.
//!
//! Bounded either way: at most `--max-calls` calls, every call given up after
//! `--call-timeout-ms`, the whole run over in warm-up + seconds + the timeout.
//! Prints one line of `name=value` fields: `calls_per_second` counts the calls
//! answered OK; the latency percentiles (microseconds) cover every counted
//! call, those that failed or timed out included.
//!
//! `cargo run --release -p tollgate-rls --example rls_load -- --target http://127.0.0.1:8081`

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use clap::{Parser, ValueEnum};
use envoy_types::pb::envoy::extensions::common::ratelimit::v3::RateLimitDescriptor;
use envoy_types::pb::envoy::extensions::common::ratelimit::v3::rate_limit_descriptor::Entry;
use envoy_types::pb::envoy::service::ratelimit::v3 as rls;
use rls::rate_limit_service_client::RateLimitServiceClient;
use tonic::transport::Channel;

#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

#[derive(Clone, Copy, ValueEnum)]
enum Mode {
    Closed,
    Open,
}

#[derive(Parser)]
struct Options {
    /// The service, `http://127.0.0.1:PORT` (only 127.0.0.1 is accepted).
    #[arg(long)]
    target: String,
    #[arg(long, value_enum, default_value = "closed")]
    mode: Mode,
    /// Calls in flight (closed loop).
    #[arg(long, default_value_t = 64)]
    concurrency: usize,
    /// Calls per second (open loop).
    #[arg(long)]
    rate: Option<f64>,
    /// Seconds of load before counting.
    #[arg(long, default_value_t = 1.0)]
    warmup: f64,
    /// Seconds counted.
    #[arg(long, default_value_t = 5.0)]
    seconds: f64,
    /// Distinct descriptor values.
    #[arg(long, default_value_t = 1000)]
    keys: usize,
    /// The request's domain.
    #[arg(long, default_value = "bench")]
    domain: String,
    /// HTTP/2 connections the calls are spread over.
    #[arg(long, default_value_t = 2)]
    connections: usize,
    /// Worker threads of the client's runtime (closed loop; the open loop
    /// runs on one thread).
    #[arg(long, default_value_t = 1)]
    threads: usize,
    /// The most calls the run makes.
    #[arg(long, default_value_t = 20_000_000)]
    max_calls: u64,
    /// A call not answered in this time counts as an error.
    #[arg(long, default_value_t = 2000)]
    call_timeout_ms: u64,
}

/// What the callers share.
struct Shared {
    clients: Vec<RateLimitServiceClient<Channel>>,
    requests: Vec<rls::RateLimitRequest>,
    timeout: Duration,
    /// Counted calls' latencies (whatever their outcome), microseconds.
    latencies: parking_lot::Mutex<Vec<u32>>,
    errors: AtomicU64,
    not_ok: AtomicU64,
    ok: AtomicU64,
    issued: AtomicU64,
}

impl Shared {
    /// One call of request `index`; `Err` for an error or a timeout, else
    /// whether the answer was OK.
    async fn call(&self, index: u64) -> Result<bool, ()> {
        let slot = usize::try_from(index).unwrap_or(0);
        let mut client = self.clients[slot % self.clients.len()].clone();
        let request = self.requests[slot % self.requests.len()].clone();
        match tokio::time::timeout(self.timeout, client.should_rate_limit(request)).await {
            Ok(Ok(response)) => {
                Ok(response.into_inner().overall_code == rls::rate_limit_response::Code::Ok as i32)
            }
            _ => Err(()),
        }
    }

    /// Counts one call that ended at `end` after starting (or being
    /// scheduled) at `start`. Every counted call's latency is kept, a failed
    /// or timed-out one's too (so the percentiles include them).
    fn record(&self, outcome: Result<bool, ()>, start: Instant, end: Instant) {
        let micros = u32::try_from(end.duration_since(start).as_micros()).unwrap_or(u32::MAX);
        self.latencies.lock().push(micros);
        let counter = match outcome {
            Ok(true) => &self.ok,
            Ok(false) => &self.not_ok,
            Err(()) => &self.errors,
        };
        counter.fetch_add(1, Ordering::Relaxed);
    }
}

fn requests(domain: &str, keys: usize) -> Vec<rls::RateLimitRequest> {
    (0..keys.max(1))
        .map(|key| rls::RateLimitRequest {
            domain: domain.to_owned(),
            descriptors: vec![RateLimitDescriptor {
                entries: vec![Entry {
                    key: "key".to_owned(),
                    value: format!("k{key}"),
                }],
                ..RateLimitDescriptor::default()
            }],
            hits_addend: 0,
        })
        .collect()
}

async fn connect(
    target: &str,
    connections: usize,
) -> Result<Vec<RateLimitServiceClient<Channel>>, String> {
    let mut clients = Vec::new();
    for _ in 0..connections.max(1) {
        let endpoint = Channel::from_shared(target.to_owned())
            .map_err(|error| format!("{target}: {error}"))?
            .tcp_nodelay(true);
        // The service may still be starting: try for up to 10 s.
        let deadline = Instant::now() + Duration::from_secs(10);
        let channel = loop {
            match endpoint.connect().await {
                Ok(channel) => break channel,
                Err(error) if Instant::now() >= deadline => {
                    return Err(format!("cannot connect to {target}: {error}"));
                }
                Err(_) => tokio::time::sleep(Duration::from_millis(50)).await,
            }
        };
        clients.push(RateLimitServiceClient::new(channel));
    }
    Ok(clients)
}

/// `--concurrency` callers, each calling again as soon as it is answered,
/// until `end` (or `max_calls`).
async fn closed_loop(
    shared: Arc<Shared>,
    concurrency: usize,
    counted_from: Instant,
    end: Instant,
    max_calls: u64,
) {
    let mut callers = tokio::task::JoinSet::new();
    for _ in 0..concurrency.max(1) {
        let shared = Arc::clone(&shared);
        callers.spawn(async move {
            loop {
                let index = shared.issued.fetch_add(1, Ordering::Relaxed);
                let start = Instant::now();
                if start >= end || index >= max_calls {
                    break;
                }
                let outcome = shared.call(index).await;
                let answered = Instant::now();
                if start >= counted_from && answered <= end {
                    shared.record(outcome, start, answered);
                }
            }
        });
    }
    while callers.join_next().await.is_some() {}
}

/// The longest the open loop's thread sleeps at once: answers that arrive
/// while it sleeps wait for it (at most this, plus the kernel's timer slack).
const MAX_NAP: Duration = Duration::from_micros(50);

/// Calls scheduled every `1 / rate` seconds, on a current-thread runtime:
/// the loop starts every call that is due, lets the calls run and the I/O be
/// polled (`yield_now`), then sleeps the thread until the next call is due
/// (at most [`MAX_NAP`]). One thread does everything, so no call costs a
/// wake-up of another thread; tokio's timer (1 ms steps) is too coarse for
/// the schedule. Returns when every call has ended.
async fn open_loop(
    shared: Arc<Shared>,
    rate: f64,
    warmup: Duration,
    seconds: Duration,
    max_calls: u64,
) {
    let interval = 1.0 / rate;
    let scheduled_calls = (((warmup + seconds).as_secs_f64() * rate) as u64).min(max_calls);
    let start = Instant::now() + Duration::from_millis(5);
    let counted_from = start + warmup;
    let due = |index: u64| start + Duration::from_secs_f64(index as f64 * interval);
    let mut calls = tokio::task::JoinSet::new();
    let mut index = 0u64;
    while index < scheduled_calls {
        let now = Instant::now();
        while index < scheduled_calls && due(index) <= now {
            let scheduled = due(index);
            let shared = Arc::clone(&shared);
            let call = index;
            calls.spawn(async move {
                let outcome = shared.call(call).await;
                if scheduled >= counted_from {
                    shared.record(outcome, scheduled, Instant::now());
                }
            });
            index += 1;
        }
        tokio::task::yield_now().await;
        while calls.try_join_next().is_some() {}
        let now = Instant::now();
        let next = due(index);
        if index < scheduled_calls && next > now {
            // Blocking on purpose: see above.
            std::thread::sleep((next - now).min(MAX_NAP));
        }
    }
    shared.issued.store(index, Ordering::Relaxed);
    while calls.join_next().await.is_some() {}
}

fn percentile(sorted: &[u32], share: f64) -> u32 {
    if sorted.is_empty() {
        return 0;
    }
    let rank = ((sorted.len() as f64 * share).ceil() as usize).clamp(1, sorted.len());
    sorted[rank - 1]
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let options = Options::parse();
    if !options.target.starts_with("http://127.0.0.1:") {
        return Err("--target must be http://127.0.0.1:PORT".into());
    }
    let runtime = match options.mode {
        Mode::Closed => tokio::runtime::Builder::new_multi_thread()
            .worker_threads(options.threads.max(1))
            .enable_all()
            .build()?,
        Mode::Open => tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()?,
    };
    let clients = runtime.block_on(connect(&options.target, options.connections))?;
    let shared = Arc::new(Shared {
        clients,
        requests: requests(&options.domain, options.keys),
        timeout: Duration::from_millis(options.call_timeout_ms),
        latencies: parking_lot::Mutex::new(Vec::new()),
        errors: AtomicU64::new(0),
        not_ok: AtomicU64::new(0),
        ok: AtomicU64::new(0),
        issued: AtomicU64::new(0),
    });
    let warmup = Duration::from_secs_f64(options.warmup.max(0.0));
    let seconds = Duration::from_secs_f64(options.seconds.max(0.1));
    let mode = match options.mode {
        Mode::Closed => {
            let counted_from = Instant::now() + warmup;
            let end = counted_from + seconds;
            runtime.block_on(closed_loop(
                Arc::clone(&shared),
                options.concurrency,
                counted_from,
                end,
                options.max_calls,
            ));
            "closed"
        }
        Mode::Open => {
            let rate = options
                .rate
                .filter(|rate| *rate > 0.0)
                .ok_or("--mode open needs --rate")?;
            runtime.block_on(open_loop(
                Arc::clone(&shared),
                rate,
                warmup,
                seconds,
                options.max_calls,
            ));
            "open"
        }
    };
    let mut latencies = std::mem::take(&mut *shared.latencies.lock());
    latencies.sort_unstable();
    let ok = shared.ok.load(Ordering::Relaxed);
    println!(
        "mode={mode} target={} ok_calls={ok} calls_per_second={:.0} p50_us={} p90_us={} p99_us={} p999_us={} max_us={} errors={} not_ok={} issued={}",
        options.target,
        ok as f64 / seconds.as_secs_f64(),
        percentile(&latencies, 0.50),
        percentile(&latencies, 0.90),
        percentile(&latencies, 0.99),
        percentile(&latencies, 0.999),
        latencies.last().copied().unwrap_or(0),
        shared.errors.load(Ordering::Relaxed),
        shared.not_ok.load(Ordering::Relaxed),
        shared.issued.load(Ordering::Relaxed),
    );
    runtime.shutdown_background();
    Ok(())
}
