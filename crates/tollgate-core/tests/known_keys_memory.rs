//! A list of a million known keys (issue #26): read from a file of
//! `sha256:` digests, every listed key found and no other, and the bytes the
//! list holds counted by a tracking allocator (`cap`): at most the bound
//! `docs/CONFIG.md` documents ([`KnownKeys::memory_bytes`]: 69.2 bytes per
//! key for a million). One test function, so that no other test allocates
//! while it counts.

use std::alloc::System;
use std::fmt::Write;

use cap::Cap;
use tollgate_core::KnownKeys;

#[global_allocator]
static ALLOCATOR: Cap<System> = Cap::new(System, usize::MAX);

const KEYS: usize = 1_000_000;

/// `printf %s sk_live_a | sha256sum` and `printf %s abc | sha256sum`,
/// computed outside tollgate.
const LISTED: [(&str, &str); 2] = [
    (
        "sk_live_a",
        "9f5903b163a543f71c15e02753f60f39ed78790bd0c4f4b62add808395e029c7",
    ),
    (
        "abc",
        "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad",
    ),
];

/// A file of `KEYS` digest lines: the two above, the rest 32 bytes of a
/// xorshift sequence each (digests of no key anyone holds).
fn digest_file() -> String {
    let mut file = String::with_capacity(KEYS * 72);
    for (_, digest) in LISTED {
        writeln!(file, "sha256:{digest}").unwrap();
    }
    let mut state = 0x9E37_79B9_7F4A_7C15_u64;
    for _ in LISTED.len()..KEYS {
        file.push_str("sha256:");
        for _ in 0..4 {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            write!(file, "{state:016x}").unwrap();
        }
        file.push('\n');
    }
    file
}

#[test]
fn a_million_digests_are_found_and_held_within_the_documented_bytes() {
    let file = digest_file();
    let before = ALLOCATOR.allocated();
    let known = KnownKeys::parse(file.as_bytes()).unwrap();
    let held = ALLOCATOR.allocated() - before;
    drop(file);
    assert_eq!(known.len(), KEYS);
    for (key, _) in LISTED {
        assert!(known.contains(key), "{key} is listed");
    }
    for key in ["sk_live_b", "abd", "", "sk_live_a "] {
        assert!(!known.contains(key), "{key:?} is not listed");
    }
    // 2^21 buckets of a 32-byte digest and a control byte, and the 16
    // trailing control bytes: 69,206,032 bytes, 69.2 per key.
    assert_eq!(known.memory_bytes(), 69_206_032);
    assert!(
        held <= known.memory_bytes() + 64,
        "the list holds {held} bytes, documented {}",
        known.memory_bytes()
    );
    // Checking a key allocates nothing.
    let before = ALLOCATOR.allocated();
    let total = ALLOCATOR.total_allocated();
    assert!(known.contains("sk_live_a"));
    assert!(!known.contains("sk_invented"));
    assert_eq!(ALLOCATOR.allocated(), before);
    assert_eq!(ALLOCATOR.total_allocated(), total);
}
