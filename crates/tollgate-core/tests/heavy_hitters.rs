//! The space-saving sketch against exact counts (a plain map over the same
//! stream): its bounds on skewed streams, generated and hand-made, alone
//! and merged.

use std::collections::HashMap;

use proptest::prelude::*;
use tollgate_core::{Counted, HeavyHitters};

/// `stream` counted exactly.
fn exact(stream: &[(u32, u64)]) -> HashMap<u32, u64> {
    let mut counts = HashMap::new();
    for (key, weight) in stream {
        *counts.entry(*key).or_insert(0) += weight;
    }
    counts
}

fn sketch_of(stream: &[(u32, u64)], capacity: usize) -> HeavyHitters<u32, ()> {
    let mut sketch = HeavyHitters::new(capacity);
    for (key, weight) in stream {
        sketch.add(key, *weight, || (*key, ()));
    }
    sketch
}

/// Each counter bounds its key's true weight from both sides, its error at
/// most total / capacity, and every key heavier than that is held.
fn check_bounds(
    counters: &[Counted<u32, ()>],
    truth: &HashMap<u32, u64>,
    total: u64,
    capacity: u64,
) {
    for counted in counters {
        let weight = truth.get(&counted.key).copied().unwrap_or(0);
        assert!(counted.count >= weight, "{counted:?} under {weight}");
        assert!(
            counted.count - counted.error <= weight,
            "{counted:?} over {weight}"
        );
        assert!(
            counted.error * capacity <= total,
            "{counted:?}: error over {total}/{capacity}"
        );
    }
    for (key, weight) in truth {
        if weight * capacity > total {
            assert!(
                counters.iter().any(|counted| counted.key == *key),
                "{key} weighs {weight} > {total}/{capacity} and is not held"
            );
        }
    }
}

/// A Zipf-like stream: key k (from 1) appears about `scale / k` times,
/// interleaved so that heavy and light keys alternate.
fn zipf_stream(keys: u32, scale: u64) -> Vec<(u32, u64)> {
    let mut remaining: Vec<(u32, u64)> = (1..=keys).map(|k| (k, scale / u64::from(k))).collect();
    let mut stream = Vec::new();
    while remaining.iter().any(|(_, left)| *left > 0) {
        for (key, left) in &mut remaining {
            if *left > 0 {
                stream.push((*key, 1));
                *left -= 1;
            }
        }
    }
    stream
}

#[test]
fn a_skewed_stream_keeps_its_heavy_keys_within_the_bound() {
    // 2,000 keys, 1,000 / k each (rounded down): 7,069 requests in all; 64
    // counters, so every count is at most 7,069 / 64 < 111 too high.
    let stream = zipf_stream(2000, 1000);
    let total: u64 = stream.iter().map(|(_, weight)| weight).sum();
    assert_eq!(total, 7069);
    let truth = exact(&stream);
    let sketch = sketch_of(&stream, 64);
    assert_eq!(sketch.total(), total);
    let counters: Vec<Counted<u32, ()>> = sketch.counters().cloned().collect();
    check_bounds(&counters, &truth, total, 64);
}

#[test]
fn heavy_keys_far_apart_come_out_in_their_order() {
    // Keys 1 to 5 weigh 5,000, 4,000, 3,000, 2,000 and 1,000; 2,000 light
    // keys weigh 1 each, all interleaved: 17,000 in all, so with 64
    // counters a count is at most 266 too high. The heavy keys stand 1,000
    // apart, more than the error, and every light key stays below 1 + 266:
    // the top five are keys 1 to 5, in that order, whatever the sketch
    // dropped.
    let mut stream = Vec::new();
    for round in 0..5000_u32 {
        for key in 1..=5_u32 {
            if round < (6 - key) * 1000 {
                stream.push((key, 1));
            }
        }
        if round < 2000 {
            stream.push((100 + round, 1));
        }
    }
    let total: u64 = stream.iter().map(|(_, weight)| weight).sum();
    assert_eq!(total, 17_000);
    let sketch = sketch_of(&stream, 64);
    let top: Vec<u32> = HeavyHitters::merged([&sketch])
        .iter()
        .take(5)
        .map(|counted| counted.key)
        .collect();
    assert_eq!(top, [1, 2, 3, 4, 5]);
    check_bounds(
        &sketch.counters().cloned().collect::<Vec<_>>(),
        &exact(&stream),
        total,
        64,
    );
}

#[test]
fn a_sketch_not_full_counts_exactly() {
    let stream = [(7, 3), (9, 1), (7, 2)];
    let sketch = sketch_of(&stream, 8);
    let mut counters: Vec<(u32, u64, u64)> = sketch
        .counters()
        .map(|counted| (counted.key, counted.count, counted.error))
        .collect();
    counters.sort_unstable();
    assert_eq!(counters, [(7, 5, 0), (9, 1, 0)]);
    assert_eq!(sketch.floor(), 0);
}

#[test]
fn a_new_key_takes_the_smallest_counter() {
    // Two counters: a=3, b=1; c takes b's counter: count 1 + 1, error 1.
    let mut sketch: HeavyHitters<String, u8> = HeavyHitters::new(2);
    for _ in 0..3 {
        sketch.add("a", 1, || ("a".to_owned(), 1));
    }
    sketch.add("b", 1, || ("b".to_owned(), 2));
    sketch.add("c", 1, || ("c".to_owned(), 3));
    let merged = HeavyHitters::merged([&sketch]);
    assert_eq!(
        merged,
        [
            Counted {
                key: "a".to_owned(),
                count: 3,
                error: 0,
                payload: 1
            },
            Counted {
                key: "c".to_owned(),
                count: 2,
                error: 1,
                payload: 3
            },
        ]
    );
}

proptest! {
    #[test]
    fn bounds_hold_alone_and_merged(
        streams in prop::collection::vec(
            prop::collection::vec((0u32..40, 1u64..5), 0..300),
            1..4,
        ),
        capacity in 1usize..12,
    ) {
        let sketches: Vec<HeavyHitters<u32, ()>> =
            streams.iter().map(|stream| sketch_of(stream, capacity)).collect();
        for (stream, sketch) in streams.iter().zip(&sketches) {
            let total: u64 = stream.iter().map(|(_, weight)| weight).sum();
            let counters: Vec<Counted<u32, ()>> = sketch.counters().cloned().collect();
            check_bounds(&counters, &exact(stream), total, capacity as u64);
        }
        let whole: Vec<(u32, u64)> = streams.concat();
        let total: u64 = whole.iter().map(|(_, weight)| weight).sum();
        let merged = HeavyHitters::merged(&sketches);
        check_bounds(&merged, &exact(&whole), total, capacity as u64);
        prop_assert!(merged.windows(2).all(|pair| pair[0].count >= pair[1].count));
    }
}
