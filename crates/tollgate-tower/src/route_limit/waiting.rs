//! The requests of one key waiting for their turn at once (a route's
//! [`max_waiting`](super::RouteLimitLayer::max_waiting), as a gateway
//! route's): a count per store key, in one room per host. A request takes
//! its place before its turn is booked, so a burst past the bound books
//! nothing, and leaves it once served, or once its turn is given back.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};

/// The most requests of one key waiting at once by default: 100, as a
/// gateway route's `max_waiting`.
pub const DEFAULT_MAX_WAITING: u64 = 100;

/// The places taken, per store key (`{route}/{kind}:{value}`), and over
/// all of them.
#[derive(Default)]
pub(crate) struct WaitingRoom {
    places: Mutex<HashMap<String, u64>>,
    total: AtomicU64,
}

impl std::fmt::Debug for WaitingRoom {
    /// The count only: never a key.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("WaitingRoom")
            .field("waiting", &self.waiting())
            .finish_non_exhaustive()
    }
}

impl WaitingRoom {
    fn places(&self) -> MutexGuard<'_, HashMap<String, u64>> {
        self.places
            .lock()
            .unwrap_or_else(|poison| poison.into_inner())
    }

    /// A place for one more request of `key`, unless `most` of them wait
    /// already (`None`: it is decided without waiting).
    pub(crate) fn enter(self: &Arc<Self>, key: &str, most: u64) -> Option<Place> {
        let mut places = self.places();
        let count = places.entry(key.to_owned()).or_insert(0);
        if *count >= most {
            if *count == 0 {
                places.remove(key);
            }
            return None;
        }
        *count += 1;
        self.total.fetch_add(1, Ordering::Relaxed);
        Some(Place {
            room: Arc::clone(self),
            key: key.to_owned(),
        })
    }

    /// The places taken now, over every key.
    pub(crate) fn waiting(&self) -> u64 {
        self.total.load(Ordering::Relaxed)
    }
}

/// One request's place, left when dropped.
pub(crate) struct Place {
    room: Arc<WaitingRoom>,
    key: String,
}

impl std::fmt::Debug for Place {
    /// Never the key.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Place").finish_non_exhaustive()
    }
}

impl Drop for Place {
    fn drop(&mut self) {
        let mut places = self.room.places();
        if let Some(count) = places.get_mut(&self.key) {
            *count = count.saturating_sub(1);
            if *count == 0 {
                places.remove(&self.key);
            }
        }
        drop(places);
        self.room.total.fetch_sub(1, Ordering::Relaxed);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_key_has_at_most_its_places_and_a_place_left_is_free_again() {
        let room = Arc::new(WaitingRoom::default());
        let first = room.enter("r/api_key:a", 2).unwrap();
        let second = room.enter("r/api_key:a", 2).unwrap();
        assert!(room.enter("r/api_key:a", 2).is_none());
        // Another key has its own.
        let other = room.enter("r/api_key:b", 2).unwrap();
        assert_eq!(room.waiting(), 3);
        drop(first);
        let third = room.enter("r/api_key:a", 2).unwrap();
        drop((second, third, other));
        assert_eq!(room.waiting(), 0);
        assert!(room.places().is_empty());
    }
}
