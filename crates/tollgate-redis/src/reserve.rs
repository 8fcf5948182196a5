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

use tollgate_core::{LimitUnits, Reservation, StoreError};

use crate::RedisStore;
use crate::protocol::COUNTING_FIXED_WINDOW;
use crate::refund;

impl RedisStore {
    /// [`Store::reserve_units`](tollgate_core::Store::reserve_units) at
    /// `now`, in microseconds (`None`: the store's time source): the
    /// decisions of core's `Limiter::reserve_units` on a microsecond
    /// gateway, waiting up to `max_wait` (whole microseconds). The
    /// reservation's `counted_at` is in microseconds on the call's clock.
    ///
    /// # Errors
    ///
    /// [`StoreError::Unavailable`] when Redis does not answer in time, or a
    /// policy cannot be computed exactly in Redis.
    pub async fn reserve_units_at(
        &self,
        limits: &[LimitUnits<'_>],
        max_wait: Duration,
        now: Option<u64>,
    ) -> Result<Reservation, StoreError> {
        let max_wait = u64::try_from(max_wait.as_micros()).unwrap_or(u64::MAX >> 12);
        // The scripts' numbers are exact below 2^52.
        let max_wait = max_wait.min(1 << 52);
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
