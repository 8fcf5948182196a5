//! Splitting one bucket's budget among the streams that share it, by their
//! demand: the rule `tollgate rlqs` (Envoy's Rate Limit Quota Service) uses
//! to hand each Envoy its part of one limit.
//!
//! [`split_by_demand`] takes the budget (whole tokens per fill) and each
//! stream's demand (thousandths of a token per fill, read from its reports
//! on the server's clock), and gives each stream whole tokens, all of the
//! budget and never more:
//!
//! - **Over-subscribed** (the demands add up to more than the budget): each
//!   stream's part is in proportion to its demand, what one central limiter
//!   would have admitted of the same arrivals. A stream whose demand is under
//!   an eighth of the mean counts as that eighth, so that a stream that was
//!   quiet at its last report is not shut out until its next one.
//! - **Under-subscribed**: each stream gets its demand, and what no stream
//!   asks for is lent to all in equal parts, so that any stream can grow
//!   until its next report.
//! - **No demand at all** (a new bucket, or every stream quiet): equal parts.
//!
//! Whole tokens come from the exact parts by the largest remainder method
//! (Hamilton's): each part rounded down, then the tokens left over, one each,
//! to the streams with the largest remainders (the earlier stream on a tie).
//! So the parts add up to the budget exactly, and each is within one token
//! of its exact value. The arithmetic is in integers (`u128`), with no
//! overflow for any input: demands are capped at [`MAX_DEMAND`].

/// The largest demand counted (thousandths of a token per fill); larger
/// ones, from reports of counts near 2^64, count as this.
pub const MAX_DEMAND: u64 = 1 << 48;

/// Each stream's part of `budget` whole tokens, in the order of `demands`
/// (one per stream, thousandths of a token per fill): see the module's
/// rules. Empty when there is no stream.
pub fn split_by_demand(budget: u64, demands: &[u64]) -> Vec<u64> {
    let count = demands.len() as u128;
    if count == 0 {
        return Vec::new();
    }
    let demands: Vec<u128> = demands
        .iter()
        .map(|&demand| u128::from(demand.min(MAX_DEMAND)))
        .collect();
    let total: u128 = demands.iter().sum();
    let budget_milli = u128::from(budget) * 1000;
    // Each exact part is `numerators[i] / denominator` tokens.
    let (numerators, denominator): (Vec<u128>, u128) = if total == 0 {
        (vec![u128::from(budget); demands.len()], count)
    } else if total <= budget_milli {
        // demand + (budget - total) / count, in thousandths.
        let spare = budget_milli - total;
        (
            demands
                .iter()
                .map(|&demand| count * demand + spare)
                .collect(),
            1000 * count,
        )
    } else {
        // In proportion to max(demand, mean / 8), the weights scaled by
        // 8 × count to stay whole: max(8 × count × demand, total).
        let weights: Vec<u128> = demands
            .iter()
            .map(|&demand| (8 * count * demand).max(total))
            .collect();
        let weights = scaled_down(weights);
        let sum: u128 = weights.iter().sum();
        (
            weights
                .iter()
                .map(|&weight| u128::from(budget) * weight)
                .collect(),
            sum,
        )
    };
    apportion(budget, &numerators, denominator)
}

/// `weights` shifted right together until the largest fits in 60 bits, so
/// that a budget (at most 64 bits) times a weight fits in a `u128`. The
/// smallest weight is at least the largest over 8 × 2^20 streams' worth in
/// practice, so the shift keeps its precision for any realistic count.
fn scaled_down(weights: Vec<u128>) -> Vec<u128> {
    let largest = weights.iter().copied().max().unwrap_or(0);
    let bits = 128 - largest.leading_zeros();
    if bits <= 60 {
        return weights;
    }
    let shift = bits - 60;
    weights
        .into_iter()
        .map(|weight| (weight >> shift).max(1))
        .collect()
}

/// Whole parts of `budget` from the exact parts `numerators[i] /
/// denominator` (which add up to `budget`, or just under it after
/// scaling): each rounded down, then the tokens left, one each, to the
/// largest remainders (the earlier part on a tie).
fn apportion(budget: u64, numerators: &[u128], denominator: u128) -> Vec<u64> {
    let denominator = denominator.max(1);
    let mut parts: Vec<u64> = numerators
        .iter()
        .map(|&numerator| u64::try_from(numerator / denominator).unwrap_or(u64::MAX))
        .collect();
    let given: u128 = parts.iter().map(|&part| u128::from(part)).sum();
    let mut left = u128::from(budget).saturating_sub(given);
    let mut order: Vec<usize> = (0..numerators.len()).collect();
    order.sort_by(|&a, &b| {
        (numerators[b] % denominator)
            .cmp(&(numerators[a] % denominator))
            .then(a.cmp(&b))
    });
    for index in order.into_iter().cycle().take(numerators.len() * 2) {
        if left == 0 {
            break;
        }
        parts[index] = parts[index].saturating_add(1);
        left -= 1;
    }
    parts
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn over_subscribed_parts_follow_demand() {
        // 70, 20 and 10 tokens a fill asked of a budget of 30: 21, 6, 3.
        assert_eq!(
            split_by_demand(30, &[70_000, 20_000, 10_000]),
            vec![21, 6, 3]
        );
        // 2, 1 and 1 asked of 2: exact parts 1, 0.5, 0.5; the tie's token
        // goes to the earlier stream.
        assert_eq!(split_by_demand(2, &[2_000, 1_000, 1_000]), vec![1, 1, 0]);
    }

    #[test]
    fn a_quiet_stream_keeps_an_eighth_of_the_mean_when_over_subscribed() {
        // Demands 90 and 0 of a budget of 60 (total 90, two streams): the
        // quiet one counts as 90 / 2 / 8 = 5.625; weights 90 and 5.625 of
        // 95.625: 56.47 and 3.53 tokens, so 56 and 4 (the larger remainder).
        assert_eq!(split_by_demand(60, &[90_000, 0]), vec![56, 4]);
    }

    #[test]
    fn under_subscribed_streams_get_their_demand_and_share_the_rest() {
        // 10 and 4 asked of 30: 16 spare, 8 each: 18 and 12.
        assert_eq!(split_by_demand(30, &[10_000, 4_000]), vec![18, 12]);
        // A new stream with no demand yet gets its equal part of the spare:
        // 16 / 3 = 5.33 each, so 15.33, 9.33 and 5.33; the one token left
        // (three equal remainders) to the first.
        assert_eq!(split_by_demand(30, &[10_000, 4_000, 0]), vec![16, 9, 5]);
    }

    #[test]
    fn no_demand_splits_evenly() {
        assert_eq!(split_by_demand(10, &[0, 0, 0]), vec![4, 3, 3]);
        assert_eq!(split_by_demand(5, &[]), Vec::<u64>::new());
        assert_eq!(split_by_demand(0, &[5_000, 0]), vec![0, 0]);
    }

    #[test]
    fn demands_near_the_top_of_u64_do_not_overflow() {
        // Under-subscribed: the whole budget, whatever its size.
        let parts = split_by_demand(u64::MAX, &[u64::MAX, u64::MAX, 1]);
        let sum: u128 = parts.iter().map(|&part| u128::from(part)).sum();
        assert_eq!(sum, u128::from(u64::MAX));
        // Over-subscribed: the demands count as 2^48 each (the cap) and the
        // third as the floor, total / 24 = (2^49 + 1) / 24; in weights of 24
        // each, 2 / 50 of the budget for the third: 42,949,672.96 of 2^30,
        // and 515,396,075.52 for each of the others.
        assert_eq!(
            split_by_demand(1 << 30, &[u64::MAX, u64::MAX, 1]),
            vec![515_396_076, 515_396_075, 42_949_673]
        );
    }

    /// The exact parts, in floating point: an independent model of the
    /// module's rules.
    fn model(budget: u64, demands: &[u64]) -> Vec<f64> {
        let count = demands.len() as f64;
        let demands: Vec<f64> = demands
            .iter()
            .map(|&demand| demand.min(MAX_DEMAND) as f64 / 1000.0)
            .collect();
        let total: f64 = demands.iter().sum();
        let budget = budget as f64;
        if total == 0.0 {
            return vec![budget / count; demands.len()];
        }
        if total <= budget {
            return demands
                .iter()
                .map(|demand| demand + (budget - total) / count)
                .collect();
        }
        let floor = total / count / 8.0;
        let weights: Vec<f64> = demands.iter().map(|demand| demand.max(floor)).collect();
        let sum: f64 = weights.iter().sum();
        weights.iter().map(|weight| budget * weight / sum).collect()
    }

    proptest! {
        #[test]
        fn parts_add_up_to_the_budget_each_within_a_token_of_exact(
            budget in 0u64..1_000_000,
            demands in proptest::collection::vec(0u64..10_000_000, 1..40),
        ) {
            let parts = split_by_demand(budget, &demands);
            prop_assert_eq!(parts.len(), demands.len());
            prop_assert_eq!(parts.iter().sum::<u64>(), budget);
            for (part, exact) in parts.iter().zip(model(budget, &demands)) {
                prop_assert!((*part as f64 - exact).abs() < 1.0 + 1e-6,
                    "{part} against {exact}");
            }
        }
    }
}
