//! The models held to their own definitions, on small values where that can
//! be run: a batch computed in one step equals that many single requests,
//! and so does what is available; the token bucket in integers equals the
//! one in rational numbers while time goes forward. The engine is not used
//! here: this is what makes the models fit to judge it.

mod generators;
use tollgate_test_support::models;

use generators::{Step, step};
use models::{FixedWindowModel, Model, RatioTokenBucketModel, SlidingLogModel, TokenBucketModel};
use proptest::prelude::*;

/// A small model of any algorithm (windows in ticks).
fn small_model() -> impl Strategy<Value = Box<dyn Model>> {
    (0u8..4, 0u64..=6, 1u64..=20, 1u64..=6).prop_map(|(kind, limit, window, burst)| {
        let model: Box<dyn Model> = match kind {
            0 => Box::new(FixedWindowModel::new(limit.max(1), window)),
            // Only a window counting refused units may have a limit of 0.
            1 => Box::new(FixedWindowModel::counting_refused(limit, window)),
            2 => Box::new(SlidingLogModel::new(limit.max(1), window)),
            _ => Box::new(TokenBucketModel::new(limit.max(1), window, burst)),
        };
        model
    })
}

/// The window the steps are scaled by.
const WINDOW: u64 = 20;

proptest! {
    #![proptest_config(ProptestConfig::with_cases(500))]

    /// `batch` and `available` in one step equal their definitions by single
    /// requests, going forward and back.
    #[test]
    fn one_step_equals_single_requests(
        model in small_model(),
        start in 0u64..100,
        steps in prop::collection::vec((step(), 1u64..=10), 1..40),
    ) {
        // Two copies, one asked in one step, the other one request at a time.
        let mut model = model;
        let mut singles = model.boxed_clone();
        let mut now = start;
        for (step, units) in steps {
            now = Step::apply(step, now, WINDOW, 0, 1_000);
            prop_assert_eq!(model.available(now), singles.available_by_singles(now), "at {}", now);
            prop_assert_eq!(model.reset_after(now), singles.reset_after(now), "at {}", now);
            let one_step = model.batch(now, units);
            let by_singles = singles.batch_by_singles(now, units);
            prop_assert_eq!(one_step, by_singles, "{} units at {}", units, now);
        }
    }

    /// The token bucket in integers answers as the one in rational numbers
    /// (time going forward), the wait for a full bucket included.
    #[test]
    fn the_two_token_buckets_agree(
        limit in 1u64..=8, window in 1u64..=20, burst in 1u64..=8,
        steps in prop::collection::vec(0u64..=12, 1..60),
    ) {
        let mut integers = TokenBucketModel::new(limit, window, burst);
        let mut ratios = RatioTokenBucketModel::new(limit, window, burst);
        let mut now = 0;
        for elapsed in steps {
            now += elapsed;
            prop_assert_eq!(integers.request(now), ratios.request(now), "at {}", now);
            prop_assert_eq!(integers.reset_after(now), ratios.reset_after(now), "at {}", now);
        }
    }
}
