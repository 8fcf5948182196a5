//! Waiting instead of refusing (a route's `delay`, issue #26): the requests
//! each key has waiting ([`WaitingRoom`], at most the route's `max_waiting`)
//! and a waiting request's reservation, given back when its client leaves
//! before its turn ([`Waiting`]). Who waits, and how long, is core's rule
//! (`Limiter::reserve_units`, on Redis its Lua twin); here a request only
//! sleeps on one tokio timer.

use std::collections::HashMap;
use std::fmt;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tollgate_core::{Limit, LimitUnits, MaxWait, PreparedPolicy, Redacted, Store};

/// A route's waiting: how long a request may wait for its turn, and how
/// many of one key's requests may wait at once.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Delay {
    /// The longest wait (`delay`): nginx's `limit_req ... delay`.
    pub(crate) max_wait: Duration,
    /// The most requests of one key waiting at once (`max_waiting`).
    pub(crate) max_waiting: u64,
}

/// The requests waiting for their turn, per route and key: the gateway's
/// one room, kept across reloads (a reload's new route finds the places
/// its old one gave).
#[derive(Default)]
pub(crate) struct WaitingRoom {
    places: Mutex<HashMap<(Arc<str>, String), u64>>,
    total: AtomicU64,
    /// The turns booked and not yet served nor given back ([`OpenTurn`]).
    turns: AtomicU64,
}

impl fmt::Debug for WaitingRoom {
    /// The count only: never a key.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("WaitingRoom")
            .field("waiting", &self.waiting())
            .finish_non_exhaustive()
    }
}

impl WaitingRoom {
    /// A place for one more request of `key` on `route`, unless `most` of
    /// them wait already (`None`: the request is decided without waiting).
    pub(crate) fn enter(self: &Arc<Self>, route: &Arc<str>, key: &str, most: u64) -> Option<Place> {
        let mut places = self
            .places
            .lock()
            .unwrap_or_else(|poison| poison.into_inner());
        let name = (Arc::clone(route), key.to_owned());
        let count = places.entry(name.clone()).or_insert(0);
        if *count >= most {
            return None;
        }
        *count += 1;
        self.total.fetch_add(1, Ordering::Relaxed);
        Some(Place {
            room: Arc::clone(self),
            name,
        })
    }

    /// The requests holding a place now, over every route and key.
    pub(crate) fn waiting(&self) -> u64 {
        self.total.load(Ordering::Relaxed)
    }

    /// The turns booked in the store and not yet served nor given back,
    /// over every route and key: 0 once every request with a turn has been
    /// served or has given its units back.
    pub(crate) fn turns_open(&self) -> u64 {
        self.turns.load(Ordering::Relaxed)
    }

    fn leave(&self, name: &(Arc<str>, String)) {
        let mut places = self
            .places
            .lock()
            .unwrap_or_else(|poison| poison.into_inner());
        if let Some(count) = places.get_mut(name) {
            *count = count.saturating_sub(1);
            if *count == 0 {
                places.remove(name);
            }
        }
        self.total.fetch_sub(1, Ordering::Relaxed);
    }
}

/// One request's place in the [`WaitingRoom`], left when dropped.
pub(crate) struct Place {
    room: Arc<WaitingRoom>,
    name: (Arc<str>, String),
}

impl fmt::Debug for Place {
    /// The route, and the key redacted.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Place")
            .field("route", &self.name.0)
            .field("key", &format_args!("{}", Redacted(&self.name.1)))
            .finish()
    }
}

impl Drop for Place {
    fn drop(&mut self) {
        self.room.leave(&self.name);
    }
}

/// One booked turn counted in its [`WaitingRoom`] until dropped: when its
/// request is served, or once its units are given back.
struct OpenTurn(Arc<WaitingRoom>);

impl OpenTurn {
    fn new(room: &Arc<WaitingRoom>) -> Self {
        room.turns.fetch_add(1, Ordering::Relaxed);
        OpenTurn(Arc::clone(room))
    }
}

impl Drop for OpenTurn {
    fn drop(&mut self) {
        self.0.turns.fetch_sub(1, Ordering::Relaxed);
    }
}

/// The limits a reservation charged, owned, so that they can be given back
/// after the request has gone: its plan's key, its route budget's key and
/// policy, and the units charged to each.
#[derive(Clone)]
pub(crate) struct Reserved {
    pub(crate) plan: Option<String>,
    pub(crate) route: Option<(String, PreparedPolicy)>,
    pub(crate) units: u64,
    /// The reservation's `counted_at`, in the store's ticks.
    pub(crate) counted_at: u64,
}

impl fmt::Debug for Reserved {
    /// The keys redacted.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let plan = self.plan.as_deref().map(Redacted);
        let route = self.route.as_ref().map(|(key, _)| Redacted(key));
        f.debug_struct("Reserved")
            .field("plan", &plan.map(|key| key.to_string()))
            .field("route", &route.map(|key| key.to_string()))
            .field("units", &self.units)
            .field("counted_at", &self.counted_at)
            .finish()
    }
}

impl Reserved {
    /// The limits as the store takes them.
    pub(crate) fn limits(&self) -> Vec<LimitUnits<'_>> {
        let plan = self.plan.as_deref().map(Limit::Plan);
        let route = self
            .route
            .as_ref()
            .map(|(key, policy)| Limit::Policy { key, policy });
        plan.into_iter()
            .chain(route)
            .map(|limit| LimitUnits {
                limit,
                units: self.units,
            })
            .collect()
    }
}

/// Gives `reserved`'s units back ([`Store::cancel_reservation`]): a turn
/// booked for a request that will not be served. A failure is logged.
pub(crate) async fn give_back(store: &dyn Store, reserved: &Reserved) {
    let limits = reserved.limits();
    if let Err(error) = store.cancel_reservation(&limits, reserved.counted_at).await {
        tracing::warn!(%error, "a booked turn could not be given back");
    }
}

/// A request whose turn is booked ahead. Dropped before
/// [`Waiting::until_turn`] ends (its client left, the gateway stopped, or it
/// is not served: refused by a limit that does not wait, let through by
/// shadow mode), it gives its turn back ([`give_back`]) in a task of its
/// own, and leaves its place in the [`WaitingRoom`] once that is done.
pub(crate) struct Waiting {
    store: Arc<dyn Store>,
    /// The turn and its count in the room, until served or given back.
    reserved: Option<(Reserved, OpenTurn)>,
    /// Left once the request is served, or once its units are given back.
    place: Option<Place>,
}

impl Waiting {
    /// `reserved` on `store`, counted in `room`, holding `place`.
    fn new(
        store: Arc<dyn Store>,
        reserved: Reserved,
        room: &Arc<WaitingRoom>,
        place: Option<Place>,
    ) -> Self {
        Waiting {
            store,
            reserved: Some((reserved, OpenTurn::new(room))),
            place,
        }
    }

    /// Sleeps `wait` (one timer), then the request is served: its units
    /// stay charged.
    pub(crate) async fn until_turn(mut self, wait: Duration) {
        if !wait.is_zero() {
            tokio::time::sleep(wait).await;
        }
        self.reserved = None;
    }
}

impl Drop for Waiting {
    fn drop(&mut self) {
        let Some((reserved, open)) = self.reserved.take() else {
            return;
        };
        let Ok(runtime) = tokio::runtime::Handle::try_current() else {
            return;
        };
        let store = Arc::clone(&self.store);
        let place = self.place.take();
        runtime.spawn(async move {
            give_back(store.as_ref(), &reserved).await;
            drop(open);
            drop(place);
        });
    }
}

/// What [`reserve`] booked: each limit's decision, and when the request's
/// turn is ahead (or, asked for, when it is served at once), its wait and
/// the [`Waiting`] that gives the units back unless the request is served.
pub(crate) struct Booked {
    pub(crate) decisions: Vec<tollgate_core::LimitDecision>,
    pub(crate) turn: Option<(Duration, Waiting)>,
}

/// `reserved`'s limits (its `counted_at` not yet known) decided on `store`,
/// the request waiting up to `max_wait` for its turn
/// ([`Store::reserve_units`]), holding `place` while it waits, its turn
/// counted in `room` ([`WaitingRoom::turns_open`]). The store
/// call runs in a task of its own, which holds the place and builds the
/// [`Waiting`] of a turn booked ahead: a request gone before the store
/// answered (its client left, the gateway stopped), or before it took the
/// answer, drops that [`Waiting`], which gives the turn back, then leaves
/// the place. With `held_at_once`, a request served at once gets its
/// [`Waiting`] too (a wait of zero): one whose admission may still fail
/// after its rates (its tier's concurrency limit) gives its units back
/// exactly, at the time they were counted.
///
/// # Errors
///
/// The store's, and [`StoreError::Unavailable`](tollgate_core::StoreError)
/// when the task ended without an answer.
pub(crate) async fn reserve(
    (store, room): (&Arc<dyn Store>, &Arc<WaitingRoom>),
    reserved: Reserved,
    (max_wait, held_at_once): (MaxWait, bool),
    place: Option<Place>,
) -> Result<Booked, tollgate_core::StoreError> {
    let (sender, receiver) = tokio::sync::oneshot::channel();
    let store = Arc::clone(store);
    let room = Arc::clone(room);
    tokio::spawn(async move {
        let reservation = {
            let limits = reserved.limits();
            store.reserve_units(&limits, max_wait).await
        };
        let booked = reservation.map(|reservation| {
            let held = !reservation.wait.is_zero() || held_at_once && reservation.is_admitted();
            let turn = held.then(|| {
                let reserved = Reserved {
                    counted_at: reservation.counted_at,
                    ..reserved
                };
                (
                    reservation.wait,
                    Waiting::new(store, reserved, &room, place),
                )
            });
            Booked {
                decisions: reservation.decisions,
                turn,
            }
        });
        // Unsent (nobody waits for it), or never taken: dropped, its
        // Waiting gives the turn back.
        let _ = sender.send(booked);
    });
    receiver.await.map_err(|_| {
        tollgate_core::StoreError::Unavailable("the reservation ended unanswered".into())
    })?
}
