//! Property tests of the whole in-memory limiter: several keys, tiers
//! assigned and changed, resets, `configure` and `reconfigure` (tiers added,
//! changed and removed, keys made exempt), idle eviction and the key cap,
//! against a model built on the naive models of `models/`.
//!
//! Time runs in quanta of `Q` ticks with the idle eviction at `(k + 1/2) Q`;
//! within a quantum it jumps back and forth by less than `Q / 2`. So whether
//! a key is idle never hangs on how far back a request went (the limiter
//! records a request older than its shard's latest at that latest, and which
//! keys share a shard is its own affair), while every other decision sees
//! times going backwards.

mod generators;
use tollgate_test_support::models;

use std::collections::{BTreeMap, BTreeSet};
use std::num::NonZeroU64;

use generators::{Clock, MAX, Spec, clocks, edgy, specs, units};
use models::{Model, Outcome};
use proptest::prelude::*;
use tollgate_core::{
    ConfigError, Decision, Limiter, LimiterConfig, Policy, PolicyError, UnknownTier,
};

const KEYS: [&str; 4] = ["k0", "k1", "k2", "k3"];
/// The tiers a key may be put on: two configured (at first), the default,
/// and one never configured.
const TIERS: [&str; 4] = ["a", "b", "default", "gold"];

/// What a decision says, in ticks; `remaining` is `None` for an exempt key.
type Seen = (u64, u64, Option<u64>, u64, u64);

fn seen(clock: Clock, decision: &Decision) -> Seen {
    (
        decision.allowed,
        decision.rejected,
        decision.remaining,
        clock.ticks_of(decision.retry_after),
        clock.ticks_of(decision.reset_after),
    )
}

fn of_model(outcome: Outcome) -> Seen {
    (
        outcome.allowed,
        outcome.rejected,
        Some(outcome.remaining),
        outcome.retry_after,
        outcome.reset_after,
    )
}

/// An exempt key's answer: every unit allowed, no budget.
fn exempt(units: u64) -> Seen {
    (units, 0, None, 0, 0)
}

#[derive(Clone, Debug)]
enum Op {
    Request {
        key: usize,
        units: u64,
    },
    /// The next quanta begin.
    Advance {
        quanta: u64,
    },
    Assign {
        key: usize,
        tier: usize,
    },
    Reset {
        key: usize,
    },
    Configure(Spec),
    /// A new default policy (or the same), tiers `a` and `b` kept, changed
    /// or removed, and `k3` exempt or not.
    Reconfigure {
        default: Option<Spec>,
        a: Option<Option<Spec>>,
        b: Option<Option<Spec>>,
        k3_exempt: bool,
    },
    Inspect {
        key: usize,
    },
    Stats,
}

fn ops(clock: Clock, max_quanta: u64) -> BoxedStrategy<Vec<(Op, u64)>> {
    let key = 0usize..KEYS.len();
    let change = || prop::option::of(prop::option::of(specs(clock)));
    let op = prop_oneof![
        10 => (key.clone(), units()).prop_map(|(key, units)| Op::Request { key, units }),
        2 => (1..=max_quanta).prop_map(|quanta| Op::Advance { quanta }),
        2 => (key.clone(), 0usize..TIERS.len()).prop_map(|(key, tier)| Op::Assign { key, tier }),
        1 => key.clone().prop_map(|key| Op::Reset { key }),
        1 => specs(clock).prop_map(Op::Configure),
        1 => (prop::option::of(specs(clock)), change(), change(), any::<bool>()).prop_map(
            |(default, a, b, k3_exempt)| Op::Reconfigure { default, a, b, k3_exempt }
        ),
        1 => key.prop_map(|key| Op::Inspect { key }),
        1 => Just(Op::Stats),
    ];
    prop::collection::vec((op, edgy(0, u64::MAX)), 1..60).boxed()
}

/// A rule in force: a policy and the version it was installed under.
#[derive(Clone, Copy, Debug)]
struct Rule {
    spec: Spec,
    version: u64,
}

/// A key's state: its algorithm's model, the rule it was built under and
/// its latest request.
#[derive(Debug)]
struct Entry {
    model: Box<dyn Model>,
    version: u64,
    last_use: u64,
}

/// The limiter as its documentation describes it.
#[derive(Debug)]
struct LimiterModel {
    clock: Clock,
    /// The idle eviction age in ticks: `idle_eviction_s`, or the longest
    /// span a policy in force counts over (`Policy::counted_span_s`), or
    /// one ever put in force by `configure`.
    idle: u64,
    idle_s: u64,
    configured_span_s: u64,
    default: Rule,
    tiers: BTreeMap<String, Rule>,
    exempt: BTreeSet<String>,
    assigned: BTreeMap<String, String>,
    entries: BTreeMap<String, Entry>,
    allowed: u128,
    rejected: u128,
    versions: u64,
}

impl LimiterModel {
    fn rule(&mut self, spec: Spec) -> Rule {
        self.versions += 1;
        Rule {
            spec,
            version: self.versions,
        }
    }

    fn rule_of(&self, key: &str) -> Rule {
        self.assigned
            .get(key)
            .and_then(|tier| self.tiers.get(tier))
            .copied()
            .unwrap_or(self.default)
    }

    fn is_idle(&self, entry: &Entry, now: u64) -> bool {
        now.saturating_sub(entry.last_use) >= self.idle
    }

    /// `key`'s state at `now`, if it holds one under its rule.
    fn state(&self, key: &str, now: u64) -> Option<&Entry> {
        let version = self.rule_of(key).version;
        self.entries.get(key).filter(|entry| {
            !self.exempt.contains(key) && entry.version == version && !self.is_idle(entry, now)
        })
    }

    fn request(&mut self, key: &str, now: u64, units: u64) -> Seen {
        if self.exempt.contains(key) {
            self.allowed += u128::from(units);
            return exempt(units);
        }
        let rule = self.rule_of(key);
        let kept = self.state(key, now).is_some();
        let previous_use = self
            .entries
            .get(key)
            .filter(|entry| !self.is_idle(entry, now))
            .map(|entry| entry.last_use);
        if !kept {
            self.entries.insert(
                key.to_owned(),
                Entry {
                    model: rule.spec.model(self.clock).unwrap(),
                    version: rule.version,
                    last_use: now,
                },
            );
        }
        let entry = self.entries.get_mut(key).unwrap();
        entry.last_use = previous_use.map_or(now, |last| last.max(now));
        let outcome = entry.model.outcome(now, units);
        self.allowed += u128::from(outcome.allowed);
        self.rejected += u128::from(outcome.rejected);
        of_model(outcome)
    }

    fn inspect(&self, key: &str, now: u64) -> Option<Seen> {
        if self.exempt.contains(key) {
            return Some(exempt(0));
        }
        let model = &self.state(key, now)?.model;
        Some((
            0,
            0,
            Some(model.available(now)),
            model.look_retry_after(now),
            model.reset_after(now),
        ))
    }

    fn assign(&mut self, key: &str, tier: &str) -> Result<(), UnknownTier> {
        let tier = match tier {
            "default" => None,
            tier if self.tiers.contains_key(tier) => Some(tier.to_owned()),
            tier => return Err(UnknownTier(tier.to_owned())),
        };
        if self.assigned.get(key) != tier.as_ref() {
            self.entries.remove(key);
            match tier {
                Some(tier) => self.assigned.insert(key.to_owned(), tier),
                None => self.assigned.remove(key),
            };
        }
        Ok(())
    }

    /// Drops the state of every rule no longer in force.
    /// After new policies: a key keeps its state only when it is not exempt
    /// and its own rule (its tier's, or the default) is the one the state
    /// was built under.
    fn sweep(&mut self) {
        let stale: Vec<String> = self
            .entries
            .iter()
            .filter(|(key, entry)| {
                self.exempt.contains(key.as_str()) || entry.version != self.rule_of(key).version
            })
            .map(|(key, _)| key.clone())
            .collect();
        for key in stale {
            self.entries.remove(&key);
        }
    }

    /// The idle age for the policies `specs` in force.
    fn set_idle(&mut self, specs: &[Spec]) {
        let longest = specs
            .iter()
            .map(|spec| spec.policy().counted_span_s())
            .fold(self.idle_s.max(self.configured_span_s), u64::max);
        self.idle = longest.saturating_mul(self.clock.ticks_per_second);
    }

    fn configure(&mut self, spec: Spec) -> Result<Policy, PolicyError> {
        if spec.model(self.clock).is_none() {
            return Err(too_long(self.clock, &spec));
        }
        let span_s = spec.policy().counted_span_s();
        self.configured_span_s = self.configured_span_s.max(span_s);
        let raised = span_s.saturating_mul(self.clock.ticks_per_second);
        self.idle = self.idle.max(raised);
        self.default = self.rule(spec);
        self.sweep();
        Ok(spec.policy())
    }

    /// `reconfigure` to `config`, whose policies are `default` and `tiers`.
    fn reconfigure(
        &mut self,
        default: Spec,
        tiers: &BTreeMap<String, Spec>,
        exempt: BTreeSet<String>,
    ) -> Result<(), (String, PolicyError)> {
        let named = [("default_policy".to_owned(), default)].into_iter().chain(
            tiers
                .iter()
                .map(|(name, spec)| (format!("tiers.{name}"), *spec)),
        );
        for (name, spec) in named {
            if spec.model(self.clock).is_none() {
                return Err((name, too_long(self.clock, &spec)));
            }
        }
        let kept = |current: Option<Rule>, spec: Spec| {
            current.filter(|current| current.spec.policy() == spec.policy())
        };
        self.default = match kept(Some(self.default), default) {
            Some(rule) => rule,
            None => self.rule(default),
        };
        let mut next = BTreeMap::new();
        for (name, spec) in tiers {
            let rule = match kept(self.tiers.get(name).copied(), *spec) {
                Some(rule) => rule,
                None => self.rule(*spec),
            };
            next.insert(name.clone(), rule);
        }
        self.tiers = next;
        self.exempt = exempt;
        let specs: Vec<Spec> = std::iter::once(default)
            .chain(tiers.values().copied())
            .collect();
        self.set_idle(&specs);
        self.sweep();
        Ok(())
    }

    fn tracked(&self, now: u64) -> u64 {
        KEYS.iter()
            .filter(|key| self.state(key, now).is_some())
            .count() as u64
    }
}

fn too_long(clock: Clock, spec: &Spec) -> PolicyError {
    PolicyError::WindowTooLong {
        window_s: spec.window_s,
        max_window_s: u64::MAX / clock.ticks_per_second,
    }
}

fn config(
    default: Spec,
    tiers: &BTreeMap<String, Spec>,
    k3_exempt: bool,
    idle_s: u64,
) -> LimiterConfig {
    LimiterConfig {
        policy_lists: Default::default(),
        default_policy: default.policy(),
        tiers: tiers
            .iter()
            .map(|(name, spec)| (name.clone(), spec.policy()))
            .collect(),
        exempt_keys: if k3_exempt {
            vec!["k3".to_owned()]
        } else {
            vec![]
        },
        idle_eviction_s: idle_s,
        ..LimiterConfig::default()
    }
}

fn nonzero(n: u64) -> NonZeroU64 {
    NonZeroU64::new(n).unwrap()
}

/// One case: the clock, the quantum's seconds `q`, `k` (idle after
/// `(2k + 1) q` s), the policies of the default and tiers `a` and `b`,
/// whether `k3` is exempt, and the operations, each with how far into its
/// quantum it happens (drawn from 0..2^64 and brought under the jitter by
/// the test). Advances go from 1 quantum (never idle unless `k` is 0) to
/// `k + 2` (always idle).
#[derive(Debug)]
struct Case {
    clock: Clock,
    q: u64,
    k: u64,
    policies: [Spec; 3],
    k3_exempt: bool,
    ops: Vec<(Op, u64)>,
}

fn cases() -> impl Strategy<Value = Case> {
    (clocks(), 0u64..=2).prop_flat_map(|(clock, k)| {
        let longest_q = MAX / (8 * clock.ticks_per_second);
        (
            edgy(1, longest_q),
            [specs(clock), specs(clock), specs(clock)],
            any::<bool>(),
            ops(clock, k + 2),
        )
            .prop_map(move |(q, policies, k3_exempt, ops)| Case {
                clock,
                q,
                k,
                policies,
                k3_exempt,
                ops,
            })
    })
}

proptest! {
    // Cases whose policies count over more than the longest quantum are
    // rejected (about nineteen in twenty: `specs` draws windows up to the
    // longest); `tests/long_windows.rs` covers those by hand.
    #![proptest_config(ProptestConfig {
        max_global_rejects: 40_000,
        ..ProptestConfig::with_cases(400)
    })]

    #[test]
    fn the_limiter_matches_its_model(
        case in cases(),
        start in edgy(0, u64::MAX),
    ) {
        let Case { clock, q, k, policies: [default, a, b], k3_exempt, ops } = case;
        // A key is kept as long as its policy counts (`counted_span_s`), so
        // the quantum is at least the longest span of any policy the case
        // puts in force: the idle age stays `(k + 1/2) Q`.
        let spans = [default, a, b].into_iter().chain(ops.iter().flat_map(|(op, _)| match op {
            Op::Configure(spec) => vec![*spec],
            Op::Reconfigure { default, a, b, .. } => {
                [*default, a.flatten(), b.flatten()].into_iter().flatten().collect()
            }
            _ => Vec::new(),
        }));
        let q = spans.map(|spec| spec.policy().counted_span_s()).fold(q, u64::max);
        prop_assume!(q <= MAX / (8 * clock.ticks_per_second));
        let idle_s = (2 * k + 1) * q;
        let quantum = 2 * q * clock.ticks_per_second;
        let jitter = q * clock.ticks_per_second - 1;
        let mut tiers = BTreeMap::from([("a".to_owned(), a), ("b".to_owned(), b)]);
        let limiter = Limiter::new(&config(default, &tiers, k3_exempt, idle_s), clock.resolution);
        let named = [("default_policy", default), ("tiers.a", a), ("tiers.b", b)];
        if let Some((name, spec)) = named.iter().find(|(_, spec)| spec.model(clock).is_none()) {
            let error = limiter.err().unwrap();
            prop_assert!(
                matches!(&error, ConfigError::Policy { name: got, reason }
                    if got == name && *reason == too_long(clock, spec)),
                "{:?}", error
            );
            return Ok(());
        }
        let limiter = limiter.unwrap();
        let mut model = LimiterModel {
            clock,
            idle: 0,
            idle_s,
            configured_span_s: 0,
            default: Rule { spec: default, version: 0 },
            tiers: BTreeMap::new(),
            exempt: if k3_exempt { BTreeSet::from(["k3".to_owned()]) } else { BTreeSet::new() },
            assigned: BTreeMap::new(),
            entries: BTreeMap::new(),
            allowed: 0,
            rejected: 0,
            versions: 0,
        };
        model.tiers = tiers.iter().map(|(name, spec)| (name.clone(), model.rule(*spec))).collect();
        model.set_idle(&[default, a, b]);
        let mut k3_exempt = k3_exempt;
        let mut base = start.min(u64::MAX - jitter);
        for (op, into_quantum) in ops {
            let now = base + into_quantum % (jitter + 1);
            match op {
                Op::Request { key, units } => {
                    let key = KEYS[key];
                    let decision = if units == 1 {
                        limiter.request(key, now)
                    } else {
                        limiter.request_batch(key, now, nonzero(units))
                    };
                    prop_assert_eq!(seen(clock, &decision), model.request(key, now, units), "{} units of {} at {}", units, key, now);
                }
                Op::Advance { quanta } => {
                    if let Some(next) = quanta
                        .checked_mul(quantum)
                        .and_then(|ticks| base.checked_add(ticks))
                        .filter(|next| next.checked_add(jitter).is_some())
                    {
                        base = next;
                    }
                }
                Op::Assign { key, tier } => {
                    let (key, tier) = (KEYS[key], TIERS[tier]);
                    prop_assert_eq!(limiter.assign_tier(key, tier), model.assign(key, tier));
                    prop_assert_eq!(limiter.tier_of(key), model.assigned.get(key).map_or("default", |tier| tier.as_str()));
                }
                Op::Reset { key } => {
                    let key = KEYS[key];
                    let expected = model.state(key, now).is_some();
                    let had_state = limiter.reset(key, now);
                    model.entries.remove(key);
                    prop_assert_eq!(had_state, expected, "reset of {} at {}", key, now);
                }
                Op::Configure(spec) => {
                    prop_assert_eq!(limiter.configure(spec.policy()), model.configure(spec));
                    prop_assert_eq!(limiter.default_policy(), model.default.spec.policy());
                }
                Op::Reconfigure { default, a, b, k3_exempt: exempt } => {
                    let default = default.unwrap_or(model.default.spec);
                    let mut next = BTreeMap::new();
                    for (name, change) in [("a", a), ("b", b)] {
                        let current = tiers.get(name).copied();
                        if let Some(spec) = change.unwrap_or(current) {
                            next.insert(name.to_owned(), spec);
                        }
                    }
                    let exempt_keys = if exempt { BTreeSet::from(["k3".to_owned()]) } else { BTreeSet::new() };
                    let got = limiter.reconfigure(&config(default, &next, exempt, idle_s));
                    match model.reconfigure(default, &next, exempt_keys) {
                        Ok(()) => {
                            prop_assert!(got.is_ok(), "{:?}", got);
                            tiers = next;
                            k3_exempt = exempt;
                        }
                        Err((name, reason)) => {
                            prop_assert!(
                                matches!(&got, Err(ConfigError::Policy { name: got, reason: why })
                                    if *got == name && *why == reason),
                                "{:?}", got
                            );
                        }
                    }
                }
                Op::Inspect { key } => {
                    let key = KEYS[key];
                    let got = limiter.inspect(key, now).map(|decision| seen(clock, &decision));
                    prop_assert_eq!(got, model.inspect(key, now), "inspect of {} at {}", key, now);
                    let policy = (!model.exempt.contains(key)).then(|| model.rule_of(key).spec.policy());
                    prop_assert_eq!(limiter.policy_for(key), policy);
                    prop_assert_eq!(limiter.is_exempt(key), k3_exempt && key == "k3");
                }
                Op::Stats => {
                    let stats = limiter.stats(now);
                    prop_assert_eq!((stats.allowed, stats.rejected), (model.allowed, model.rejected));
                    prop_assert_eq!(stats.tracked_keys, model.tracked(now), "at {}", now);
                }
            }
        }
    }
}
