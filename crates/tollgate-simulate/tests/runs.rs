//! Runs of each algorithm on patterns whose every decision is worked out by
//! hand (in the comments), and the patterns' arrivals counted by hand.

use std::time::Duration;

use tollgate_simulate::{Bucket, Pattern, parse_policy, simulate};

const SECOND: Duration = Duration::from_secs(1);

/// `(allowed, refused, remaining)` per step of `policy` over `pattern` for
/// `seconds`, steps of one second.
fn steps(policy: &str, pattern: &str, seconds: u64) -> Vec<(u64, u64, u64)> {
    let arrivals = Pattern::parse(pattern)
        .unwrap()
        .arrivals(Duration::from_secs(seconds), SECOND)
        .unwrap();
    let runs = simulate(&[parse_policy(policy).unwrap()], &arrivals, SECOND).unwrap();
    let run = &runs[0];
    let buckets: Vec<(u64, u64, u64)> = run
        .buckets
        .iter()
        .map(|bucket| (bucket.allowed, bucket.refused, bucket.remaining))
        .collect();
    assert_eq!(
        run.allowed + run.refused,
        arrivals.times.len() as u64,
        "every request decided once"
    );
    buckets
}

#[test]
fn a_fixed_window_allows_its_limit_in_each_window() {
    // 10 a second (at 0, 0.1 s, ...), 5 per aligned second: the first 5 of
    // each second pass; at each second's last nanosecond nothing is left.
    assert_eq!(
        steps("fixed_window:5/1s", "steady:10/s", 3),
        [(5, 5, 0), (5, 5, 0), (5, 5, 0)]
    );
}

#[test]
fn a_sliding_log_counts_the_last_window_whatever_its_alignment() {
    // 5 a second (0, 0.2, ..., 0.8 s, ...), 5 in any 2 s: 0 to 0.8 s pass;
    // 1.0 to 1.8 s find 5 in (t - 2 s, t]: refused; at 2.0 s the request of
    // 0 s has left the window (2.0 - 2 < 0 is false), and so on each 0.2 s:
    // 2.0 to 2.8 s pass; 3.0 to 3.8 s are refused again. Remaining at each
    // second's end (t = k + 0.999999999 s): after 0.8 s, 0; after 1.8 s, 0
    // (the five of 0 to 0.8 s still count); after 2.8 s, 0; after 3.8 s, 0.
    assert_eq!(
        steps("sliding_log:5/2s", "steady:5/s", 4),
        [(5, 0, 0), (0, 5, 0), (5, 0, 0), (0, 5, 0)]
    );
}

#[test]
fn a_token_bucket_allows_its_burst_then_its_rate() {
    // Bursts of 10 every 2 s; 1 token a second, 5 at most. At 0 s: 5 pass,
    // 5 refused; the bucket refills 1 a second: 1 token at 1 s's end
    // (0.999999999 s has 0 whole tokens: 0 at the first step's end), 2 s
    // later 2 tokens: at 2 s, 2 pass and 8 are refused; and so on.
    // Remaining at each step's last nanosecond: 0 (0.999.. s of refill), 1
    // (1.999.. s), 0 (after the second burst, 0.999.. s), 1.
    assert_eq!(
        steps("token_bucket:1/1s,burst=5", "bursts:10/2s", 4),
        [(5, 5, 0), (0, 0, 1), (2, 8, 0), (0, 0, 1)]
    );
}

#[test]
fn idle_then_a_burst_finds_the_whole_budget() {
    // 30 s idle, then 50 at once; steps of 10 s: the 4th holds the burst.
    // A fixed window of 20 per 10 s: 20 pass; a token bucket of 20 a
    // minute, burst 20: 20 pass, and 9.999999999 s later 3 whole tokens.
    let arrivals = Pattern::parse("idle-burst:30s,50")
        .unwrap()
        .arrivals(Duration::from_secs(40), Duration::from_secs(10))
        .unwrap();
    assert_eq!(arrivals.times, vec![30_000_000_000; 50]);
    let policies = [
        parse_policy("window=fixed_window:20/10s").unwrap(),
        parse_policy("bucket=token_bucket:20/1m").unwrap(),
    ];
    let runs = simulate(&policies, &arrivals, Duration::from_secs(10)).unwrap();
    let last = |index: usize| runs[index].buckets.last().unwrap().clone();
    assert_eq!(
        last(0),
        Bucket {
            start_ms: 30_000,
            allowed: 20,
            refused: 30,
            remaining: 0
        }
    );
    assert_eq!(
        last(1),
        Bucket {
            start_ms: 30_000,
            allowed: 20,
            refused: 30,
            remaining: 3
        }
    );
    assert_eq!(runs[0].buckets[0].remaining, 20);
    assert_eq!(runs[1].name, "bucket");
}

#[test]
fn steady_and_burst_patterns_arrive_when_they_say() {
    let times = |pattern: &str, seconds: u64| {
        Pattern::parse(pattern)
            .unwrap()
            .arrivals(Duration::from_secs(seconds), SECOND)
            .unwrap()
            .times
    };
    // 3 per second for 1 s: 0, 1/3, 2/3 s, each rounded down to a
    // nanosecond.
    assert_eq!(times("steady:3/s", 1), [0, 333_333_333, 666_666_666]);
    assert_eq!(times("steady:1/500ms", 1), [0, 500_000_000]);
    assert_eq!(
        times("bursts:2/1s", 2),
        [0, 0, 1_000_000_000, 1_000_000_000]
    );
    assert!(times("idle-burst:5s,3", 5).is_empty());
}

#[test]
fn poisson_arrivals_repeat_with_their_seed() {
    let arrivals = |pattern: &str| {
        Pattern::parse(pattern)
            .unwrap()
            .arrivals(Duration::from_secs(1000), SECOND)
            .unwrap()
            .times
    };
    let first = arrivals("poisson:5/s,seed=7");
    assert_eq!(first, arrivals("poisson:5/s,seed=7"));
    assert_ne!(first, arrivals("poisson:5/s,seed=8"));
    // 5,000 expected; the count of a Poisson process has a standard
    // deviation of sqrt(5000) ≈ 71: within 6 of them.
    assert!((4_575..=5_425).contains(&first.len()), "{}", first.len());
    assert!(first.windows(2).all(|pair| pair[0] <= pair[1]));
    // A fixed window of 5 a second can allow at most 5 in each of the
    // 1,000 seconds, whatever the draw.
    let runs = simulate(
        &[parse_policy("fixed_window:5/1s").unwrap()],
        &Pattern::parse("poisson:5/s,seed=7")
            .unwrap()
            .arrivals(Duration::from_secs(1000), SECOND)
            .unwrap(),
        SECOND,
    )
    .unwrap();
    assert!(runs[0].buckets.iter().all(|bucket| bucket.allowed <= 5));
    assert_eq!(runs[0].allowed + runs[0].refused, first.len() as u64);
}

#[test]
fn a_file_of_timestamps_keeps_its_times() {
    let pattern = Pattern::timestamps(
        "# three requests\n1733389200.5\n\n1733389200\n2024-12-05T09:00:01.25Z\n",
    )
    .unwrap();
    let arrivals = pattern.arrivals(Duration::ZERO, SECOND).unwrap();
    // 2024-12-05T09:00:00Z is 1733389200 s after the epoch.
    assert_eq!(
        arrivals.times,
        [
            1_733_389_200_000_000_000,
            1_733_389_200_500_000_000,
            1_733_389_201_250_000_000
        ]
    );
    assert_eq!(arrivals.start, 1_733_389_200_000_000_000);
    assert_eq!(arrivals.end, 1_733_389_202_000_000_000);
    // Aligned windows fall where they fell: 2 per second allows all three.
    let runs = simulate(
        &[parse_policy("fixed_window:2/1s").unwrap()],
        &arrivals,
        SECOND,
    )
    .unwrap();
    assert_eq!((runs[0].allowed, runs[0].refused), (3, 0));
    assert_eq!(
        Pattern::timestamps("1\nnoon\n").unwrap_err().to_string(),
        "line 2: \"noon\" is neither seconds since the epoch nor an RFC 3339 time"
    );
}

#[test]
fn bad_policies_and_patterns_are_refused_with_a_reason() {
    let policy_error = |text: &str| parse_policy(text).unwrap_err();
    assert!(policy_error("leaky:5/1s").contains("the algorithm is fixed_window"));
    assert!(policy_error("fixed_window:5/1s,burst=3").contains("burst applies to token_bucket"));
    assert!(policy_error("fixed_window:5/1500ms").contains("whole number of seconds"));
    assert!(policy_error("fixed_window:0/1s").contains("limit"));
    let pattern_error = |text: &str| Pattern::parse(text).unwrap_err().to_string();
    assert!(pattern_error("steady:10").contains("is not COUNT/SPAN"));
    assert!(pattern_error("steady:0/s").contains("is not a count"));
    assert!(pattern_error("waves:1/s").contains("unknown kind"));
    assert!(pattern_error("bursts:5/0s").contains("is not a span above zero"));
    let too_many = Pattern::parse("steady:1000000/s")
        .unwrap()
        .arrivals(Duration::from_secs(11), SECOND)
        .unwrap_err();
    assert_eq!(
        too_many.to_string(),
        "the pattern makes more than 10000000 requests over the run: shorten it"
    );
    let arrivals = Pattern::parse("steady:1/s")
        .unwrap()
        .arrivals(Duration::from_secs(10), SECOND)
        .unwrap();
    let policy = [parse_policy("fixed_window:1/1s").unwrap()];
    assert!(simulate(&policy, &arrivals, Duration::ZERO).is_err());
    assert!(simulate(&policy, &arrivals, Duration::from_nanos(10)).is_err());
    assert!(simulate(&policy, &arrivals, Duration::from_micros(500)).is_err());
}
