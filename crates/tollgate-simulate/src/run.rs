//! A run: each policy decides every arrival of a pattern in tollgate's own
//! engine ([`Limiter::acquire_one`] on a limiter counting nanoseconds, the
//! time each arrival's), and the decisions are counted per step of time
//! ([`Bucket`]). Nothing is computed from a formula: every allowed and
//! refused request, and every remaining budget, is the engine's answer.

use std::time::Duration;

use serde::Serialize;
use tollgate_core::{
    Limit, LimitUnits, Limiter, LimiterConfig, MAX_VALUE, Policy, PolicyError, Resolution,
};

use crate::pattern::{Arrivals, nanos};

/// The most steps a run is cut into: a finer step is refused.
pub const MAX_STEPS: u64 = 100_000;

/// A policy with the name it is shown under.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct NamedPolicy {
    /// The name in the legend and the JSON.
    pub name: String,
    /// The policy.
    pub policy: Policy,
}

/// One step of a run.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Bucket {
    /// Where the step starts, in milliseconds from the run's start.
    pub start_ms: u64,
    /// Requests allowed in it.
    pub allowed: u64,
    /// Requests refused in it.
    pub refused: u64,
    /// What the policy had left at the step's last nanosecond: a look (0
    /// units) at that time, which takes nothing.
    pub remaining: u64,
}

/// What one policy did to the pattern.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Run {
    /// The policy's name.
    pub name: String,
    /// The policy.
    pub policy: Policy,
    /// Requests allowed over the run.
    pub allowed: u64,
    /// Requests refused over the run.
    pub refused: u64,
    /// The run step by step.
    pub buckets: Vec<Bucket>,
}

/// A run that cannot be made.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum RunError {
    /// A policy does not fit the engine's nanosecond clock.
    #[error("policy {name}: {source}")]
    Policy {
        /// The policy's name.
        name: String,
        /// Why.
        source: PolicyError,
    },
    /// The engine could not be built (not expected: its configuration is
    /// fixed).
    #[error("the engine: {0}")]
    Engine(String),
    /// The step is under 1 ms, or cuts the run into more than [`MAX_STEPS`].
    #[error("the step must be at least 1 ms and cut the run into at most {MAX_STEPS} steps")]
    Step,
}

/// Each of `policies` deciding every one of `arrivals`, one unit each, its
/// decisions counted per `step` from the run's start.
///
/// # Errors
///
/// [`RunError::Policy`] for a policy the nanosecond clock cannot count
/// (a window over about 584 years), [`RunError::Step`] for a step under
/// 1 ms or one that makes more than [`MAX_STEPS`] steps.
pub fn simulate(
    policies: &[NamedPolicy],
    arrivals: &Arrivals,
    step: Duration,
) -> Result<Vec<Run>, RunError> {
    let step = nanos(step);
    let span = arrivals.end.saturating_sub(arrivals.start);
    if step < 1_000_000 || span.div_ceil(step) > MAX_STEPS {
        return Err(RunError::Step);
    }
    let steps = span.div_ceil(step).max(1);
    policies
        .iter()
        .map(|named| run_one(named, arrivals, step, steps))
        .collect()
}

fn run_one(
    named: &NamedPolicy,
    arrivals: &Arrivals,
    step: u64,
    steps: u64,
) -> Result<Run, RunError> {
    let failed = |source| RunError::Policy {
        name: named.name.clone(),
        source,
    };
    // One key that is never evicted however long it idles.
    let config = LimiterConfig {
        idle_eviction_s: MAX_VALUE,
        ..LimiterConfig::default()
    };
    let limiter = Limiter::new(&config, Resolution::Nanoseconds)
        .map_err(|error| RunError::Engine(error.to_string()))?;
    let prepared = limiter.prepare(named.policy).map_err(failed)?;
    let limit = Limit::Policy {
        key: "simulated",
        policy: &prepared,
    };
    let mut buckets: Vec<Bucket> = (0..steps)
        .map(|index| Bucket {
            start_ms: index.saturating_mul(step) / 1_000_000,
            allowed: 0,
            refused: 0,
            remaining: 0,
        })
        .collect();
    let mut times = arrivals.times.iter().copied().peekable();
    let (mut allowed, mut refused) = (0, 0);
    for (index, bucket) in buckets.iter_mut().enumerate() {
        let bucket_end = arrivals
            .start
            .saturating_add((index as u64 + 1).saturating_mul(step))
            .min(arrivals.end);
        while let Some(time) = times.next_if(|time| *time < bucket_end) {
            if limiter.acquire_one(&limit, time).is_allowed() {
                bucket.allowed += 1;
                allowed += 1;
            } else {
                bucket.refused += 1;
                refused += 1;
            }
        }
        let look = LimitUnits { limit, units: 0 };
        let last = bucket_end.saturating_sub(1);
        bucket.remaining = limiter
            .acquire_units(&[look], last)
            .first()
            .and_then(|decision| decision.decision.remaining)
            .unwrap_or(0);
    }
    Ok(Run {
        name: named.name.clone(),
        policy: named.policy,
        allowed,
        refused,
        buckets,
    })
}
