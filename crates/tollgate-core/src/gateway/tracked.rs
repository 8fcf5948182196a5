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
    /// The key's hash, to rehash without the hasher and to match log records.
    hash: u64,
    pub(crate) state: State,
    /// The `now` of the key's latest request, allowed or not, in ticks.
    last_request: u64,
    /// The version of the rule the state was built under.
    pub(crate) version: u64,
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

    /// Keys holding state.
    pub(crate) fn len(&self) -> usize {
        self.entries.len()
    }

    /// `key`'s entry, if it holds state at `now` under rule `version`.
    pub(crate) fn get(&self, hash: u64, key: &str, now: u64, version: u64) -> Option<&Tracked> {
        self.entries
            .find(hash, |entry| entry.hash == hash && entry.key == key)
            .filter(|entry| entry.version == version && !self.is_idle(entry, now))
    }

    /// `key`'s state for a request at `now` under rule `version` of
    /// `algorithm`: fresh when the key is new, idle or under another rule. The
    /// key is marked used at `now`; when `capacity` keys are tracked, a new key
    /// first pushes out the least recently used one.
    pub(crate) fn use_state(
        &mut self,
        hash: u64,
        key: &str,
        now: u64,
        version: u64,
        algorithm: Algorithm,
    ) -> &mut State {
        if self.entries.len() >= self.capacity
            && self
                .entries
                .find(hash, |entry| entry.hash == hash && entry.key == key)
                .is_none()
        {
            self.drop_least_recent();
        }
        let idle_after = self.idle_after;
        let entry = self.entries.entry(
            hash,
            |entry| entry.hash == hash && entry.key == key,
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
    pub(crate) fn remove(&mut self, hash: u64, key: &str, now: u64) -> bool {
        match self
            .entries
            .find_entry(hash, |entry| entry.hash == hash && entry.key == key)
        {
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

    /// Drops the least recently used key.
    fn drop_least_recent(&mut self) {
        while let Some(oldest) = self.uses.pop_front() {
            if self.remove_live(oldest) {
                return;
            }
        }
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
