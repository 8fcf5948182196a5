//! Refunds on Redis (`Store::give_back_units`, `lua/give_back.lua`): values
//! worked out by hand for each algorithm, a plan followed onto its tier, a
//! plan of several policies given back on each,
//! and the store held to core (at the scripts' microseconds), step by
//! step, over the range the store accepts (time stepping, standing still,
//! leaping and going back), on a server and, with `REDIS_CLUSTER_URL`, on a
//! cluster, where each limit is given back on its own. The steps mix
//! charges, refunds, charges past the limit (overdraws) and reservations
//! of turns ahead (not on a cluster).

mod generators;

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use proptest::prelude::*;
use tollgate_core::{
    Clock, Decision, Limit, LimitDecision, LimitUnits, Limiter, LimiterConfig, MaxWait,
    NamedPolicy, PlanPolicies, Policy, PreparedPolicy, Resolution, Store,
};
use tollgate_redis::{RedisConfig, RedisStore, TimeSource};

use generators::{BOUND, moves, starts, with_calendars};
use tollgate_test_support::redis as support;

/// 2100-01-01T00:00:10Z in microseconds: ten seconds into a minute, far
/// from today (a decision on Redis's clock instead would show).
const T: u64 = 4_102_444_810_000_000;
const SECOND: u64 = 1_000_000;

/// A clock the test sets, in microseconds; it goes back when told to (as
/// the clocks of concurrent callers interleave).
#[derive(Debug, Default)]
struct SetClock(AtomicU64);

impl SetClock {
    fn set(&self, micros: u64) {
        self.0.store(micros * 1000, Ordering::Release);
    }
}

impl Clock for SetClock {
    fn now_nanos(&self) -> u64 {
        self.0.load(Ordering::Acquire)
    }
}

fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap()
}

/// A Redis store at `url` under `prefix`, on `clock`; no key expires during
/// a test (Redis expires them on its own clock).
fn redis_store(
    runtime: &tokio::runtime::Runtime,
    url: &str,
    prefix: &str,
    clock: &Arc<SetClock>,
    limits: &LimiterConfig,
) -> RedisStore {
    let mut config = RedisConfig::new(url);
    config.prefix = prefix.to_owned();
    config.time = TimeSource::Clock(Arc::clone(clock) as Arc<dyn Clock>);
    config.minimum_ttl = Duration::from_secs(600);
    config.timeout = Duration::from_secs(5);
    support::by_message_only(&mut config);
    runtime
        .block_on(async { RedisStore::connect(config, limits) })
        .unwrap()
}

fn units<'a>(limit: Limit<'a>, units: u64) -> LimitUnits<'a> {
    LimitUnits { limit, units }
}

/// (allowed, rejected, remaining, retry_after, reset_after), the waits in
/// whole microseconds rounded up (the in-memory store counts nanoseconds).
fn fields(decision: &Decision) -> (u64, u64, Option<u64>, u64, u64) {
    let micros = |duration: Duration| u64::try_from(duration.as_nanos().div_ceil(1000)).unwrap();
    (
        decision.allowed,
        decision.rejected,
        decision.remaining,
        micros(decision.retry_after),
        micros(decision.reset_after),
    )
}

fn all_fields(decisions: &[LimitDecision]) -> Vec<(u64, u64, Option<u64>, u64, u64)> {
    decisions
        .iter()
        .map(|limit| fields(&limit.decision))
        .collect()
}

/// The hand-worked timeline of `tests/refunds.rs` in tollgate-core, on the
/// store at `url`: a window counting refused hits (10 per minute), a
/// sliding log (4 per 10 s) and a token bucket (1 a second, 5 deep).
fn each_algorithm_gets_its_units_back(url: &str) {
    let runtime = runtime();
    let prefix = support::prefix("give-back");
    let clock = Arc::new(SetClock::default());
    let store = redis_store(&runtime, url, &prefix, &clock, &LimiterConfig::default());
    let counting = store
        .prepare(Policy::fixed_window_counting_refused(10, 60).unwrap())
        .unwrap();
    let log = store.prepare(Policy::sliding_log(4, 10).unwrap()).unwrap();
    let bucket = store
        .prepare(Policy::token_bucket(60, 60, 5).unwrap())
        .unwrap();
    let fixed = Limit::Policy {
        key: "fixed",
        policy: &counting,
    };
    let log = Limit::Policy {
        key: "log",
        policy: &log,
    };
    let bucket = Limit::Policy {
        key: "bucket",
        policy: &bucket,
    };
    clock.set(T);
    let taken = runtime
        .block_on(store.acquire_units(&[units(fixed, 12), units(log, 3), units(bucket, 5)]))
        .unwrap();
    assert_eq!(
        all_fields(&taken),
        [
            (10, 2, Some(0), 50 * SECOND, 50 * SECOND),
            (3, 0, Some(1), 0, 10 * SECOND),
            (5, 0, Some(0), 0, 5 * SECOND)
        ]
    );
    // 2 s later, 4 of each back: the window's count 12 -> 8 (2 left, 48 s
    // to its end); the log's 3 units; the bucket, 2 tokens refilled, takes
    // 3 and is full.
    clock.set(T + 2 * SECOND);
    let back = runtime
        .block_on(store.give_back_units(&[units(fixed, 4), units(log, 4), units(bucket, 4)]))
        .unwrap();
    assert_eq!(
        all_fields(&back),
        [
            (0, 0, Some(2), 0, 48 * SECOND),
            (0, 0, Some(4), 0, 0),
            (0, 0, Some(5), 0, 0)
        ]
    );
    assert_eq!(back[0].policy, Some(counting.policy()));
    // With nothing counted, the log and the bucket hold no key.
    let keys = support::state_keys_and_ttls(url, &prefix);
    assert_eq!(keys.len(), 1, "the window's state only: {keys:?}");
    assert!(keys[0].1 > 0, "with a TTL: {keys:?}");
    // What a request then finds: exactly that.
    let after = runtime
        .block_on(store.acquire_units(&[units(fixed, 3), units(log, 5), units(bucket, 6)]))
        .unwrap();
    assert_eq!(
        all_fields(&after),
        [
            (2, 1, Some(0), 48 * SECOND, 48 * SECOND),
            (0, 5, Some(4), 10 * SECOND, 0),
            (0, 6, Some(5), SECOND, 0)
        ]
    );
    // A key with no state is left without one.
    let fresh = runtime
        .block_on(store.give_back_units(&[units(Limit::Plan("sk_new"), 3)]))
        .unwrap();
    assert_eq!(all_fields(&fresh), [(0, 0, Some(5), 0, 0)]);
    assert_eq!(support::state_keys_and_ttls(url, &prefix).len(), 1);
    support::cleanup(url, &prefix);
}

#[test]
#[cfg_attr(not(has_redis), ignore = "set REDIS_URL=redis://127.0.0.1:6379 to run")]
fn each_algorithm_gets_its_units_back_on_a_server() {
    each_algorithm_gets_its_units_back(&support::require_redis_url());
}

#[test]
#[cfg_attr(
    not(has_redis_cluster),
    ignore = "set REDIS_CLUSTER_URL to run (.ci/redis-cluster start DIR)"
)]
fn each_algorithm_gets_its_units_back_on_a_cluster() {
    each_algorithm_gets_its_units_back(&support::require_cluster_url());
}

/// A plan of two policies on tier `t1`, 2 a second and 5 a minute (fixed
/// windows), given back by a store that has not seen the key's tier: the
/// script sends it to `t1`, and both policies get the units back, as core's
/// `give_back_units` gives them (values by hand).
fn a_plan_of_several_policies_gets_its_units_back_on_each(url: &str) {
    let runtime = runtime();
    let prefix = support::prefix("give-back-list");
    let clock = Arc::new(SetClock::default());
    let mut config = LimiterConfig {
        tiers: Default::default(),
        idle_eviction_s: 1 << 40,
        ..LimiterConfig::default()
    };
    config.set_plan(
        "default",
        &PlanPolicies::One(Policy::fixed_window(9, 60).unwrap()),
    );
    let named = |name: &str, policy| NamedPolicy {
        name: name.to_owned(),
        policy,
    };
    config.set_plan(
        "t1",
        &PlanPolicies::List(vec![
            named("second", Policy::fixed_window(2, 1).unwrap()),
            named("minute", Policy::fixed_window(5, 60).unwrap()),
        ]),
    );
    config.validate().unwrap();
    let first = redis_store(&runtime, url, &prefix, &clock, &config);
    let second = redis_store(&runtime, url, &prefix, &clock, &config);
    runtime.block_on(first.assign_tier("sk_a", "t1")).unwrap();
    // T is 10 s into a minute: 2 taken of each (0 and 3 left).
    clock.set(T);
    let taken = runtime
        .block_on(first.acquire_units(&[units(Limit::Plan("sk_a"), 2)]))
        .unwrap();
    let plan = |decision: &LimitDecision| {
        assert_eq!(decision.further.len(), 1, "{decision:?}");
        assert_eq!(decision.name.as_deref(), Some("second"));
        assert_eq!(&*decision.further[0].name, "minute");
        assert_eq!(decision.tier.as_deref(), Some("t1"));
        [
            fields(&decision.decision),
            fields(&decision.further[0].decision),
        ]
    };
    assert_eq!(
        plan(&taken[0]),
        [(2, 0, Some(0), 0, SECOND), (2, 0, Some(3), 0, 50 * SECOND)]
    );
    // One back: 1 counted in each window (1 and 4 left).
    let back = runtime
        .block_on(second.give_back_units(&[units(Limit::Plan("sk_a"), 1)]))
        .unwrap();
    assert_eq!(
        plan(&back[0]),
        [(0, 0, Some(1), 0, SECOND), (0, 0, Some(4), 0, 50 * SECOND)]
    );
    // A second later, five back: the second's state is of an earlier window
    // (fresh already, left as it is); the minute's count goes to 0, its key
    // dropped.
    clock.set(T + SECOND);
    let back = runtime
        .block_on(second.give_back_units(&[units(Limit::Plan("sk_a"), 5)]))
        .unwrap();
    assert_eq!(
        plan(&back[0]),
        [(0, 0, Some(2), 0, 0), (0, 0, Some(5), 0, 0)]
    );
    let keys = support::state_keys_and_ttls(url, &prefix);
    assert!(
        keys.iter().all(|(key, _)| !key.ends_with(":minute")),
        "{keys:?}"
    );
    support::cleanup(url, &prefix);
}

#[test]
#[cfg_attr(not(has_redis), ignore = "set REDIS_URL=redis://127.0.0.1:6379 to run")]
fn a_plan_of_several_policies_gets_its_units_back_on_each_on_a_server() {
    a_plan_of_several_policies_gets_its_units_back_on_each(&support::require_redis_url());
}

#[test]
#[cfg_attr(
    not(has_redis_cluster),
    ignore = "set REDIS_CLUSTER_URL to run (.ci/redis-cluster start DIR)"
)]
fn a_plan_of_several_policies_gets_its_units_back_on_each_on_a_cluster() {
    a_plan_of_several_policies_gets_its_units_back_on_each(&support::require_cluster_url());
}

#[test]
#[cfg_attr(not(has_redis), ignore = "set REDIS_URL=redis://127.0.0.1:6379 to run")]
fn a_plan_is_given_back_on_its_tier() {
    let url = support::require_redis_url();
    let runtime = runtime();
    let prefix = support::prefix("give-back-tier");
    let clock = Arc::new(SetClock::default());
    clock.set(T);
    let config = LimiterConfig::default(); // pro: a sliding log of 20 per 60 s
    let first = redis_store(&runtime, &url, &prefix, &clock, &config);
    let second = redis_store(&runtime, &url, &prefix, &clock, &config);
    runtime
        .block_on(first.assign_tier("sk_pro", "pro"))
        .unwrap();
    let taken = runtime
        .block_on(first.acquire_units(&[units(Limit::Plan("sk_pro"), 20)]))
        .unwrap();
    assert_eq!(taken[0].decision.remaining, Some(0));
    // The second store has not seen the tier: the script sends it to pro.
    let back = runtime
        .block_on(second.give_back_units(&[
            units(Limit::Plan("sk_pro"), 5),
            units(Limit::Plan("sk_internal"), 5),
        ]))
        .unwrap();
    assert_eq!(
        all_fields(&back),
        [(0, 0, Some(5), 0, 60 * SECOND), (0, 0, None, 0, 0)]
    );
    assert_eq!(back[0].tier.as_deref(), Some("pro"));
    assert_eq!(back[1].policy, None, "exempt");
    let look = runtime
        .block_on(first.acquire_units(&[units(Limit::Plan("sk_pro"), 0)]))
        .unwrap();
    assert_eq!(look[0].decision.remaining, Some(5));
    support::cleanup(&url, &prefix);
}

// The store against the in-memory store.

#[derive(Clone, Debug)]
enum Step {
    /// Both limits charged, each its units.
    Charge(u64, u64),
    /// Both limits given back their units.
    Refund(u64, u64),
    /// Both limits charged their units past the limit, into a debt of at
    /// most the third number (a usage settled after its response).
    Overdraw(u64, u64, u64),
    /// Both limits' units reserved, the turn waited for up to the third
    /// number of microseconds (a route's `delay`); not on a cluster, where
    /// limits in two slots are decided at once (`src/reserve.rs`).
    Reserve(u64, u64, u64),
}

/// Units: a few mostly, 0 often, sometimes around 2^52 or the most there is.
fn some_units() -> impl Strategy<Value = u64> {
    prop_oneof![
        6 => 0u64..=10,
        2 => Just(0u64),
        1 => (BOUND - 10)..=(BOUND + 10),
        1 => Just(u64::MAX),
    ]
}

fn steps() -> impl Strategy<Value = Vec<(i64, Step)>> {
    let step = prop_oneof![
        3 => (some_units(), some_units()).prop_map(|(a, b)| Step::Charge(a, b)),
        2 => (some_units(), some_units()).prop_map(|(a, b)| Step::Refund(a, b)),
        2 => (some_units(), some_units(), 0u64..=20).prop_map(|(a, b, o)| Step::Overdraw(a, b, o)),
        2 => (some_units(), some_units(), prop_oneof![Just(0u64), 0u64..=120_000_000])
            .prop_map(|(a, b, wait)| Step::Reserve(a, b, wait)),
    ];
    prop::collection::vec((moves(), step), 1..30)
}

/// Units charged to `policy`: a window counting refused units is charged
/// at most 2^40 at a time, so its count stays below the 2^52 at which the
/// scripts stop counting (past it, what a refund leaves is not known there).
fn charged(policy: &Policy, units: u64) -> u64 {
    if policy.counts_refused() {
        units.min(1 << 40)
    } else {
        units
    }
}

/// The two limits of the differential, with their units.
fn limits(prepared: &[PreparedPolicy; 2], a: u64, b: u64) -> [LimitUnits<'_>; 2] {
    [
        units(
            Limit::Policy {
                key: "first",
                policy: &prepared[0],
            },
            a,
        ),
        units(
            Limit::Policy {
                key: "second",
                policy: &prepared[1],
            },
            b,
        ),
    ]
}

/// Whether the Redis store charges `policy` past its limit by `overdraft`:
/// not a window counting refused units, and every quantity below 2^52.
fn overdrawn_on_redis(policy: &Policy, overdraft: u64) -> bool {
    let deepest = match policy.burst() {
        Some(burst) => {
            (u128::from(burst) + u128::from(overdraft)) * u128::from(policy.window_s()) * 1_000_000
        }
        None => u128::from(policy.limit()) + u128::from(overdraft),
    };
    !policy.counts_refused() && deepest < u128::from(BOUND)
}

fn same_refunds(
    url: &str,
    policies: [Policy; 2],
    steps: Vec<(i64, Step)>,
    start: u64,
    cluster: bool,
) -> Result<(), TestCaseError> {
    let runtime = runtime();
    let prefix = support::prefix("give-back-differential");
    let clock = Arc::new(SetClock::default());
    let config = LimiterConfig {
        policy_lists: Default::default(),
        idle_eviction_s: 1 << 40,
        ..LimiterConfig::default()
    };
    // Core at the scripts' resolution (microseconds): a reserved turn may
    // fall between two microseconds, and both must book it the same.
    let core = Limiter::new(&config, Resolution::Microseconds).unwrap();
    let redis = redis_store(&runtime, url, &prefix, &clock, &config);
    let in_memory = [
        core.prepare(policies[0]).unwrap(),
        core.prepare(policies[1]).unwrap(),
    ];
    let in_redis = [
        redis.prepare(policies[0]).unwrap(),
        redis.prepare(policies[1]).unwrap(),
    ];
    let mut time = generators::Clock::new(start);
    for (index, (by, step)) in steps.into_iter().enumerate() {
        let now = time.step(by);
        clock.set(now);
        let (expected, got) = match step {
            Step::Charge(a, b) => {
                let (a, b) = (charged(&policies[0], a), charged(&policies[1], b));
                let expected = core.acquire_units(&limits(&in_memory, a, b), now);
                let got = runtime
                    .block_on(redis.acquire_units(&limits(&in_redis, a, b)))
                    .unwrap();
                (expected, got)
            }
            Step::Overdraw(a, b, overdraft) => {
                if !policies
                    .iter()
                    .all(|policy| overdrawn_on_redis(policy, overdraft))
                {
                    continue;
                }
                let expected = core.overdraw_units(&limits(&in_memory, a, b), overdraft, now);
                let got = runtime
                    .block_on(redis.overdraw_units(&limits(&in_redis, a, b), overdraft))
                    .unwrap();
                (expected, got)
            }
            Step::Reserve(a, b, wait) => {
                if cluster {
                    continue;
                }
                let (a, b) = (charged(&policies[0], a), charged(&policies[1], b));
                let expected =
                    core.reserve_units_within(&limits(&in_memory, a, b), now, Some(wait));
                let wait = MaxWait::UpTo(Duration::from_micros(wait));
                let got = runtime
                    .block_on(redis.reserve_units(&limits(&in_redis, a, b), wait))
                    .unwrap();
                prop_assert_eq!(
                    got.wait,
                    expected.wait,
                    "step {} at {}: {:?}, limits {:?}",
                    index,
                    now,
                    step,
                    policies
                );
                (expected.decisions, got.decisions)
            }
            Step::Refund(a, b) => {
                let expected = core.give_back_units(&limits(&in_memory, a, b), now);
                let got = runtime
                    .block_on(redis.give_back_units(&limits(&in_redis, a, b)))
                    .unwrap();
                (expected, got)
            }
        };
        if got.iter().any(|limit| limit.decision.reset_after.is_zero()) {
            time.forgotten();
        }
        prop_assert_eq!(
            all_fields(&got),
            all_fields(&expected),
            "step {} at {}: {:?}, limits {:?}",
            index,
            now,
            step,
            policies
        );
        prop_assert_eq!(
            got.iter().map(|limit| limit.policy).collect::<Vec<_>>(),
            expected
                .iter()
                .map(|limit| limit.policy)
                .collect::<Vec<_>>()
        );
    }
    support::cleanup(url, &prefix);
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(80))]

    #[test]
    #[cfg_attr(not(has_redis), ignore = "set REDIS_URL=redis://127.0.0.1:6379 to run")]
    fn redis_settles_as_core_does(
        first in with_calendars(),
        second in with_calendars(),
        steps in steps(),
        start in starts(),
    ) {
        same_refunds(&support::require_redis_url(), [first, second], steps, start, false)?;
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(25))]

    /// The same on a cluster, where the two keys sit in one slot or two.
    #[test]
    #[cfg_attr(
        not(has_redis_cluster),
        ignore = "set REDIS_CLUSTER_URL to run (.ci/redis-cluster start DIR)"
    )]
    fn redis_settles_as_core_does_on_a_cluster(
        first in with_calendars(),
        second in with_calendars(),
        steps in steps(),
        start in starts(),
    ) {
        same_refunds(&support::require_cluster_url(), [first, second], steps, start, true)?;
    }
}
