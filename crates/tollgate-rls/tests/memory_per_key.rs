//! The bytes `tollgate rls` holds in memory per distinct descriptor value,
//! whatever the value's length, counted by a tracking allocator (`cap`)
//! around the system's: every byte the service and its in-memory store keep
//! on the heap once each call has returned (the request and the answer are
//! gone by then, so only what stays is counted).
//!
//! The bound asserted is the one docs/RLS.md ("Limits in memory")
//! documents: per key, the in-memory store's entry (at most 250 bytes while
//! keys are added, docs/CONFIG.md "Memory per key") and the key itself, kept
//! whole up to 128 bytes and as its 72-byte digest beyond. One test
//! function, so that no other test allocates while it counts.

use std::alloc::System;
use std::sync::Arc;

use cap::Cap;
use tollgate_core::{LimiterConfig, ManualClock, MemoryStore, Store};
use tollgate_rls::harness::block_on;
use tollgate_rls::proto::{Code, Entry, RateLimitDescriptor, RateLimitRequest};
use tollgate_rls::{LoaderOptions, RateLimitConfig, RateLimitService, ServiceSettings};

#[global_allocator]
static ALLOCATOR: Cap<System> = Cap::new(System, usize::MAX);

/// 2100-01-01T00:00:10Z in nanoseconds: every call in one minute.
const START: u64 = 4_102_444_810_000_000_000;
/// Distinct values, each one call.
const VALUES: usize = 1_000;
/// Each value's length: far past the 128 bytes a key is kept whole up to.
const VALUE_BYTES: usize = 16 * 1024;
/// The documented bound per key: a fixed window's entry while keys are
/// added (250) and a key of at most 128 bytes.
const BYTES_PER_KEY: usize = 250 + 128;

fn request(value: &str) -> RateLimitRequest {
    RateLimitRequest {
        domain: "edge".into(),
        descriptors: vec![RateLimitDescriptor {
            entries: vec![Entry::new("token", value)],
            ..RateLimitDescriptor::default()
        }],
        hits_addend: 1,
    }
}

/// The value of index `index`: `VALUE_BYTES` bytes, distinct from every
/// other index's only in its last digits.
fn value(index: usize) -> String {
    let mut value = "v".repeat(VALUE_BYTES - 8);
    value.push_str(&format!("{index:08}"));
    value
}

#[test]
fn long_values_cost_a_bounded_number_of_bytes_each() {
    let yaml = "domain: edge
descriptors:
  - key: token
    rate_limit: {unit: minute, requests_per_unit: 5}
";
    let config =
        RateLimitConfig::from_sources(&[("edge.yaml", yaml)], &LoaderOptions::default()).unwrap();
    let clock = Arc::new(ManualClock::new(START));
    let store = Arc::new(MemoryStore::new(&LimiterConfig::default(), clock.clone()).unwrap());
    let shared: Arc<dyn Store> = store.clone();
    let service = RateLimitService::new(shared, config, ServiceSettings::default(), clock);
    let call = |value: &str| {
        let response = block_on(service.should_rate_limit(&request(value))).unwrap();
        assert_eq!(response.overall_code, Code::Ok);
    };
    // What the first call sets up once (the stats' names, the policy
    // prepared, the first shard's table) is not per key.
    call("warm-up");

    let baseline = ALLOCATOR.allocated();
    for index in 0..VALUES {
        call(&value(index));
    }
    let held = ALLOCATOR.allocated().saturating_sub(baseline);

    assert_eq!(
        block_on(store.stats()).unwrap().tracked_keys,
        VALUES as u64 + 1
    );
    let per_key = held / VALUES;
    eprintln!("{VALUES} values of {VALUE_BYTES} bytes: {held} bytes held, {per_key} per value");
    assert!(
        held <= VALUES * BYTES_PER_KEY,
        "{held} bytes held for {VALUES} values of {VALUE_BYTES} bytes: {per_key} per value, \
         over the {BYTES_PER_KEY} documented"
    );
}
