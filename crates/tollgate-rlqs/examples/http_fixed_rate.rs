//! The fixed-rate HTTP load of `bench/rlqs.sh`: `GET` requests to `--url`
//! scheduled every 1/`--rate` seconds whatever the answers (open loop),
//! each carrying one of `--keys` `x-key` values in turn, for `--seconds`
//! after a `--warmup`. Each request's latency runs from its *scheduled*
//! time, so an answer that comes late also delays, in the figures, the
//! requests queued behind it (no coordinated omission). Prints one line of
//! `name=value` fields: the requests counted, how many were answered 200,
//! and the p50, p99 and p99.9 latencies in microseconds (failures counted at
//! the time they failed).
//!
//! `cargo run --release -p tollgate-rlqs --example http_fixed_rate -- --url http://127.0.0.1:10000/ --rate 5000`

use std::sync::Arc;
use std::time::{Duration, Instant};

use clap::Parser;
use tokio::sync::Mutex;

#[derive(Parser)]
struct Arguments {
    /// The URL.
    #[arg(long)]
    url: String,
    /// Requests a second.
    #[arg(long)]
    rate: f64,
    /// `x-key` values, in turn.
    #[arg(long, default_value_t = 1000)]
    keys: usize,
    /// Seconds counted.
    #[arg(long, default_value_t = 10)]
    seconds: u64,
    /// Seconds before counting.
    #[arg(long, default_value_t = 1)]
    warmup: u64,
    /// Each request given up after this many milliseconds.
    #[arg(long, default_value_t = 2000)]
    timeout_ms: u64,
}

#[tokio::main]
async fn main() {
    let arguments = Arguments::parse();
    let client = reqwest::Client::builder()
        .timeout(Duration::from_millis(arguments.timeout_ms))
        .build()
        .expect("a client");
    let latencies: Arc<Mutex<Vec<(u64, bool)>>> = Arc::new(Mutex::new(Vec::new()));
    let start = Instant::now() + Duration::from_millis(100);
    let warmup = Duration::from_secs(arguments.warmup);
    let total = warmup + Duration::from_secs(arguments.seconds);
    let mut tasks = Vec::new();
    let mut index: u64 = 0;
    loop {
        let scheduled = start + Duration::from_secs_f64(index as f64 / arguments.rate);
        if scheduled >= start + total {
            break;
        }
        tokio::time::sleep_until(scheduled.into()).await;
        let counted = scheduled >= start + warmup;
        let request = client.get(&arguments.url).header(
            "x-key",
            format!("k{}", index as usize % arguments.keys.max(1)),
        );
        let latencies = Arc::clone(&latencies);
        tasks.push(tokio::spawn(async move {
            let ok = matches!(request.send().await, Ok(response) if response.status() == 200);
            let micros = u64::try_from(scheduled.elapsed().as_micros()).unwrap_or(u64::MAX);
            if counted {
                latencies.lock().await.push((micros, ok));
            }
        }));
        index += 1;
    }
    for task in tasks {
        let _ = task.await;
    }
    let mut latencies = latencies.lock().await.clone();
    latencies.sort_unstable();
    let count = latencies.len();
    let ok = latencies.iter().filter(|(_, ok)| *ok).count();
    let percentile = |fraction: f64| -> u64 {
        if count == 0 {
            return 0;
        }
        let position = ((count as f64 * fraction).ceil() as usize).clamp(1, count) - 1;
        latencies[position].0
    };
    println!(
        "requests={count} ok={ok} p50_us={} p99_us={} p999_us={}",
        percentile(0.50),
        percentile(0.99),
        percentile(0.999)
    );
}
