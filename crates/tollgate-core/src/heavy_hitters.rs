//! The keys that weigh most in a stream, in bounded memory: the space-saving
//! sketch of Metwally, Agrawal and El Abbadi ("Efficient computation of
//! frequent and top-k elements in data streams", 2005), its counters in a
//! min-heap indexed by key, so an update costs one hash lookup and
//! O(log capacity) swaps, and sketches merged as Agarwal et al.'s mergeable
//! summaries (2012) merge them.
//!
//! Its guarantee, for a sketch of `capacity` counters over a stream of total
//! weight `N`: each key it holds has `count - error <= true weight <= count`,
//! and `error <= N / capacity`; every key heavier than `N / capacity` is held.
//! Merged sketches keep both bounds with `N` their total weight and
//! `capacity` the smallest one's.

use std::borrow::Borrow;
use std::hash::Hash;

use hashbrown::HashMap;

type Positions<K> = HashMap<K, usize, foldhash::fast::RandomState>;

/// A space-saving sketch of keys `K`, each with the payload `V` of its
/// first sighting since it took its counter.
#[derive(Clone, Debug)]
pub struct HeavyHitters<K, V> {
    capacity: usize,
    /// A min-heap by count: the root is the counter a new key replaces.
    heap: Vec<Counted<K, V>>,
    /// Where each key's counter is in `heap`.
    positions: Positions<K>,
    total: u64,
}

/// A key's counter: its estimated weight and the most it overestimates by.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Counted<K, V> {
    /// The key.
    pub key: K,
    /// Its estimated weight: never below the true one.
    pub count: u64,
    /// The most `count` exceeds the true weight by.
    pub error: u64,
    /// What was noted with the key when it took its counter.
    pub payload: V,
}

impl<K: Hash + Eq + Clone, V> HeavyHitters<K, V> {
    /// A sketch of `capacity` counters (at least 1).
    pub fn new(capacity: usize) -> Self {
        let capacity = capacity.max(1);
        HeavyHitters {
            capacity,
            heap: Vec::with_capacity(capacity),
            positions: Positions::with_capacity_and_hasher(capacity, Default::default()),
            total: 0,
        }
    }

    /// Counts `weight` for `key`; `insert` makes its owned key and payload
    /// when it takes a counter (the only time anything is allocated).
    pub fn add<Q>(&mut self, key: &Q, weight: u64, insert: impl FnOnce() -> (K, V))
    where
        K: Borrow<Q>,
        Q: Hash + Eq + ?Sized,
    {
        self.total = self.total.saturating_add(weight);
        if let Some(&at) = self.positions.get(key) {
            let counted = &mut self.heap[at];
            counted.count = counted.count.saturating_add(weight);
            self.sift_down(at);
            return;
        }
        let (key, payload) = insert();
        if self.heap.len() < self.capacity {
            self.positions.insert(key.clone(), self.heap.len());
            self.heap.push(Counted {
                key,
                count: weight,
                error: 0,
                payload,
            });
            self.sift_up(self.heap.len() - 1);
            return;
        }
        // Full: the key takes the smallest counter, keeping its count as
        // the new key's error.
        let smallest = self.heap[0].count;
        self.positions.remove(&self.heap[0].key);
        self.positions.insert(key.clone(), 0);
        self.heap[0] = Counted {
            key,
            count: smallest.saturating_add(weight),
            error: smallest,
            payload,
        };
        self.sift_down(0);
    }

    /// The total weight counted.
    pub fn total(&self) -> u64 {
        self.total
    }

    /// The smallest count when every counter is taken (a key not held
    /// weighs at most this), else 0.
    pub fn floor(&self) -> u64 {
        if self.heap.len() < self.capacity {
            0
        } else {
            self.heap.first().map_or(0, |counted| counted.count)
        }
    }

    /// The counters, in no order.
    pub fn counters(&self) -> impl Iterator<Item = &Counted<K, V>> {
        self.heap.iter()
    }

    /// `sketches` merged: every key any holds, its count the sum of its
    /// counts where held plus the floors of the others (and its error
    /// likewise), so the bounds still hold over the merged stream; by
    /// count, highest first (the lower error first among equals, then by
    /// key, so the order never changes from one call to the next).
    pub fn merged<'a>(sketches: impl IntoIterator<Item = &'a Self>) -> Vec<Counted<K, V>>
    where
        K: Ord + 'a,
        V: Clone + 'a,
    {
        let sketches: Vec<&Self> = sketches.into_iter().collect();
        let floors = sketches
            .iter()
            .fold(0_u64, |sum, sketch| sum.saturating_add(sketch.floor()));
        // key → (merged counter, the floors of the sketches holding it)
        let mut merged: HashMap<K, (Counted<K, V>, u64), foldhash::fast::RandomState> =
            HashMap::default();
        for sketch in &sketches {
            let floor = sketch.floor();
            for counted in &sketch.heap {
                let entry = merged.entry(counted.key.clone()).or_insert_with(|| {
                    (
                        Counted {
                            key: counted.key.clone(),
                            count: 0,
                            error: 0,
                            payload: counted.payload.clone(),
                        },
                        0,
                    )
                });
                entry.0.count = entry.0.count.saturating_add(counted.count);
                entry.0.error = entry.0.error.saturating_add(counted.error);
                entry.1 = entry.1.saturating_add(floor);
            }
        }
        let mut merged: Vec<Counted<K, V>> = merged
            .into_values()
            .map(|(mut counted, held_floors)| {
                let elsewhere = floors.saturating_sub(held_floors);
                counted.count = counted.count.saturating_add(elsewhere);
                counted.error = counted.error.saturating_add(elsewhere);
                counted
            })
            .collect();
        merged.sort_by(|a, b| {
            b.count
                .cmp(&a.count)
                .then(a.error.cmp(&b.error))
                .then_with(|| a.key.cmp(&b.key))
        });
        merged
    }

    fn swap(&mut self, a: usize, b: usize) {
        self.heap.swap(a, b);
        for at in [a, b] {
            if let Some(position) = self.positions.get_mut(&self.heap[at].key) {
                *position = at;
            }
        }
    }

    fn sift_up(&mut self, mut at: usize) {
        while at > 0 {
            let parent = (at - 1) / 2;
            if self.heap[parent].count <= self.heap[at].count {
                return;
            }
            self.swap(parent, at);
            at = parent;
        }
    }

    fn sift_down(&mut self, mut at: usize) {
        loop {
            let (left, right) = (2 * at + 1, 2 * at + 2);
            let mut smallest = at;
            if left < self.heap.len() && self.heap[left].count < self.heap[smallest].count {
                smallest = left;
            }
            if right < self.heap.len() && self.heap[right].count < self.heap[smallest].count {
                smallest = right;
            }
            if smallest == at {
                return;
            }
            self.swap(at, smallest);
            at = smallest;
        }
    }
}
