//! The keys of one shard that hold limiter state, findable by key and ordered by
//! last use, for idle eviction and the key cap in amortised O(1).
//!
//! Entries live inline in one hash table (a lookup touches the table and nothing
//! else). The order by last use is a log of `(time, key hash)` records appended
//! whenever a key's last use moves forward: appending is sequential, so a
//! request never touches another key's memory. A record is *live* while its key's
//! entry still has that `last_request`; the others are stale and skipped when
//! they reach the front. Each entry has exactly one live record, the log stays in
//! time order (time never goes backwards within a caller's stream), and it is
//! compacted when it holds more than twice the entries, so it is bounded and
//! every record is appended and dropped once: amortised O(1).

use std::collections::VecDeque;

use compact_str::CompactString;
use hashbrown::HashTable;
use hashbrown::hash_table::Entry as TableEntry;

use crate::algorithm::State;
use crate::policy::Algorithm;

/// One key's limiter state.
#[derive(Debug)]
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

/// The key spaces of a gateway.
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

/// The tracked keys of a shard.
#[derive(Debug)]
pub(crate) struct TrackedKeys {
    entries: HashTable<Tracked>,
    /// Uses in time order, oldest first; see the module documentation.
    uses: VecDeque<Use>,
    /// The most keys tracked at once.
    capacity: usize,
    /// Ticks without a request after which a key's state is dropped.
    idle_after: u64,
}

impl TrackedKeys {
    pub(crate) fn new(capacity: usize, idle_after: u64) -> Self {
        TrackedKeys {
            entries: HashTable::new(),
            uses: VecDeque::new(),
            capacity,
            idle_after,
        }
    }

    /// Changes the key cap (dropping the least recently used keys beyond it)
    /// and the idle eviction age.
    pub(crate) fn set_limits(&mut self, capacity: usize, idle_after: u64) {
        self.capacity = capacity;
        self.idle_after = idle_after;
        while self.entries.len() > capacity && self.drop_least_recent() {}
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
            .find(hash, |entry| {
                entry.hash == hash && entry.space == space && entry.key == key
            })
            .filter(|entry| entry.version == version && !self.is_idle(entry, now))
    }

    /// `key`'s state for a request at `now` under rule `version` of
    /// `algorithm`: fresh when the key is new, idle or under another rule. The
    /// key is marked used at `now`; when `capacity` keys are tracked, a new key
    /// first pushes out the least recently used one.
    pub(crate) fn use_state(
        &mut self,
        space: KeySpace,
        hash: u64,
        key: &str,
        now: u64,
        version: u64,
        algorithm: Algorithm,
    ) -> &mut State {
        if self.entries.len() >= self.capacity
            && self
                .entries
                .find(hash, |entry| {
                    entry.hash == hash && entry.space == space && entry.key == key
                })
                .is_none()
        {
            self.drop_least_recent();
        }
        let idle_after = self.idle_after;
        let entry = self.entries.entry(
            hash,
            |entry| entry.hash == hash && entry.space == space && entry.key == key,
            |entry| entry.hash,
        );
        let tracked = match entry {
            TableEntry::Occupied(entry) => {
                let tracked = entry.into_mut();
                if tracked.version != version
                    || now.saturating_sub(tracked.last_request) >= idle_after
                {
                    tracked.state = State::new(algorithm);
                    tracked.version = version;
                }
                if now <= tracked.last_request {
                    return &mut tracked.state;
                }
                tracked.last_request = now;
                tracked
            }
            TableEntry::Vacant(entry) => entry
                .insert(Tracked {
                    key: CompactString::from(key),
                    space,
                    hash,
                    state: State::new(algorithm),
                    last_request: now,
                    version,
                })
                .into_mut(),
        };
        self.uses.push_back(Use { at: now, hash });
        &mut tracked.state
    }

    /// Drops `key`'s state; whether it held state at `now`.
    pub(crate) fn remove(&mut self, space: KeySpace, hash: u64, key: &str, now: u64) -> bool {
        match self.entries.find_entry(hash, |entry| {
            entry.hash == hash && entry.space == space && entry.key == key
        }) {
            Ok(entry) => {
                let (removed, _) = entry.remove();
                !self.is_idle(&removed, now)
            }
            Err(_) => false,
        }
    }

    /// Drops every key idle at `now`, oldest first; reads only the front of the
    /// log when nothing is idle.
    pub(crate) fn evict_idle(&mut self, now: u64) {
        while let Some(oldest) = self.uses.front().copied() {
            if now.saturating_sub(oldest.at) < self.idle_after {
                break;
            }
            self.uses.pop_front();
            self.remove_live(oldest);
        }
        self.compact_if_large();
    }

    /// Drops the entries that `keep` refuses.
    pub(crate) fn retain(&mut self, mut keep: impl FnMut(&Tracked) -> bool) {
        self.entries.retain(|entry| keep(entry));
        self.compact_if_large();
    }

    fn is_idle(&self, entry: &Tracked, now: u64) -> bool {
        now.saturating_sub(entry.last_request) >= self.idle_after
    }

    /// Drops the least recently used key; whether there was one.
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
        let found = self.entries.find_entry(record.hash, |entry| {
            entry.hash == record.hash && entry.last_request == record.at
        });
        match found {
            Ok(entry) => {
                entry.remove();
                true
            }
            Err(_) => false,
        }
    }

    /// Rebuilds the log from the entries once stale records outnumber live ones.
    fn compact_if_large(&mut self) {
        if self.uses.len() <= 2 * self.entries.len() + 64 {
            return;
        }
        let mut live: Vec<Use> = self
            .entries
            .iter()
            .map(|entry| Use {
                at: entry.last_request,
                hash: entry.hash,
            })
            .collect();
        live.sort_unstable_by_key(|record| record.at);
        self.uses = live.into();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn keys(capacity: usize, idle_after: u64) -> TrackedKeys {
        TrackedKeys::new(capacity, idle_after)
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
    }
}
