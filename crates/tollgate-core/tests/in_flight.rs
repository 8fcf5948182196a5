//! Concurrency limits in memory (`MemorySlots`, issue #26): a model of
//! acquire and release checked by proptest against a count kept by hand,
//! and threads racing for slots that never hold more than `max` at once.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use proptest::prelude::*;
use tollgate_core::{MemorySlots, SlotLease, SlotStore};

#[derive(Clone, Debug)]
enum Step {
    /// Acquire a slot for key 0..3 under this max.
    Acquire(usize, u64),
    /// Release the held lease at this index (modulo the held ones).
    Release(usize),
}

fn steps() -> impl Strategy<Value = Vec<Step>> {
    prop::collection::vec(
        prop_oneof![
            (0usize..3, 1u64..4).prop_map(|(key, max)| Step::Acquire(key, max)),
            any::<usize>().prop_map(Step::Release),
        ],
        0..200,
    )
}

proptest! {
    #[test]
    fn grants_follow_the_count_of_held_slots(steps in steps()) {
        let slots = MemorySlots::new();
        let mut held: Vec<SlotLease> = Vec::new();
        // The model: slots held per key.
        let mut counts = [0u64; 3];
        for step in steps {
            match step {
                Step::Acquire(key, max) => {
                    let name = format!("key{key}");
                    let granted = slots.try_acquire(&name, max);
                    prop_assert_eq!(granted.is_some(), counts[key] < max);
                    if let Some(lease) = granted {
                        counts[key] += 1;
                        held.push(lease);
                    }
                }
                Step::Release(index) if !held.is_empty() => {
                    let lease = held.swap_remove(index % held.len());
                    let key: usize = lease.key[3..].parse().unwrap();
                    counts[key] -= 1;
                    slots.release(lease);
                }
                Step::Release(_) => {}
            }
            for (key, count) in counts.iter().enumerate() {
                prop_assert_eq!(slots.in_flight(&format!("key{key}")), *count);
            }
            prop_assert_eq!(slots.held(), counts.iter().sum::<u64>());
        }
        for lease in held {
            slots.release(lease);
        }
        prop_assert_eq!(slots.held(), 0);
    }
}

#[test]
fn racing_threads_never_hold_more_than_max() {
    const MAX: u64 = 3;
    let slots = Arc::new(MemorySlots::new());
    let in_flight = Arc::new(AtomicU64::new(0));
    let most = Arc::new(AtomicU64::new(0));
    let granted = Arc::new(AtomicU64::new(0));
    let threads: Vec<_> = (0..8)
        .map(|_| {
            let (slots, in_flight, most, granted) = (
                Arc::clone(&slots),
                Arc::clone(&in_flight),
                Arc::clone(&most),
                Arc::clone(&granted),
            );
            std::thread::spawn(move || {
                for _ in 0..20_000 {
                    if let Some(lease) = slots.try_acquire("hot", MAX) {
                        let now = in_flight.fetch_add(1, Ordering::SeqCst) + 1;
                        most.fetch_max(now, Ordering::SeqCst);
                        granted.fetch_add(1, Ordering::Relaxed);
                        std::hint::spin_loop();
                        in_flight.fetch_sub(1, Ordering::SeqCst);
                        slots.release(lease);
                    }
                }
            })
        })
        .collect();
    for thread in threads {
        thread.join().unwrap();
    }
    assert!(most.load(Ordering::SeqCst) <= MAX);
    assert!(granted.load(Ordering::Relaxed) > 0);
    assert_eq!(slots.held(), 0);
    assert_eq!(slots.in_flight("hot"), 0);
}
