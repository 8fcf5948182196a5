//! The Go service's local cache of over-limit keys (`LOCAL_CACHE_SIZE_IN_BYTES`,
//! a freecache in `base_limiter.go`): a descriptor found over its limit is
//! remembered, under its full cache key (with the window's start), for one
//! unit; until then it is answered OVER_LIMIT without asking the store.
//!
//! A memo of the store's answer, not a rule: a window that counts refused hits
//! stays over its limit until it ends, so the answer is the store's own; only
//! the store round trip and the count it would add are saved. Bounded in
//! bytes: expired entries go first, then the oldest.

use std::collections::{HashMap, VecDeque};

use parking_lot::Mutex;

/// Bytes an entry costs beyond its key (freecache's header is 24 bytes).
const ENTRY_OVERHEAD: u64 = 24;

/// Over-limit keys, each until a time (unix seconds).
#[derive(Debug)]
pub(crate) struct LocalCache {
    capacity_bytes: u64,
    inner: Mutex<Inner>,
}

#[derive(Debug, Default)]
struct Inner {
    until: HashMap<String, u64>,
    /// Keys in insertion order (a key re-inserted appears again; stale
    /// records are skipped).
    order: VecDeque<(String, u64)>,
    bytes: u64,
}

impl LocalCache {
    /// A cache of about `capacity_bytes`; 0 keeps nothing.
    pub(crate) fn new(capacity_bytes: u64) -> LocalCache {
        LocalCache {
            capacity_bytes,
            inner: Mutex::new(Inner::default()),
        }
    }

    /// Whether the cache is on.
    pub(crate) fn enabled(&self) -> bool {
        self.capacity_bytes > 0
    }

    /// Whether `key` is remembered as over its limit at `now_s`.
    pub(crate) fn contains(&self, key: &str, now_s: u64) -> bool {
        self.enabled()
            && self
                .inner
                .lock()
                .until
                .get(key)
                .is_some_and(|&until| now_s < until)
    }

    /// Remembers `key` as over its limit for `ttl_s` seconds from `now_s`.
    pub(crate) fn insert(&self, key: &str, now_s: u64, ttl_s: u64) {
        let cost = key.len() as u64 + ENTRY_OVERHEAD;
        if cost > self.capacity_bytes {
            return;
        }
        let until = now_s.saturating_add(ttl_s);
        let mut inner = self.inner.lock();
        if inner.until.insert(key.to_owned(), until).is_none() {
            inner.bytes += cost;
        }
        inner.order.push_back((key.to_owned(), until));
        while inner.bytes > self.capacity_bytes || inner.order.len() > 2 * inner.until.len() + 16 {
            let Some((oldest, at)) = inner.order.pop_front() else {
                break;
            };
            // Only the newest record of a key removes it.
            if inner.until.get(&oldest) == Some(&at) {
                inner.until.remove(&oldest);
                inner.bytes -= oldest.len() as u64 + ENTRY_OVERHEAD;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn remembers_until_the_time_and_stays_bounded() {
        let cache = LocalCache::new(100);
        cache.insert("a", 10, 5);
        assert!(cache.contains("a", 14));
        assert!(!cache.contains("a", 15));
        for i in 0..100 {
            cache.insert(&format!("key{i}"), 0, 60);
        }
        let inner = cache.inner.lock();
        assert!(inner.bytes <= 100);
        assert!(inner.until.contains_key("key99"));
    }
}
