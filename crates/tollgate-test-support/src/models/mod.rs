//! Naive models of the three algorithms, written from their descriptions and
//! independently of the engine: the fixed window as a count per window
//! (counting refused requests too, as envoyproxy/ratelimit does, when asked),
//! the sliding log as a plain list of the units it allowed, the token bucket
//! as a count of tokens refilled at each request (and a second one in
//! rational numbers, to cross-check it). Times are ticks of any unit: a
//! model's window is in the unit of its `now`.
//!
//! [`Model::request`] is a model's definition: one request at a time. A batch
//! of `n` is defined as `n` requests one after another
//! ([`Model::batch_by_singles`]); [`Model::batch`] and [`Model::available`]
//! compute the same in one step, so that values near 2^63 can be modelled,
//! and core's `models_agree.rs` holds them to the one-at-a-time definition. A
//! request held to several limits with units each is [`acquire_outcomes`]:
//! the rule written out from its description, on top of the models.

mod fixed_window;
mod ratio_token_bucket;
mod refunds;
mod sliding_log;
mod token_bucket;

pub use fixed_window::FixedWindowModel;
pub use ratio_token_bucket::RatioTokenBucketModel;
pub use refunds::{FixedWindowRefunds, SlidingLogRefunds, TokenBucketRefunds};
pub use sliding_log::SlidingLogModel;
pub use token_bucket::TokenBucketModel;

/// What a single request returned: allowed, remaining, retry_after (ticks).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Single {
    /// Whether the request was allowed.
    pub allowed: bool,
    /// What is left after it.
    pub remaining: u64,
    /// The wait until a request would be allowed (0 when allowed).
    pub retry_after: u64,
}

/// What a batch returned, built from single requests.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Batch {
    /// The units allowed.
    pub allowed: u64,
    /// The units refused.
    pub rejected: u64,
    /// What is left after the batch.
    pub remaining: u64,
    /// The last refused unit's wait (0 when none was refused).
    pub retry_after: u64,
}

/// A batch's answer and, after it, the ticks until the whole budget is back.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Outcome {
    /// The units allowed.
    pub allowed: u64,
    /// The units refused.
    pub rejected: u64,
    /// What is left after the batch.
    pub remaining: u64,
    /// The last refused unit's wait (0 when none was refused).
    pub retry_after: u64,
    /// The ticks until the whole budget is back.
    pub reset_after: u64,
}

impl Outcome {
    fn new(batch: Batch, reset_after: u64) -> Self {
        Outcome {
            allowed: batch.allowed,
            rejected: batch.rejected,
            remaining: batch.remaining,
            retry_after: batch.retry_after,
            reset_after,
        }
    }
}

/// A model of one algorithm's state for one key: its definition is
/// [`Model::request`], the rest is computed from it or held to it.
pub trait Model {
    /// One request at `now`: the model's definition.
    fn request(&mut self, now: u64) -> Single;

    /// A copy, to try requests on without changing this model.
    fn boxed_clone(&self) -> Box<dyn Model>;

    /// Whether refused requests are counted too.
    fn counts_refused(&self) -> bool {
        false
    }

    /// Ticks from `now` until the whole budget is available again; 0 when it
    /// is. Changes nothing.
    fn reset_after(&self, now: u64) -> u64;

    /// The wait a look (0 units) at `now` is told: 0, except for a window
    /// counting refused requests that is past its limit (the wait until the
    /// window ends), as envoyproxy/ratelimit answers a look OVER_LIMIT then.
    fn look_retry_after(&self, _now: u64) -> u64 {
        0
    }

    /// How many single requests at `now` would be allowed one after another.
    fn available(&self, now: u64) -> u64;

    /// `units` single requests at `now`, in one step.
    fn batch(&mut self, now: u64, units: u64) -> Batch;

    /// The state, to tell two models apart.
    fn state(&self) -> String;

    /// Gives back `units` at `now` (a refund). Only the models of
    /// `refunds.rs` have refunds.
    fn refund(&mut self, _now: u64, _units: u64) {
        unimplemented!("this model has no refunds: use those of refunds.rs")
    }

    /// [`Model::available`] by its definition: single requests on a copy.
    fn available_by_singles(&self, now: u64) -> u64 {
        let mut copy = self.boxed_clone();
        let mut allowed = 0;
        while copy.request(now).allowed {
            allowed += 1;
        }
        allowed
    }

    /// [`Model::batch`] by its definition: `units` single requests at `now`;
    /// `remaining` and `retry_after` are the last one's, `retry_after` 0
    /// when all were allowed.
    fn batch_by_singles(&mut self, now: u64, units: u64) -> Batch {
        let mut batch = Batch {
            allowed: 0,
            rejected: 0,
            remaining: self.available_by_singles(now),
            retry_after: 0,
        };
        for _ in 0..units {
            let single = self.request(now);
            if single.allowed {
                batch.allowed += 1;
            } else {
                batch.rejected += 1;
            }
            batch.remaining = single.remaining;
            batch.retry_after = single.retry_after;
        }
        if batch.rejected == 0 {
            batch.retry_after = 0;
        }
        batch
    }

    /// A batch and the wait for the whole budget after it.
    fn outcome(&mut self, now: u64, units: u64) -> Outcome {
        let batch = self.batch(now, units);
        Outcome::new(batch, self.reset_after(now))
    }
}

impl std::fmt::Debug for dyn Model {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.state())
    }
}

/// `value` as a `u64`, or `u64::MAX` when it does not fit.
fn saturate(value: u128) -> u64 {
    u64::try_from(value).unwrap_or(u64::MAX)
}

/// [`acquire_outcomes`] without the waits for the whole budget.
pub fn acquire_units(models: &mut [Box<dyn Model>], units: &[u64], now: u64) -> Vec<Batch> {
    acquire_outcomes(models, units, now)
        .into_iter()
        .map(|outcome| Batch {
            allowed: outcome.allowed,
            rejected: outcome.rejected,
            remaining: outcome.remaining,
            retry_after: outcome.retry_after,
        })
        .collect()
}

/// One request held to every model in `models`, `units[i]` from the i-th, by
/// the rule as it is written:
///
/// - 0 units only look: nothing allowed, nothing rejected, what is left, and
///   the wait a look is told ([`Model::look_retry_after`]).
/// - A model that counts refused requests takes its units as a batch
///   whatever the others say, and refuses nobody.
/// - The others are all or nothing among themselves: each takes its batch
///   only if each of them would allow all of its units (tried on a copy).
///   Otherwise none takes anything: one that would have allowed them reports
///   them rejected, with what it has left and no wait; one that would not
///   reports them rejected with what it has left and the wait a batch of its
///   units would have been told (tried on a copy).
pub fn acquire_outcomes(models: &mut [Box<dyn Model>], units: &[u64], now: u64) -> Vec<Outcome> {
    let everyone = models
        .iter()
        .zip(units)
        .filter(|(model, _)| !model.counts_refused())
        .all(|(model, &units)| model.available(now) >= units);
    models
        .iter_mut()
        .zip(units)
        .map(|(model, &units)| {
            let available = model.available(now);
            if units == 0 {
                return Outcome {
                    allowed: 0,
                    rejected: 0,
                    remaining: available,
                    retry_after: model.look_retry_after(now),
                    reset_after: model.reset_after(now),
                };
            }
            if model.counts_refused() || everyone {
                return model.outcome(now, units);
            }
            let retry_after = if available < units {
                model.boxed_clone().batch(now, units).retry_after
            } else {
                0
            };
            Outcome {
                allowed: 0,
                rejected: units,
                remaining: available,
                retry_after,
                reset_after: model.reset_after(now),
            }
        })
        .collect()
}
