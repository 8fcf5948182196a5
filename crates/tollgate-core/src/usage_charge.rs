//! Charging by usage after the response (a gateway route's or a tower
//! layer's `charge`): what a usage report is, and what a request admitted
//! with `cost` is then settled for. The transitions that apply the
//! settlement are [`Limiter::give_back_units`](crate::Limiter::give_back_units)
//! and [`Limiter::overdraw_units`](crate::Limiter::overdraw_units), run on a
//! store by [`apply_settlement`].

use crate::limiter::{Limit, LimitDecision, LimitUnits};
use crate::store::{Store, StoreError};

/// The most units one request may be charged (`max`): 2^53, where Lua's
/// numbers stop being exact. (The Redis store computes a charge past a
/// limit exactly only while `limit + max`, or a token bucket's `(burst +
/// max) x window` in microseconds, stays below 2^52: the gateway checks its
/// routes against that at load.)
pub const MAX_CHARGE: u64 = 1 << 53;

/// What a response reported of its request's usage.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum UsageReport {
    /// A decimal integer of units, 0 to 2^64-1.
    Reported(u64),
    /// Not one decimal integer: a sign, a fraction, an exponent, spaces,
    /// more than 2^64-1, empty, or given more than once.
    Bad,
}

impl UsageReport {
    /// The report of a header's values (`None`: no value): one value of 1 to
    /// 20 ASCII digits that fits in 64 bits, else [`UsageReport::Bad`].
    ///
    /// ```
    /// use tollgate_core::UsageReport;
    ///
    /// assert_eq!(UsageReport::parse([&b"42"[..]]), Some(UsageReport::Reported(42)));
    /// assert_eq!(UsageReport::parse([&b"-1"[..]]), Some(UsageReport::Bad));
    /// assert_eq!(UsageReport::parse([&b"1"[..], &b"1"[..]]), Some(UsageReport::Bad));
    /// assert_eq!(UsageReport::parse(Vec::<&[u8]>::new()), None);
    /// ```
    pub fn parse<'a>(values: impl IntoIterator<Item = &'a [u8]>) -> Option<UsageReport> {
        let mut values = values.into_iter();
        let first = values.next()?;
        if values.next().is_some() {
            return Some(UsageReport::Bad);
        }
        let digits = !first.is_empty() && first.len() <= 20 && first.iter().all(u8::is_ascii_digit);
        let parsed = digits
            .then(|| std::str::from_utf8(first).ok()?.parse::<u64>().ok())
            .flatten();
        Some(parsed.map_or(UsageReport::Bad, UsageReport::Reported))
    }
}

/// What to do to each limit of a request admitted with `cost` units.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Settlement {
    /// The usage is the cost: nothing.
    Keep,
    /// Give these units back (the usage was below the cost).
    GiveBack(u64),
    /// Charge these units past the limit, into a debt of at most
    /// `overdraft` units (the usage was above the cost).
    Overdraw {
        /// The units beyond the cost.
        units: u64,
        /// The deepest debt: the charge's `max`.
        overdraft: u64,
    },
}

impl Settlement {
    /// This settlement, made a look where it would keep the cost (0 units
    /// charged past the limit into a debt of at most `overdraft`, so never
    /// deeper than the charge's own), for a caller that needs the state
    /// after it: the rate-limit fields a response sends as trailers.
    ///
    /// ```
    /// use tollgate_core::Settlement;
    ///
    /// assert_eq!(Settlement::Keep.or_look(40), Settlement::Overdraw { units: 0, overdraft: 40 });
    /// assert_eq!(Settlement::GiveBack(3).or_look(40), Settlement::GiveBack(3));
    /// ```
    #[must_use]
    pub fn or_look(self, overdraft: u64) -> Settlement {
        match self {
            Settlement::Keep => Settlement::Overdraw {
                units: 0,
                overdraft,
            },
            other => other,
        }
    }
}

/// A settlement, and what to count of its report.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Settled {
    /// What to do to the limits.
    pub settlement: Settlement,
    /// The report was missing or bad: the cost stays, never a refund.
    pub missing: bool,
    /// The report was above `max`: charged `max`.
    pub clamped: bool,
}

/// The settlement of a request admitted with `cost` units whose response
/// reported `report` (`None`: nothing), charged at most `max`: the usage
/// replaces the cost, so the request uses exactly the units it reported
/// (at most `max`); a missing or bad report leaves the cost.
///
/// ```
/// use tollgate_core::{Settlement, UsageReport, settle_usage};
///
/// let settled = settle_usage(1, 40, Some(UsageReport::Reported(10)));
/// assert_eq!(settled.settlement, Settlement::Overdraw { units: 9, overdraft: 40 });
/// assert_eq!(settle_usage(5, 40, Some(UsageReport::Reported(2))).settlement, Settlement::GiveBack(3));
/// assert!(settle_usage(1, 40, Some(UsageReport::Reported(99))).clamped);
/// assert!(settle_usage(1, 40, None).missing);
/// ```
pub fn settle_usage(cost: u64, max: u64, report: Option<UsageReport>) -> Settled {
    let (charged, missing, clamped) = match report {
        Some(UsageReport::Reported(units)) if units > max => (max, false, true),
        Some(UsageReport::Reported(units)) => (units, false, false),
        Some(UsageReport::Bad) | None => (cost, true, false),
    };
    let settlement = match charged.cmp(&cost) {
        std::cmp::Ordering::Equal => Settlement::Keep,
        std::cmp::Ordering::Less => Settlement::GiveBack(cost - charged),
        std::cmp::Ordering::Greater => Settlement::Overdraw {
            units: charged - cost,
            overdraft: max,
        },
    };
    Settled {
        settlement,
        missing,
        clamped,
    }
}

/// Applies `settlement` to each of `limits` in `store`: gives its units
/// back ([`Store::give_back_units`]) or charges them past the limit
/// ([`Store::overdraw_units`]); nothing for [`Settlement::Keep`]. Returns
/// the store's decisions, one per limit in order: what a look sees after
/// the settlement (none for `Keep`: the store is not called).
///
/// # Errors
///
/// The store's, when it could not settle (the request keeps its cost).
pub async fn apply_settlement(
    store: &dyn Store,
    limits: &[Limit<'_>],
    settlement: Settlement,
) -> Result<Vec<LimitDecision>, StoreError> {
    let (units, overdraft) = match settlement {
        Settlement::Keep => return Ok(Vec::new()),
        Settlement::GiveBack(units) => (units, None),
        Settlement::Overdraw { units, overdraft } => (units, Some(overdraft)),
    };
    let limits: Vec<LimitUnits<'_>> = limits
        .iter()
        .map(|limit| LimitUnits {
            limit: *limit,
            units,
        })
        .collect();
    match overdraft {
        Some(overdraft) => store.overdraw_units(&limits, overdraft).await,
        None => store.give_back_units(&limits).await,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_one_decimal_integer_is_a_report() {
        let parse =
            |values: &[&str]| UsageReport::parse(values.iter().map(|value| value.as_bytes()));
        assert_eq!(parse(&["0"]), Some(UsageReport::Reported(0)));
        assert_eq!(
            parse(&["18446744073709551615"]),
            Some(UsageReport::Reported(u64::MAX))
        );
        for bad in [
            "-5",
            "2.5",
            "18446744073709551616",
            "1e3",
            " 7",
            "7 ",
            "",
            "0x10",
            "+3",
        ] {
            assert_eq!(parse(&[bad]), Some(UsageReport::Bad), "{bad:?}");
        }
    }

    #[test]
    fn the_usage_replaces_the_cost() {
        let settled = |cost, report| settle_usage(cost, 40, report).settlement;
        assert_eq!(settled(3, Some(UsageReport::Reported(3))), Settlement::Keep);
        assert_eq!(
            settled(3, Some(UsageReport::Reported(0))),
            Settlement::GiveBack(3)
        );
        assert_eq!(
            settled(3, Some(UsageReport::Reported(u64::MAX))),
            Settlement::Overdraw {
                units: 37,
                overdraft: 40
            }
        );
        assert_eq!(settled(3, Some(UsageReport::Bad)), Settlement::Keep);
        assert_eq!(settled(3, None), Settlement::Keep);
    }
}
