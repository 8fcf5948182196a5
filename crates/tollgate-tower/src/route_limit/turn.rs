//! Waiting instead of refusing (a route's delay): the request's limits
//! reserved in the store ([`Store::reserve_units`], core's rule), in a task
//! of its own; a turn ahead waited for on one tokio timer, and given back
//! ([`Store::cancel_reservation`]) when the request is not served.
//!
//! [`Store::reserve_units`]: tollgate_core::Store::reserve_units
//! [`Store::cancel_reservation`]: tollgate_core::Store::cancel_reservation

use std::sync::Arc;
use std::time::Duration;

use super::decide::{Outcome, all_limits, outcome, store_failed};
use super::route::PendingLimit;
use super::waiting::Place;
use crate::metrics::{record_delayed, record_store_failure};

/// A turn booked ahead for a request: its limits (`None` once served) and
/// the reservation's `counted_at`. Dropped unserved (refused by another
/// limit, its client gone while it waits), it gives the turn back in a task
/// of its own; a give-back that fails is counted as a store failure of the
/// route (its units stay charged: one window stricter at most).
struct Turn {
    limits: Option<(PendingLimit, Vec<PendingLimit>)>,
    counted_at: u64,
    /// The request's place among its key's waiting requests: left once it
    /// is served, or once its turn is given back.
    place: Option<Place>,
}

impl Drop for Turn {
    fn drop(&mut self) {
        let Some((first, more)) = self.limits.take() else {
            return;
        };
        let Ok(runtime) = tokio::runtime::Handle::try_current() else {
            return;
        };
        let counted_at = self.counted_at;
        let place = self.place.take();
        runtime.spawn(async move {
            let store = Arc::clone(&first.route.shared.store);
            let limits = all_limits(&first, &more);
            if store.cancel_reservation(&limits, counted_at).await.is_err() {
                let route = &first.route;
                record_store_failure(&route.name, route.shared.failure.label());
            }
            drop(place);
        });
    }
}

/// Decides `first` and `more` waiting up to `max_wait` for their turn: the
/// store call in a task of its own (so a turn booked for a request gone
/// before the store answered is given back there), then, for a turn ahead
/// that every limit allows, a wait on a tokio timer before the request is
/// called. The request first takes a place among the waiting requests of
/// `first`'s key (at most its route's `max_waiting`); without one it may
/// not wait: decided at once, a turn ahead refuses it.
pub(crate) async fn reserve(
    first: PendingLimit,
    more: Vec<PendingLimit>,
    max_wait: Duration,
) -> Outcome {
    let route = Arc::clone(&first.route);
    let place = route
        .shared
        .waiting
        .enter(&first.key.text, route.max_waiting);
    let max_wait = if place.is_some() {
        max_wait
    } else {
        Duration::ZERO
    };
    let (sender, receiver) = tokio::sync::oneshot::channel();
    tokio::spawn(async move {
        let store = Arc::clone(&first.route.shared.store);
        let reservation = {
            let limits = all_limits(&first, &more);
            store.reserve_units(&limits, max_wait.into()).await
        };
        let answer = match reservation {
            Ok(reservation) => {
                let decided = outcome(&first, &more, Ok(&reservation.decisions));
                let turn = (!reservation.wait.is_zero()).then(|| {
                    let turn = Turn {
                        limits: Some((first, more)),
                        counted_at: reservation.counted_at,
                        place,
                    };
                    (reservation.wait, turn)
                });
                (decided, turn)
            }
            Err(error) => (outcome(&first, &more, Err(&error)), None),
        };
        // Unsent or never taken, a booked turn is dropped: given back.
        let _ = sender.send(answer);
    });
    let Ok((decided, turn)) = receiver.await else {
        return store_failed(&route);
    };
    if let (Outcome::Allowed(_), Some((wait, mut turn))) = (&decided, turn) {
        tokio::time::sleep(wait).await;
        // Served: its units stay charged.
        turn.limits = None;
        record_delayed(&route.name);
    }
    decided
}
