//! A loom model of concurrency slots in memory (`MemorySlots`, issue #26):
//! every interleaving of threads acquiring and releasing one key's slots,
//! explored by loom (up to three preemptions each), never holds more than
//! `max` at once, grants at least `max` of them, and ends with none held. Run with
//! `RUSTFLAGS="--cfg loom" cargo test -p tollgate-core --test loom_slots
//! --release` (`.ci/test` does); without `--cfg loom` this file is empty.
#![cfg(loom)]

use loom::model::Builder;
use loom::sync::Arc;
use loom::sync::atomic::{AtomicU64, Ordering};
use tollgate_core::{MemorySlots, SlotStore};

/// loom's explorer, bounded to three preemptions per execution (loom's
/// advice: bugs need few; the unbounded search of three threads does not
/// end in minutes).
fn explore(model: impl Fn() + Sync + Send + 'static) {
    let mut builder = Builder::new();
    builder.preemption_bound = Some(3);
    builder.check(model);
}

/// `threads` threads each try once for a slot of "hot" under `max`, and
/// release it if granted; `in_flight` counts the holders as the model
/// sees them. Returns how many were granted.
fn race(threads: usize, max: u64) -> u64 {
    let slots = Arc::new(MemorySlots::new());
    let in_flight = Arc::new(AtomicU64::new(0));
    let handles: Vec<_> = (0..threads)
        .map(|_| {
            let (slots, in_flight) = (Arc::clone(&slots), Arc::clone(&in_flight));
            loom::thread::spawn(move || {
                let Some(lease) = slots.try_acquire("hot", max) else {
                    return 0;
                };
                let holders = in_flight.fetch_add(1, Ordering::SeqCst) + 1;
                assert!(holders <= max, "{holders} hold a slot of {max}");
                in_flight.fetch_sub(1, Ordering::SeqCst);
                slots.release(lease);
                1
            })
        })
        .collect();
    let granted = handles
        .into_iter()
        .map(|handle| handle.join().unwrap())
        .sum();
    assert_eq!(slots.held(), 0);
    assert_eq!(slots.in_flight("hot"), 0);
    granted
}

#[test]
fn two_threads_for_one_slot_never_hold_two() {
    explore(|| {
        let granted = race(2, 1);
        // Each thread tries once: the first is always granted; the second
        // is granted unless the first still holds the slot.
        assert!((1..=2).contains(&granted), "{granted}");
    });
}

#[test]
fn three_threads_for_two_slots_never_hold_three() {
    explore(|| {
        let granted = race(3, 2);
        assert!((2..=3).contains(&granted), "{granted}");
    });
}

#[test]
fn a_release_frees_its_slot_for_a_thread_waiting_on_it() {
    explore(|| {
        let slots = Arc::new(MemorySlots::new());
        let first = slots.try_acquire("hot", 1).expect("a free slot");
        let releasing = {
            let slots = Arc::clone(&slots);
            loom::thread::spawn(move || slots.release(first))
        };
        let second = {
            let slots = Arc::clone(&slots);
            loom::thread::spawn(move || slots.try_acquire("hot", 1))
        };
        releasing.join().unwrap();
        let lease = second.join().unwrap();
        // Granted if it came after the release; either way, nothing is
        // held once its lease goes back.
        assert_eq!(slots.held(), u64::from(lease.is_some()));
        if let Some(lease) = lease {
            slots.release(lease);
        }
        assert_eq!(slots.held(), 0);
        assert_eq!(slots.try_acquire("hot", 1).map(|_| ()), Some(()));
    });
}
