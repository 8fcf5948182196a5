//! Waiting instead of refusing on Redis: [`RedisStore::reserve_units_at`],
//! core's `Limiter::reserve_units` run by `reserve` in `lua/acquire.lua`
//! (one script call, atomic, for limits in one slot), and
//! [`RedisStore::cancel_reservation_at`], its units given back through
//! `lua/refund.lua` (core's `Limiter::cancel_reservation`, one call per
//! limit).
//!
//! On a Redis Cluster, a request whose limits sit in different slots is
//! decided in steps ([`split`](crate::split)), which cannot wait together:
//! it is decided at once, as `acquire_units` decides, and never waits.

use std::time::Duration;

use tollgate_core::{LimitUnits, MaxWait, Reservation, StoreError};

use crate::RedisStore;
use crate::call::ScriptLimit;
use crate::plans::Plans;
use crate::protocol::COUNTING_FIXED_WINDOW;
use crate::refund;

impl RedisStore {
    /// [`Store::reserve_units`](tollgate_core::Store::reserve_units) at
    /// `now`, in microseconds (`None`: the store's time source): the
    /// decisions of core's `Limiter::reserve_units_within` on a microsecond
    /// gateway, waiting up to `max_wait` (whole microseconds), or up to the
    /// delay of the tier the script finds the plan on
    /// ([`MaxWait::TierDelay`]: the call names the delay of the tier it
    /// expects, and is sent again with the found tier's when the tier
    /// changed, as it is for the tier's rule). The
    /// reservation's `counted_at` is in microseconds on the call's clock.
    ///
    /// # Errors
    ///
    /// [`StoreError::Unavailable`] when Redis does not answer in time, or a
    /// policy cannot be computed exactly in Redis.
    pub async fn reserve_units_at(
        &self,
        limits: &[LimitUnits<'_>],
        max_wait: impl Into<MaxWait>,
        now: Option<u64>,
    ) -> Result<Reservation, StoreError> {
        let max_wait = match max_wait.into() {
            MaxWait::UpTo(max_wait) => {
                ScriptWait::UpTo(u64::try_from(max_wait.as_micros()).unwrap_or(u64::MAX))
            }
            MaxWait::TierDelay => ScriptWait::TierDelay,
        };
        let decided = self.decide_units(limits, now, Some(max_wait)).await?;
        Ok(Reservation {
            decisions: decided.decisions,
            wait: Duration::from_micros(decided.wait),
            counted_at: decided.counted_at,
        })
    }

    /// [`Store::cancel_reservation`](tollgate_core::Store::cancel_reservation)
    /// at `now` (µs; `None`: the store's time source): each limit's units
    /// counted at `counted_at` given back through `lua/refund.lua`, one call
    /// per limit (a plan's further policies too). The units each limit got
    /// back, 0 for an exempt plan, a state that has moved on, or a window
    /// counting refused units (it keeps the hit).
    ///
    /// # Errors
    ///
    /// [`StoreError::Unavailable`] when Redis fails; units of the limits
    /// given back before the failure stay given back.
    pub async fn cancel_reservation_at(
        &self,
        limits: &[LimitUnits<'_>],
        counted_at: u64,
        now: Option<u64>,
    ) -> Result<Vec<u64>, StoreError> {
        let context = &self.context;
        let plans = context.plans.load_full();
        let (_, sent, owners) = self.script_limits(limits, &plans)?;
        let now = now.map_or_else(|| (context.now)(), |now| now.to_string());
        let mut given = vec![0; limits.len()];
        for (limit, (index, name)) in sent.iter().zip(&owners) {
            if limit.rule.algorithm == COUNTING_FIXED_WINDOW {
                // Counted as a hit when it arrived, whatever followed.
                continue;
            }
            let back = refund::refund(
                &context.connection,
                &context.refund,
                &now,
                self.minimum_ttl_us,
                limit,
                counted_at,
            );
            let back = context.within(back).await?;
            if let (None, Some(slot)) = (name, given.get_mut(*index)) {
                *slot = back;
            }
        }
        Ok(given)
    }
}

/// How long a request sent to the scripts may wait: up to a number of
/// microseconds, or up to the delay of the tier its plan is sent on.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum ScriptWait {
    UpTo(u64),
    TierDelay,
}

impl ScriptWait {
    /// The microseconds `limits` may wait, as sent (the scripts' numbers
    /// are exact below 2^52): for [`ScriptWait::TierDelay`] the least delay
    /// of the tiers their plans are sent on, 0 without a plan.
    pub(crate) fn micros(self, limits: &[ScriptLimit], plans: &Plans) -> u64 {
        let micros = match self {
            ScriptWait::UpTo(micros) => micros,
            ScriptWait::TierDelay => limits
                .iter()
                .filter_map(|limit| limit.tier.as_deref())
                .map(|tier| plans.wait_for(tier))
                .min()
                .unwrap_or(0),
        };
        micros.min(1 << 52)
    }
}
