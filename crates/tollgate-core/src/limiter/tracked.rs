//! The keys of one shard that hold limiter state, findable by key and ordered by
//! last use, for idle eviction and the key cap in amortised O(1).
//!
//! Entries live inline in one hash table (a lookup touches the table and nothing
//! else). The order by last use is a log of `(time, key hash)` records appended
//! when a key's last use moves past its record: appending is sequential, so a
//! request never touches another key's memory. A record's time is the last tick
//! of the *grain* (a span of ticks, see [`KeyCount::new`]) of the use it
//! records, so a key used again within that grain appends nothing: a hot key
//! appends once per grain, not once per request. A record is *live* while its
//! key's `last_request` is still in the record's grain (a later use in a later
//! grain appends a new record); the others are stale and skipped when they
//! reach the front. The log is kept in time order even when callers'
//! times arrive slightly out of order (a request older than the shard's latest
//! is recorded at the latest, which only ever delays an eviction), and it is
//! compacted when it holds more than twice the entries, so it is bounded and
//! every record is appended and dropped once: amortised O(1).
//!
//! Decisions stay exact: whether a key is idle is always read from its own
//! `last_request`, never from its record. The record only decides when an idle
//! key's memory goes: at most one grain after it became idle (its record is at
//! most one grain past its last use), or exactly then in
//! [`TrackedKeys::evict_every_idle`], which `stats` uses so that the count of
//! tracked keys is exact. Within one grain, the key cap's order by last use is
//! the order of the grains' first uses.

use std::collections::VecDeque;
use std::fmt;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use compact_str::CompactString;
use hashbrown::HashTable;

use crate::algorithm::State;
use crate::policy::Algorithm;
use crate::resolution::Resolution;

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
    /// The `now` of the key's latest request, allowed or not, in ticks. Its
    /// live record in the log is at the last tick of its grain.
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
    /// The further policies of plans written as lists: the key's text is
    /// the policy's name, a NUL and the API key (a name never holds a NUL,
    /// so the pair is read back unambiguously), and its hash picks the shard
    /// of the API key's own state.
    Further,
}

/// A use of a key: its hash and the last tick of its grain.
#[derive(Clone, Copy, Debug)]
struct Use {
    at: u64,
    hash: u64,
}

/// The cap on tracked keys, shared by every shard of a limiter, how many keys
/// hold state in all of them, and the grain of the shards' use logs.
#[derive(Debug, Default)]
pub(crate) struct KeyCount {
    cap: AtomicUsize,
    tracked: AtomicUsize,
    /// One less than the grain, a power of two: a use at `t` is recorded at
    /// `t | grain_mask`.
    grain_mask: u64,
}

impl KeyCount {
    /// A cap of `cap` keys for a limiter counting ticks of `resolution`,
    /// whose use logs record uses to the grain: the largest power of two of
    /// ticks not over a second (2^29 ns, about 0.54 s, for nanoseconds; 2^19
    /// µs for microseconds; one tick, exact, for seconds). Idle eviction is
    /// counted in whole seconds, so a key's memory outlives its idleness by
    /// at most about half a second.
    pub(crate) fn new(cap: usize, resolution: Resolution) -> Arc<Self> {
        let grain = 1u64 << resolution.ticks_per_second().max(1).ilog2();
        Arc::new(KeyCount {
            cap: AtomicUsize::new(cap),
            tracked: AtomicUsize::new(0),
            grain_mask: grain - 1,
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
    /// The latest request time seen: a request older than this is taken as
    /// made at this time, so the log's records stay in order.
    latest: u64,
    /// The limiter's key cap and count.
    count: Arc<KeyCount>,
    /// Ticks without a request after which a key's state is dropped.
    idle_after: u64,
    /// The limiter's grain, less one (see [`KeyCount::new`]), kept here so
    /// the decision path reads nothing shared for it.
    grain_mask: u64,
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
            grain_mask: count.grain_mask,
            count,
            idle_after,
        }
    }

    /// Changes the idle eviction age.
    pub(crate) fn set_idle_after(&mut self, idle_after: u64) {
        self.idle_after = idle_after;
    }

    /// Raises the idle eviction age to at least `idle_after`.
    pub(crate) fn raise_idle_after(&mut self, idle_after: u64) {
        self.idle_after = self.idle_after.max(idle_after);
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

    /// `key`'s state, to change in place, if it holds state at `now` under
    /// rule `version`; the key is not marked used (a refund is not a request).
    pub(crate) fn state_mut(
        &mut self,
        space: KeySpace,
        hash: u64,
        key: &str,
        now: u64,
        version: u64,
    ) -> Option<&mut State> {
        let idle_after = self.idle_after;
        self.entries
            .find_mut(hash, |entry| entry.is(space, hash, key))
            .filter(|entry| {
                entry.version == version && now.saturating_sub(entry.last_request) < idle_after
            })
            .map(|entry| &mut entry.state)
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
        // No earlier than the latest request, so the log stays ordered.
        let at = now.max(self.latest);
        // Found without `entry`, which would first make room for a key it
        // might insert: a known key (nearly every request) only looks.
        let found = self
            .entries
            .find_entry(hash, |entry| entry.is(space, hash, key));
        let tracked = match found {
            Ok(entry) => {
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
                let recorded = tracked.last_request | self.grain_mask;
                tracked.last_request = at;
                self.latest = at;
                if at <= recorded {
                    // Within the grain of its record: nothing to append.
                    return &mut tracked.state;
                }
                tracked
            }
            Err(absent) => {
                self.count.added();
                self.latest = at;
                absent
                    .into_table()
                    .insert_unique(
                        hash,
                        Tracked {
                            key: CompactString::from(key),
                            space,
                            hash,
                            state: State::new(algorithm),
                            last_request: at,
                            version,
                        },
                        |entry| entry.hash,
                    )
                    .into_mut()
            }
        };
        // The grain's last tick: `at` is no earlier than any use recorded
        // before, so neither is its grain's last tick.
        self.uses.push_back(Use {
            at: at | self.grain_mask,
            hash,
        });
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

    /// Drops every key idle at `now`, exactly: [`TrackedKeys::evict_idle`],
    /// then the keys that became idle within the grain before `now` (whose
    /// records are not yet old enough to go), found among the records of
    /// that last grain.
    pub(crate) fn evict_every_idle(&mut self, now: u64) {
        self.evict_idle(now);
        let grain = self.grain_mask.saturating_add(1);
        let recent = self.idle_after.saturating_sub(grain);
        let before = self.entries.len();
        let grain_mask = self.grain_mask;
        for record in &self.uses {
            if now.saturating_sub(record.at) < recent {
                break;
            }
            if let Ok(entry) = self
                .entries
                .find_entry(record.hash, |entry| entry.is_recorded(*record, grain_mask))
                && now.saturating_sub(entry.get().last_request) >= self.idle_after
            {
                entry.remove();
            }
        }
        let removed = before - self.entries.len();
        if removed > 0 {
            self.count.removed(removed);
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
        match self.entries.find_entry(record.hash, |entry| {
            entry.is_recorded(record, self.grain_mask)
        }) {
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
        let grain_mask = self.grain_mask;
        self.uses.retain(|record| {
            entries
                .find(record.hash, |entry| entry.is_recorded(*record, grain_mask))
                .is_some()
        });
        if self.uses.capacity() > 4 * self.uses.len() + 64 {
            self.uses.shrink_to(2 * self.uses.len());
        }
    }

    /// Shrinks the table and the log after a flood of keys has gone: each to
    /// twice what it holds once it holds less than a quarter of its
    /// capacity (so a table that grows and shrinks around one size is not
    /// reallocated back and forth).
    fn give_back_memory(&mut self) {
        let length = self.entries.len();
        if self.entries.capacity() > 64 && length < self.entries.capacity() / 4 {
            self.entries.shrink_to(2 * length, |entry| entry.hash);
        }
        if self.uses.capacity() > 64 && self.uses.len() < self.uses.capacity() / 4 {
            self.uses.shrink_to(2 * self.uses.len());
        }
    }
}

impl Tracked {
    /// The key.
    pub(crate) fn key(&self) -> &str {
        &self.key
    }

    /// The key's hash.
    pub(crate) fn hash(&self) -> u64 {
        self.hash
    }

    fn is(&self, space: KeySpace, hash: u64, key: &str) -> bool {
        self.hash == hash && self.space == space && self.key == key
    }

    /// Whether `record` is this entry's live record.
    fn is_recorded(&self, record: Use, grain_mask: u64) -> bool {
        self.hash == record.hash && self.last_request | grain_mask == record.at
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn keys(capacity: usize, idle_after: u64) -> TrackedKeys {
        TrackedKeys::new(KeyCount::new(capacity, Resolution::Seconds), idle_after)
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

    /// 2^29 ns: the grain of a nanosecond limiter, written out.
    const GRAIN_NS: u64 = 536_870_912;

    fn nanosecond_keys(idle_after: u64) -> TrackedKeys {
        TrackedKeys::new(KeyCount::new(100, Resolution::Nanoseconds), idle_after)
    }

    #[test]
    fn the_grain_is_the_largest_power_of_two_of_ticks_not_over_a_second() {
        let grain = |resolution| KeyCount::new(1, resolution).grain_mask + 1;
        assert_eq!(grain(Resolution::Seconds), 1);
        assert_eq!(grain(Resolution::Microseconds), 524_288);
        assert_eq!(grain(Resolution::Nanoseconds), GRAIN_NS);
    }

    #[test]
    fn a_hot_key_appends_once_per_grain() {
        let mut tracked = nanosecond_keys(60_000_000_000);
        // 10,000 uses 1 µs apart, all within the first grain [0, 2^29).
        for now in 0..10_000 {
            use_key(&mut tracked, "hot", now * 1000);
        }
        assert_eq!(tracked.uses.len(), 1);
        // The next grain's first use appends one more.
        use_key(&mut tracked, "hot", GRAIN_NS);
        use_key(&mut tracked, "hot", GRAIN_NS + 5);
        assert_eq!(tracked.uses.len(), 2);
    }

    #[test]
    fn idleness_is_exact_and_memory_goes_within_one_grain() {
        let idle_after = 10_000_000_000;
        let mut tracked = nanosecond_keys(idle_after);
        // Last used at 1 s: idle from 11 s on, its record at the grain's end.
        let last_use = 1_000_000_000;
        use_key(&mut tracked, "k", last_use);
        let idle_at = last_use + idle_after;
        assert!(holds(&tracked, "k", idle_at - 1));
        assert!(!holds(&tracked, "k", idle_at));
        // The decision path's sweep keeps its memory until the record is old
        // enough (1 s is in the grain [2^29, 2 * 2^29) ns).
        tracked.evict_idle(idle_at);
        assert_eq!(tracked.len(), 1);
        let record = 2 * GRAIN_NS - 1;
        tracked.evict_idle(record + idle_after - 1);
        assert_eq!(tracked.len(), 1);
        tracked.evict_idle(record + idle_after);
        assert_eq!(tracked.len(), 0);
        // The exact sweep drops it as soon as it is idle, and not before.
        use_key(&mut tracked, "k", last_use + 2 * idle_after);
        let idle_at = last_use + 3 * idle_after;
        tracked.evict_every_idle(idle_at - 1);
        assert_eq!(tracked.len(), 1);
        tracked.evict_every_idle(idle_at);
        assert_eq!(tracked.len(), 0);
        assert_eq!(tracked.count.tracked.load(Ordering::Relaxed), 0);
    }

    #[test]
    fn a_key_used_in_a_later_grain_is_not_dropped_by_its_old_record() {
        let idle_after = 2 * GRAIN_NS;
        let mut tracked = nanosecond_keys(idle_after);
        use_key(&mut tracked, "k", 0);
        use_key(&mut tracked, "k", GRAIN_NS);
        // The first record (at 2^29 - 1) is stale once the key moved on: at
        // 3 * 2^29 - 1 it is old enough to go, the key is not idle.
        tracked.evict_idle(3 * GRAIN_NS - 1);
        assert!(holds(&tracked, "k", 3 * GRAIN_NS - 1));
        assert_eq!(tracked.len(), 1);
        tracked.evict_every_idle(3 * GRAIN_NS - 1);
        assert_eq!(tracked.len(), 1);
    }
}
