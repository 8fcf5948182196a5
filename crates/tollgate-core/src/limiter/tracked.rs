//! The keys of one shard that hold limiter state, findable by key and ordered by
//! last use, for idle eviction and the key cap in amortised O(1).
//!
//! Entries live inline in one hash table (a lookup touches the table and nothing
//! else). The order by last use is a log of `(time, key hash)` records appended
//! whenever a key's last use moves forward: appending is sequential, so a
//! request never touches another key's memory. A record is *live* while its key's
//! entry still has that `last_request`; the others are stale and skipped when
//! they reach the front. The log is kept in time order even when callers'
//! times arrive slightly out of order (a request older than the shard's latest
//! is recorded at the latest, which only ever delays an eviction), and it is
//! compacted when it holds more than twice the entries, so it is bounded and
//! every record is appended and dropped once: amortised O(1).

use std::collections::VecDeque;
use std::fmt;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use compact_str::CompactString;
use hashbrown::HashTable;
use hashbrown::hash_table::Entry as TableEntry;

use crate::algorithm::State;
use crate::policy::Algorithm;

/// One key's limiter state.
pub(crate) struct Tracked {
    /// The key, inline up to 24 bytes.
    key: CompactString,
    /// Which key space the key belongs to: plan keys and explicit-policy keys
    /// with the same text are different keys.
    pub(crate) space: KeySpace,
    /// The key's hash, to rehash without the hasher and to match log records.
    hash: u64,
    pub(crate) state: State,
    /// The `now` of the key's latest request, allowed or not, in ticks.
    last_request: u64,
    /// The version of the rule the state was built under.
    pub(crate) version: u64,
}

impl fmt::Debug for Tracked {
    /// Never the key itself: keys are secrets.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Tracked")
            .field("space", &self.space)
            .field("last_request", &self.last_request)
            .field("version", &self.version)
            .finish_non_exhaustive()
    }
}

/// The key spaces of a limiter.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub(crate) enum KeySpace {
    /// API keys limited by their plan (tier or default policy).
    Plan,
    /// Keys limited by a policy given with each request (route budgets).
    Policy,
}

/// A use of a key: its hash and the `last_request` it set.
#[derive(Clone, Copy, Debug)]
struct Use {
    at: u64,
    hash: u64,
}

/// The cap on tracked keys, shared by every shard of a limiter, and how many
/// keys hold state in all of them.
#[derive(Debug, Default)]
pub(crate) struct KeyCount {
    cap: AtomicUsize,
    tracked: AtomicUsize,
}

impl KeyCount {
    pub(crate) fn new(cap: usize) -> Arc<Self> {
        Arc::new(KeyCount {
            cap: AtomicUsize::new(cap),
            tracked: AtomicUsize::new(0),
        })
    }

    pub(crate) fn set_cap(&self, cap: usize) {
        self.cap.store(cap, Ordering::Relaxed);
    }

    fn is_full(&self) -> bool {
        self.tracked.load(Ordering::Relaxed) >= self.cap.load(Ordering::Relaxed)
    }

    fn is_over(&self) -> bool {
        self.tracked.load(Ordering::Relaxed) > self.cap.load(Ordering::Relaxed)
    }

    fn added(&self) {
        self.tracked.fetch_add(1, Ordering::Relaxed);
    }

    fn removed(&self, keys: usize) {
        self.tracked.fetch_sub(keys, Ordering::Relaxed);
    }
}

/// The tracked keys of a shard.
pub(crate) struct TrackedKeys {
    entries: HashTable<Tracked>,
    /// Uses in time order, oldest first; see the module documentation.
    uses: VecDeque<Use>,
    /// The latest time recorded: the log's order.
    latest: u64,
    /// The limiter's key cap and count.
    count: Arc<KeyCount>,
    /// Ticks without a request after which a key's state is dropped.
    idle_after: u64,
}

impl fmt::Debug for TrackedKeys {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("TrackedKeys")
            .field("keys", &self.entries.len())
            .field("log", &self.uses.len())
            .finish_non_exhaustive()
    }
}

impl TrackedKeys {
    pub(crate) fn new(count: Arc<KeyCount>, idle_after: u64) -> Self {
        TrackedKeys {
            entries: HashTable::new(),
            uses: VecDeque::new(),
            latest: 0,
            count,
            idle_after,
        }
    }

    /// Changes the idle eviction age.
    pub(crate) fn set_idle_after(&mut self, idle_after: u64) {
        self.idle_after = idle_after;
    }

    /// Drops this shard's least recently used key when the limiter is over its
    /// cap; whether it did.
    pub(crate) fn shed_one(&mut self) -> bool {
        self.count.is_over() && self.drop_least_recent()
    }

    /// Keys holding state.
    pub(crate) fn len(&self) -> usize {
        self.entries.len()
    }

    /// `key`'s entry, if it holds state at `now` under rule `version`.
    pub(crate) fn get(
        &self,
        space: KeySpace,
        hash: u64,
        key: &str,
        now: u64,
        version: u64,
    ) -> Option<&Tracked> {
        self.entries
            .find(hash, |entry| entry.is(space, hash, key))
            .filter(|entry| entry.version == version && !self.is_idle(entry, now))
    }

    /// `key`'s state for a request at `now` under rule `version` of
    /// `algorithm`: fresh when the key is new, idle or under another rule. The
    /// key is marked used at `now`; when the limiter's cap is reached, a new key
    /// first pushes out this shard's least recently used key.
    pub(crate) fn use_state(
        &mut self,
        space: KeySpace,
        hash: u64,
        key: &str,
        now: u64,
        version: u64,
        algorithm: Algorithm,
    ) -> &mut State {
        if self.count.is_full()
            && self
                .entries
                .find(hash, |entry| entry.is(space, hash, key))
                .is_none()
        {
            self.drop_least_recent();
        }
        let idle_after = self.idle_after;
        // Recorded no earlier than the latest record, so the log stays ordered.
        let at = now.max(self.latest);
        let entry =
            self.entries
                .entry(hash, |entry| entry.is(space, hash, key), |entry| entry.hash);
        let tracked = match entry {
            TableEntry::Occupied(entry) => {
                let tracked = entry.into_mut();
                if tracked.version != version
                    || now.saturating_sub(tracked.last_request) >= idle_after
                {
                    tracked.state = State::new(algorithm);
                    tracked.version = version;
                }
                if at <= tracked.last_request {
                    return &mut tracked.state;
                }
                tracked.last_request = at;
                tracked
            }
            TableEntry::Vacant(entry) => {
                self.count.added();
                entry
                    .insert(Tracked {
                        key: CompactString::from(key),
                        space,
                        hash,
                        state: State::new(algorithm),
                        last_request: at,
                        version,
                    })
                    .into_mut()
            }
        };
        self.latest = at;
        self.uses.push_back(Use { at, hash });
        &mut tracked.state
    }

    /// Drops `key`'s state; whether it held state at `now`.
    pub(crate) fn remove(&mut self, space: KeySpace, hash: u64, key: &str, now: u64) -> bool {
        match self
            .entries
            .find_entry(hash, |entry| entry.is(space, hash, key))
        {
            Ok(entry) => {
                let (removed, _) = entry.remove();
                self.count.removed(1);
                !self.is_idle(&removed, now)
            }
            Err(_) => false,
        }
    }

    /// Drops every key idle at `now`, oldest first; reads only the front of the
    /// log when nothing is idle.
    pub(crate) fn evict_idle(&mut self, now: u64) {
        let before = self.entries.len();
        while let Some(oldest) = self.uses.front().copied() {
            if now.saturating_sub(oldest.at) < self.idle_after {
                break;
            }
            self.uses.pop_front();
            self.remove_live(oldest);
        }
        if self.entries.len() < before {
            self.give_back_memory();
        }
        self.compact_if_large();
    }

    /// Drops the entries that `keep` refuses.
    pub(crate) fn retain(&mut self, mut keep: impl FnMut(&Tracked) -> bool) {
        let before = self.entries.len();
        self.entries.retain(|entry| keep(entry));
        self.count.removed(before - self.entries.len());
        self.give_back_memory();
        self.compact_if_large();
    }

    fn is_idle(&self, entry: &Tracked, now: u64) -> bool {
        now.saturating_sub(entry.last_request) >= self.idle_after
    }

    /// Drops the least recently used key of this shard; whether there was one.
    fn drop_least_recent(&mut self) -> bool {
        while let Some(oldest) = self.uses.pop_front() {
            if self.remove_live(oldest) {
                return true;
            }
        }
        false
    }

    /// Drops the entry `record` is the live record of; whether there was one.
    fn remove_live(&mut self, record: Use) -> bool {
        match self
            .entries
            .find_entry(record.hash, |entry| entry.is_recorded(record))
        {
            Ok(entry) => {
                entry.remove();
                self.count.removed(1);
                true
            }
            Err(_) => false,
        }
    }

    /// Drops stale records once they outnumber the live ones, keeping the
    /// order: one pass over the log, paid for by the appends that made it grow.
    fn compact_if_large(&mut self) {
        if self.uses.len() <= 2 * self.entries.len() + 64 {
            return;
        }
        let entries = &self.entries;
        self.uses.retain(|record| {
            entries
                .find(record.hash, |entry| entry.is_recorded(*record))
                .is_some()
        });
        if self.uses.capacity() > 4 * self.uses.len() + 64 {
            self.uses.shrink_to(2 * self.uses.len());
        }
    }

    /// Shrinks the table after a flood of keys has gone.
    fn give_back_memory(&mut self) {
        let length = self.entries.len();
        if self.entries.capacity() > 64 && length < self.entries.capacity() / 4 {
            self.entries.shrink_to(2 * length, |entry| entry.hash);
        }
    }
}

impl Tracked {
    fn is(&self, space: KeySpace, hash: u64, key: &str) -> bool {
        self.hash == hash && self.space == space && self.key == key
    }

    /// Whether `record` is this entry's live record.
    fn is_recorded(&self, record: Use) -> bool {
        self.hash == record.hash && self.last_request == record.at
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn keys(capacity: usize, idle_after: u64) -> TrackedKeys {
        TrackedKeys::new(KeyCount::new(capacity), idle_after)
    }

    fn use_key(tracked: &mut TrackedKeys, key: &str, now: u64) {
        let hash = foldhash::fast::FixedState::default().hash_one(key);
        tracked.use_state(KeySpace::Plan, hash, key, now, 0, Algorithm::FixedWindow);
    }

    fn holds(tracked: &TrackedKeys, key: &str, now: u64) -> bool {
        let hash = foldhash::fast::FixedState::default().hash_one(key);
        tracked.get(KeySpace::Plan, hash, key, now, 0).is_some()
    }

    use std::hash::BuildHasher;

    #[test]
    fn the_least_recently_used_key_goes_first_when_full() {
        let mut tracked = keys(2, 1000);
        use_key(&mut tracked, "a", 1);
        use_key(&mut tracked, "b", 2);
        use_key(&mut tracked, "a", 3);
        use_key(&mut tracked, "c", 4);
        assert!(holds(&tracked, "a", 4));
        assert!(!holds(&tracked, "b", 4));
        assert!(holds(&tracked, "c", 4));
        assert_eq!(tracked.len(), 2);
    }

    #[test]
    fn the_log_stays_bounded_and_eviction_stays_exact() {
        let mut tracked = keys(100, 50);
        for now in 1..10_000 {
            use_key(&mut tracked, "hot", now);
            if now % 7 == 0 {
                use_key(&mut tracked, &format!("cold-{now}"), now);
            }
            tracked.evict_idle(now);
            assert!(tracked.uses.len() <= 2 * tracked.len() + 64 + 2);
        }
        // At 9999, the cold keys of the last 50 s (9951..=9999 in steps of 7) remain.
        let cold = (9950..10_000).filter(|now| now % 7 == 0).count();
        assert_eq!(tracked.len(), 1 + cold);
        tracked.evict_idle(9999 + 50);
        assert_eq!(tracked.len(), 0);
        assert_eq!(tracked.count.tracked.load(Ordering::Relaxed), 0);
    }

    #[test]
    fn out_of_order_times_never_evict_early_and_keep_the_log_ordered() {
        let mut tracked = keys(1000, 3600);
        use_key(&mut tracked, "a", 1000);
        for i in 0..200 {
            // Arrive late: recorded at 1000, the latest time seen.
            use_key(&mut tracked, &format!("late-{i}"), 0);
        }
        // At 3600 nobody is idle yet: all were recorded at 1000.
        tracked.evict_idle(3600);
        assert_eq!(tracked.len(), 201);
        // At 4600 all are idle, and all go: the log was in order.
        tracked.evict_idle(4600);
        assert_eq!(tracked.len(), 0);
    }
}
