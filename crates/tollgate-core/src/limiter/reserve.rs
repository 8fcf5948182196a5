//! Waiting instead of refusing ([`Limiter::reserve_units`]): a request that
//! its limits would refuse now, but allow within a bounded wait, is charged
//! now at the time its units become available, so that waiting requests
//! form an exact, ordered queue; and [`Limiter::cancel_reservation`], the
//! units given back when its caller leaves while it waits.

use std::time::Duration;

use super::*;

/// What [`Limiter::reserve_units`] (and [`Store::reserve_units`](crate::Store::reserve_units))
/// decided for one request.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Reservation {
    /// One decision per limit, in order. Reserved: every unit allowed, with
    /// what remains as seen at the reserved time, when the request is
    /// served. Refused: nothing taken (as [`Limiter::acquire_units`] refuses),
    /// and `retry_after` how long until a request like this one would be
    /// admitted to wait (its wait less `max_wait`).
    pub decisions: Vec<LimitDecision>,
    /// How long the request waits before it is served; zero when it is
    /// served at once, and when it is refused.
    pub wait: Duration,
    /// The time its units are counted at, in the store's own ticks
    /// (nanoseconds in memory, microseconds on Redis's clock): what
    /// [`Limiter::cancel_reservation`] names to give them back.
    pub counted_at: u64,
}

impl Reservation {
    /// Whether the request was admitted, at once or after [`Reservation::wait`].
    pub fn is_admitted(&self) -> bool {
        self.decisions.iter().all(LimitDecision::is_allowed)
    }
}

impl Limiter {
    /// One request held to every limit at once, each charged its own
    /// units, all or nothing as [`Limiter::acquire_units`] decides, but
    /// waiting up to `max_wait` (ticks) rather than refused: nginx's
    /// `limit_req ... burst=N delay=M`, a queue of bounded wait.
    ///
    /// The request is served at `at`, the latest of the times each limit
    /// would allow its units (see the algorithms' `earliest`: a token bucket
    /// along its theoretical arrival time, as GCRA grants future slots; a
    /// fixed window now or at the start of the next window; a sliding log
    /// when enough of its oldest units stop counting, never before its
    /// newest run). When `at - now <= max_wait`, every limit is charged now
    /// as a decision at `at` charges it, so the units count from `at`, the
    /// rate is never exceeded, and later requests queue behind. Otherwise
    /// nothing is taken and each limit is refused with `retry_after = at -
    /// now - max_wait` (when a request arriving then could wait its turn);
    /// units that can never fit (above `limit`, or `burst`) are refused as
    /// [`Limiter::acquire_units`] refuses them. `max_wait = 0` allows what
    /// `acquire_units` allows, except that it never lets a request count
    /// ahead of a reservation.
    ///
    /// A window counting refused units never makes a request wait; it is
    /// charged its units at `now`, whatever the others decide (it counts
    /// hits as they arrive, as envoyproxy/ratelimit does). `units = 0` looks, at
    /// `now`. Atomic: the shards involved are locked together.
    pub fn reserve_units(&self, limits: &[LimitUnits<'_>], now: u64, max_wait: u64) -> Reservation {
        self.reserve_units_within(limits, now, Some(max_wait))
    }

    /// [`Limiter::reserve_units`], waiting up to `max_wait` ticks, or, when
    /// `None` ([`MaxWait::TierDelay`](crate::MaxWait::TierDelay)), up to the
    /// delay of the tier its plan is on (`[limits.tier_defaults.NAME]
    /// delay`, as the locked shard finds the tier, so a tier assigned at the
    /// same moment is seen whole or not at all); the least of its plans'
    /// should it have several, 0 with none or an exempt plan.
    pub fn reserve_units_within(
        &self,
        limits: &[LimitUnits<'_>],
        now: u64,
        max_wait: Option<u64>,
    ) -> Reservation {
        let hashes: Vec<u64> = limits
            .iter()
            .map(|demand| self.hash(demand.limit.key(), demand.limit.policy().is_some()))
            .collect();
        let mut locked = self.lock_shards(&hashes);
        let parts = self.parts(limits, &hashes, &locked);
        let max_wait = max_wait.unwrap_or_else(|| {
            parts
                .iter()
                .filter(|part| {
                    part.name.is_none() && matches!(part.rule, Some((KeySpace::Plan, _)))
                })
                .map(|part| {
                    let shard = locked.shard(part.hash);
                    shard.policies.wait_for(shard.tier(part.hash, &part.key))
                })
                .min()
                .unwrap_or(0)
        });
        let mut at = Some(now);
        for part in &parts {
            if let (Some(target), true) = (part.target(), part.units > 0) {
                let earliest = locked
                    .shard(part.hash)
                    .earliest_at(&target, now, part.units);
                at = at.zip(earliest).map(|(at, earliest)| at.max(earliest));
            }
        }
        let wait = at.map(|at| at - now);
        let admitted = wait.is_some_and(|wait| wait <= max_wait);
        let counted_at = if admitted { at.unwrap_or(now) } else { now };
        let mut verdicts: Vec<Option<Verdict>> = Vec::with_capacity(parts.len());
        for part in &parts {
            let shard = locked.shard_mut(part.hash);
            let Some(target) = part.target() else {
                // An exempt key's plan.
                shard.apply(part.hash, &part.key, None, now, part.units);
                verdicts.push(None);
                continue;
            };
            let verdict = if part.units == 0 {
                shard.peek_at(&target, now).verdict
            } else if target.rule.rule.policy.counts_refused() {
                shard.reserve_to(&target, now, now, part.units)
            } else if admitted {
                shard.reserve_to(&target, now, counted_at, part.units)
            } else {
                let check = shard.peek_at(&target, now).verdict;
                let retry_after = match wait {
                    Some(wait) => wait - max_wait,
                    None => shard.preview_at(&target, now, part.units).retry_after,
                };
                shard.count_rejected(part.units);
                Verdict {
                    allowed: 0,
                    rejected: part.units,
                    remaining: check.remaining,
                    retry_after: retry_after.max(1),
                    reset_after: check.reset_after,
                }
            };
            verdicts.push(Some(verdict));
        }
        Reservation {
            decisions: self.assemble(limits, &parts, verdicts, &locked),
            wait: if admitted {
                self.resolution.duration(counted_at - now)
            } else {
                Duration::ZERO
            },
            counted_at,
        }
    }

    /// Gives back the units of a reservation (each limit's `units`, counted
    /// at `counted_at`, the [`Reservation::counted_at`] of their request)
    /// whose request will not be served: its caller left while it waited.
    /// Exact whatever was decided since (see the algorithms' `refund`): a
    /// later request may take the units given back, and no unit beyond
    /// them. Returns the units each limit got back, in order (a plan's
    /// further policies get theirs too, not counted here): 0 where its state
    /// has moved on (a window ended, the key reset or evicted), the key is
    /// exempt, or the limit's window counts refused units (it counted the
    /// request as a hit when it arrived, and keeps it).
    pub fn cancel_reservation(
        &self,
        limits: &[LimitUnits<'_>],
        now: u64,
        counted_at: u64,
    ) -> Vec<u64> {
        let hashes: Vec<u64> = limits
            .iter()
            .map(|demand| self.hash(demand.limit.key(), demand.limit.policy().is_some()))
            .collect();
        let mut locked = self.lock_shards(&hashes);
        let parts = self.parts(limits, &hashes, &locked);
        let mut given = vec![0; limits.len()];
        for part in &parts {
            let Some(target) = part.target() else {
                continue;
            };
            if target.rule.rule.policy.counts_refused() {
                // Counted as a hit when it arrived, whatever followed.
                continue;
            }
            let shard = locked.shard_mut(part.hash);
            let back = shard.refund_to(&target, now, counted_at, part.units);
            if part.name.is_none() {
                given[part.limit] = back;
            }
        }
        given
    }

    /// One decision per limit from its parts' verdicts (`None`: an exempt
    /// key's plan), a plan's further policies in its `further`.
    fn assemble(
        &self,
        limits: &[LimitUnits<'_>],
        parts: &[together::Part<'_>],
        verdicts: Vec<Option<Verdict>>,
        locked: &together::Locked<'_>,
    ) -> Vec<LimitDecision> {
        let mut decisions: Vec<LimitDecision> = Vec::with_capacity(limits.len());
        for (part, verdict) in parts.iter().zip(verdicts) {
            let decision = verdict.map_or(Decision::exempt(part.units), |verdict| {
                self.decision(verdict)
            });
            let shard = locked.shard(part.hash);
            together::push_decision(
                &mut decisions,
                part,
                decision,
                &limits[part.limit].limit,
                shard,
            );
        }
        decisions
    }
}
