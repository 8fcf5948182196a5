//! Concurrency limits: how many requests of one key may be in flight at
//! once (nginx's `limit_conn`, Stripe's concurrent-requests limiter). A
//! request holds a *slot* from its admission until its response ends; a key
//! never holds more than its `max_in_flight` slots. [`SlotStore`] is where
//! slots are kept: [`MemorySlots`] in one process, a Redis store's leases
//! (`tollgate-redis`'s `RedisSlots`) when several gateways share them.
//!
//! The rule every store keeps, written once here and mirrored by the Redis
//! script:
//!
//! - a slot is granted when the key holds fewer live slots than `max`;
//! - a slot is held until released; on Redis a slot is a lease that ends
//!   `lease_ttl` after it was granted or last renewed, so a gateway that dies
//!   loses its slots within that time (a live one renews its leases long
//!   before);
//! - a refused request holds nothing.
//!
//! ```
//! use tollgate_core::{MemorySlots, SlotStore};
//!
//! # futures_lite(async {
//! let slots = MemorySlots::new();
//! let first = slots.acquire("orders/principal:sk_a", 1).await.unwrap();
//! assert!(first.is_some());
//! assert!(slots.acquire("orders/principal:sk_a", 1).await.unwrap().is_none());
//! slots.release(first.unwrap());
//! assert!(slots.acquire("orders/principal:sk_a", 1).await.unwrap().is_some());
//! # });
//! # fn futures_lite(future: impl std::future::Future<Output = ()>) {
//! #     let mut future = std::pin::pin!(future);
//! #     let waker = std::task::Waker::noop();
//! #     assert!(future.as_mut().poll(&mut std::task::Context::from_waker(waker)).is_ready());
//! # }
//! ```

#[cfg(loom)]
use loom::sync::atomic::{AtomicU64, Ordering};
#[cfg(not(loom))]
use parking_lot::Mutex;
#[cfg(not(loom))]
use std::sync::atomic::{AtomicU64, Ordering};

#[cfg(loom)]
use loom_lock::Mutex;

use crate::caller::Keyless;
use crate::route_budget::RouteKeyKind;
use crate::store::StoreFuture;

/// What a request's slots are counted per, on a route counting per `kind`:
/// `kind` for a request with a key; for a keyless one (`keyless`, and why),
/// the client IP unless the route counts per header (a keyless request has
/// no key nor tenant), and the client IP always for an anonymous one
/// ([`Keyless::Unknown`]: a header it sends must not pick its slots), as
/// its budget is chosen
/// ([`RouteBudgets::choose_keyless`](crate::RouteBudgets::choose_keyless)).
pub fn in_flight_kind(kind: RouteKeyKind, keyless: Option<Keyless>) -> RouteKeyKind {
    match keyless {
        None => kind,
        Some(Keyless::Unknown) => RouteKeyKind::Ip,
        Some(_) if kind.serves_keyless() => kind,
        Some(_) => RouteKeyKind::Ip,
    }
}

pub use crate::tier_defaults::MAX_IN_FLIGHT;

/// One slot held: the key it counts against, and the lease's id (unique in
/// its store). Its `Debug` shows the key redacted.
#[derive(PartialEq, Eq)]
pub struct SlotLease {
    /// The key (a route's in-flight key, as `route_store_key` writes it).
    pub key: String,
    /// The lease's id in its store.
    pub id: u64,
}

impl std::fmt::Debug for SlotLease {
    fn fmt(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        formatter
            .debug_struct("SlotLease")
            .field("key", &crate::key::Redacted(&self.key).to_string())
            .field("id", &self.id)
            .finish()
    }
}

/// Where slots are kept. Object-safe, as [`Store`](crate::Store) is.
pub trait SlotStore: Send + Sync {
    /// A slot for `key` if it holds fewer than `max` (1 to
    /// [`MAX_IN_FLIGHT`]); `None` when it holds `max` already (the request
    /// is refused and holds nothing).
    ///
    /// # Errors
    ///
    /// [`StoreError::Unavailable`](crate::StoreError::Unavailable) when the
    /// store cannot answer; the caller applies its failure policy.
    fn acquire<'a>(&'a self, key: &'a str, max: u64) -> StoreFuture<'a, Option<SlotLease>>;

    /// Gives `lease` back, at once or in the background; never fails (a
    /// Redis lease that could not be removed ends with its TTL).
    fn release(&self, lease: SlotLease);

    /// The slots this process holds now, over every key, a release still
    /// under way counted as held: 0 once every request has ended and its
    /// slot is free in the store (the tests' check that no path leaks one).
    fn held(&self) -> u64;
}

/// Slots in this process: a count per key, kept only while it is above 0,
/// in 16 shards each under its own lock. Its `Debug` shows the slots held,
/// never a key.
pub struct MemorySlots {
    shards: [Mutex<hashbrown::HashMap<String, u64>>; 16],
    held: AtomicU64,
    next_id: AtomicU64,
}

impl std::fmt::Debug for MemorySlots {
    fn fmt(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        formatter
            .debug_struct("MemorySlots")
            .field("held", &self.held())
            .finish_non_exhaustive()
    }
}

impl Default for MemorySlots {
    fn default() -> Self {
        MemorySlots::new()
    }
}

impl MemorySlots {
    /// No slot held.
    pub fn new() -> Self {
        MemorySlots {
            shards: std::array::from_fn(|_| Mutex::new(hashbrown::HashMap::new())),
            held: AtomicU64::new(0),
            next_id: AtomicU64::new(1),
        }
    }

    fn shard(&self, key: &str) -> &Mutex<hashbrown::HashMap<String, u64>> {
        use std::hash::BuildHasher;
        let hash = foldhash::fast::FixedState::with_seed(0).hash_one(key);
        &self.shards[(hash % 16) as usize]
    }

    /// A slot for `key` under `max`, at once.
    pub fn try_acquire(&self, key: &str, max: u64) -> Option<SlotLease> {
        let mut shard = self.shard(key).lock();
        let count = shard.get(key).copied().unwrap_or(0);
        if count >= max {
            return None;
        }
        shard.insert(key.to_owned(), count + 1);
        drop(shard);
        self.held.fetch_add(1, Ordering::Relaxed);
        Some(SlotLease {
            key: key.to_owned(),
            id: self.next_id.fetch_add(1, Ordering::Relaxed),
        })
    }

    /// The slots `key` holds now.
    pub fn in_flight(&self, key: &str) -> u64 {
        self.shard(key).lock().get(key).copied().unwrap_or(0)
    }
}

impl SlotStore for MemorySlots {
    fn acquire<'a>(&'a self, key: &'a str, max: u64) -> StoreFuture<'a, Option<SlotLease>> {
        let lease = self.try_acquire(key, max);
        Box::pin(std::future::ready(Ok(lease)))
    }

    fn release(&self, lease: SlotLease) {
        let mut shard = self.shard(&lease.key).lock();
        let Some(count) = shard.get_mut(&lease.key) else {
            return;
        };
        *count -= 1;
        if *count == 0 {
            shard.remove(&lease.key);
        }
        drop(shard);
        self.held.fetch_sub(1, Ordering::Relaxed);
    }

    fn held(&self) -> u64 {
        self.held.load(Ordering::Relaxed)
    }
}

/// Under `--cfg loom` (the loom models of `tests/loom_slots.rs`), the
/// shards' lock is loom's, with parking_lot's `lock` (no poisoning).
#[cfg(loom)]
mod loom_lock {
    /// loom's mutex, locked as parking_lot's is.
    pub(super) struct Mutex<T>(loom::sync::Mutex<T>);

    impl<T> Mutex<T> {
        pub(super) fn new(value: T) -> Self {
            Mutex(loom::sync::Mutex::new(value))
        }

        pub(super) fn lock(&self) -> loom::sync::MutexGuard<'_, T> {
            self.0.lock().unwrap_or_else(|poison| poison.into_inner())
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_key_holds_at_most_max_and_a_release_frees_one() {
        let slots = MemorySlots::new();
        let first = slots.try_acquire("k", 2).unwrap();
        let second = slots.try_acquire("k", 2).unwrap();
        assert_ne!(first.id, second.id);
        assert!(slots.try_acquire("k", 2).is_none());
        assert_eq!(slots.in_flight("k"), 2);
        // Another key has slots of its own.
        let other = slots.try_acquire("j", 1).unwrap();
        assert_eq!(slots.held(), 3);
        slots.release(first);
        assert_eq!(slots.in_flight("k"), 1);
        assert!(slots.try_acquire("k", 2).is_some());
        slots.release(other);
        assert_eq!(slots.in_flight("j"), 0);
        assert_eq!(slots.held(), 2);
    }

    #[test]
    fn keyless_requests_count_per_ip_unless_per_header() {
        use Keyless::{NoKey, NotRead, Unknown};
        use RouteKeyKind::{Custom, Ip, Principal, Tenant};
        for kind in RouteKeyKind::ALL {
            assert_eq!(in_flight_kind(kind, None), kind);
            assert_eq!(in_flight_kind(kind, Some(Unknown)), Ip);
        }
        for reason in [NoKey, NotRead] {
            assert_eq!(in_flight_kind(Principal, Some(reason)), Ip);
            assert_eq!(in_flight_kind(Tenant, Some(reason)), Ip);
            assert_eq!(in_flight_kind(Custom, Some(reason)), Custom);
            assert_eq!(in_flight_kind(Ip, Some(reason)), Ip);
        }
    }

    #[test]
    fn a_key_with_no_slot_left_holds_no_memory() {
        let slots = MemorySlots::new();
        let lease = slots.try_acquire("k", 1).unwrap();
        slots.release(lease);
        assert!(slots.shards.iter().all(|shard| shard.lock().is_empty()));
        // A lease released twice (never given twice by callers) does no harm.
        slots.release(SlotLease {
            key: "k".into(),
            id: 9,
        });
        assert_eq!(slots.held(), 0);
    }

    #[test]
    fn debug_never_shows_a_key() {
        let slots = MemorySlots::new();
        let lease = slots
            .try_acquire("orders/principal:sk_live_secret_key", 1)
            .unwrap();
        for shown in [format!("{slots:?}"), format!("{lease:?}")] {
            assert!(!shown.contains("secret_key"), "{shown}");
        }
        slots.release(lease);
    }
}
