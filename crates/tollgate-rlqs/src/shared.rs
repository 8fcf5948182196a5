//! Each bucket's streams kept in Redis, so that several `tollgate rlqs`
//! replicas behind one Redis split one budget among all their streams.
//!
//! A bucket's record is named `rlqs:` and the SHA-256 of its domain and
//! entries (no bucket value, an API key perhaps, reaches Redis's key names),
//! and holds one line per stream: `id demand reported_ns active_ns
//! assigned`. A report reads the records of its buckets, applies core's
//! rules to them in the allocator exactly as in memory, and writes them back
//! by compare-and-set; a conflict (another replica wrote in between) starts
//! the report over, at most [`ATTEMPTS`] times. Stream ids are unique across
//! replicas: each replica numbers its streams from a random 32-bit prefix.
//! A replica that is gone leaves its streams' records, which every report
//! of the bucket takes out once they have not reported for the assignment's
//! TTL and one more report (`take_stale`); the record itself expires after
//! the abandon time and the TTL with nothing written.

use std::fmt::Write as _;
use std::time::Duration;

use sha2::{Digest, Sha256};
use tollgate_core::{QuotaDemand, StreamRecord, WindowCount};
use tollgate_redis::RedisRecords;

use crate::allocator::Kept;
use crate::bucket::BucketKey;

/// How many times a report is tried when other replicas write its buckets'
/// records in between.
pub const ATTEMPTS: usize = 8;

/// The store a bucket's streams are shared through.
#[derive(Clone, Debug)]
pub struct SharedState {
    /// The records.
    pub records: RedisRecords,
    /// How long a record lives with nothing written.
    pub time_to_live: Duration,
}

/// The record name of the bucket `key` in `domain`.
pub fn record_name(domain: &str, key: &BucketKey) -> String {
    let mut hash = Sha256::new();
    hash.update(domain.as_bytes());
    for (name, value) in key.entries() {
        for part in [name, value] {
            hash.update(b"\0");
            hash.update((part.len() as u64).to_be_bytes());
            hash.update(part.as_bytes());
        }
    }
    let mut name = String::from("rlqs:");
    for byte in hash.finalize() {
        let _ = write!(name, "{byte:02x}");
    }
    name
}

/// A bucket's state as a record: a first line `w start_s used` (its fixed
/// window's count) when it has one, then its streams.
pub fn encode((demand, window): &Kept) -> Vec<u8> {
    let mut text = String::new();
    if *window != WindowCount::default() {
        let _ = writeln!(text, "w {} {}", window.start_s, window.used);
    }
    for (stream, record) in demand.records() {
        let _ = writeln!(
            text,
            "{stream} {} {} {} {}",
            record.demand, record.reported_ns, record.active_ns, record.assigned
        );
    }
    text.into_bytes()
}

/// A record's state; a line that does not read (a record written by
/// something else) is left out.
pub fn decode(record: &[u8]) -> Kept {
    let text = String::from_utf8_lossy(record);
    let mut window = WindowCount::default();
    for line in text.lines() {
        let mut words = line.split(' ');
        if words.next() == Some("w") {
            let numbers: Vec<u64> = words.filter_map(|word| word.parse().ok()).collect();
            if let [start_s, used] = numbers[..] {
                window = WindowCount { start_s, used };
            }
        }
    }
    let demand = QuotaDemand::from_records(text.lines().filter_map(|line| {
        let numbers: Vec<u64> = line
            .split(' ')
            .map(str::parse)
            .collect::<Result<_, _>>()
            .ok()?;
        match numbers[..] {
            [stream, demand, reported_ns, active_ns, assigned] => Some((
                stream,
                StreamRecord {
                    demand,
                    reported_ns,
                    active_ns,
                    assigned,
                },
            )),
            _ => None,
        }
    }));
    (demand, window)
}

#[cfg(test)]
mod tests {
    use std::collections::HashMap;

    use tollgate_core::BucketReport;

    use super::*;

    #[test]
    fn a_record_gives_the_same_streams_back() {
        let mut demand = QuotaDemand::new();
        demand.report(
            7,
            BucketReport {
                allowed: 50,
                denied: 0,
            },
            3_000_000_000,
        );
        demand.assign(7, 100, 1);
        let window = WindowCount {
            start_s: 3_600,
            used: 42,
        };
        let record = encode(&(demand.clone(), window));
        assert_eq!(
            String::from_utf8(record.clone()).unwrap(),
            "w 3600 42\n7 10000 3000000000 3000000000 100\n"
        );
        assert_eq!(decode(&record), (demand.clone(), window));
        // No window: no first line.
        let record = encode(&(demand.clone(), WindowCount::default()));
        assert!(record.starts_with(b"7 "));
        assert_eq!(decode(&record), (demand, WindowCount::default()));
        assert_eq!(decode(b"garbage\nw x\n1 2\n"), Default::default());
    }

    #[test]
    fn record_names_hide_the_values_and_tell_buckets_apart() {
        let key = |value: &str| {
            BucketKey::from_map(&HashMap::from([("key".to_owned(), value.to_owned())])).unwrap()
        };
        let name = record_name("edge", &key("sk_live_secret"));
        assert!(name.starts_with("rlqs:") && name.len() == 5 + 64);
        assert!(!name.contains("secret"));
        assert_ne!(name, record_name("edge", &key("other")));
        assert_ne!(name, record_name("edge2", &key("sk_live_secret")));
    }
}
