//! What a replay counts, per tier and per route ([`Tally`]): requests,
//! would-be refusals, the keys most often refused (a space-saving sketch,
//! so memory stays bounded whatever the keys), the peak rates, and the
//! requests allowed and refused per minute (bounded by the log's span in
//! minutes, not by its lines).

use std::collections::BTreeMap;

use serde::Serialize;
use tollgate_core::{Fingerprinter, HeavyHitters, KeySpace};

/// Counters of the keys most refused in one group.
const KEYS_KEPT: usize = 1000;

const NANOS_PER_SECOND: u64 = 1_000_000_000;

/// One group's counts (a tier, a route, or all requests).
pub(crate) struct Tally {
    requests: u64,
    refused: u64,
    refused_keys: HeavyHitters<String, bool>,
    /// The second being counted, its requests, and the most in one so far.
    second: (u64, u64, u64),
    minute: (u64, u64, u64),
    over_time: OverTime,
}

impl Default for Tally {
    fn default() -> Self {
        Tally {
            requests: 0,
            refused: 0,
            refused_keys: HeavyHitters::new(KEYS_KEPT),
            second: (u64::MAX, 0, 0),
            minute: (u64::MAX, 0, 0),
            over_time: OverTime::default(),
        }
    }
}

/// A key most often refused.
#[derive(Debug, Serialize, PartialEq, Eq)]
pub struct RefusedKey {
    /// Its fingerprint (a keyless request's route budget key's).
    pub key: String,
    /// Its refusals: at most `error` too many.
    pub refused: u64,
    /// The most `refused` may exceed the truth by (0 with fewer than 1,000
    /// keys refused in the group).
    pub error: u64,
}

/// One group's figures.
#[derive(Debug, Serialize, PartialEq)]
pub struct Figures {
    /// Requests replayed.
    pub requests: u64,
    /// Requests the configuration would refuse.
    pub refused: u64,
    /// `refused / requests`, in percent to two places.
    pub refused_percent: f64,
    /// The most requests in one second (aligned to the epoch).
    pub peak_per_second: u64,
    /// The most requests in one minute (aligned to the epoch).
    pub peak_per_minute: u64,
    /// The keys most often refused, most first.
    pub most_refused: Vec<RefusedKey>,
    /// Requests allowed and refused per minute, in time order: `(minute
    /// since the epoch, allowed, refused)`, minutes without a request left
    /// out.
    pub per_minute: Vec<(u64, u64, u64)>,
}

impl Tally {
    /// Counts one request at `time` (nanoseconds), refused or not, of `key`
    /// (keyless: a route budget's key).
    pub(crate) fn count(&mut self, time: u64, refused: bool, key: Option<(&str, bool)>) {
        self.requests += 1;
        let second = time / NANOS_PER_SECOND;
        for (slot, unit) in [(&mut self.second, second), (&mut self.minute, second / 60)] {
            if slot.0 != unit {
                *slot = (unit, 0, slot.2);
            }
            slot.1 += 1;
            slot.2 = slot.2.max(slot.1);
        }
        self.over_time.count(time, refused);
        if refused {
            self.refused += 1;
            if let Some((key, keyless)) = key {
                self.refused_keys.add(key, 1, || (key.to_owned(), keyless));
            }
        }
    }

    /// The figures, the keys shown by `fingerprints` (`most` of them).
    pub(crate) fn figures(
        &self,
        fingerprints: &Fingerprinter,
        keys_are_fingerprints: bool,
        most: usize,
    ) -> Figures {
        let most_refused = HeavyHitters::merged([&self.refused_keys])
            .into_iter()
            .take(most)
            .map(|counted| RefusedKey {
                key: if counted.payload {
                    fingerprints
                        .of_in(KeySpace::Policy, &counted.key)
                        .to_string()
                } else if keys_are_fingerprints && is_fingerprint(&counted.key) {
                    counted.key
                } else {
                    fingerprints.of(&counted.key).to_string()
                },
                refused: counted.count,
                error: counted.error,
            })
            .collect();
        Figures {
            requests: self.requests,
            refused: self.refused,
            refused_percent: percent(self.refused, self.requests),
            peak_per_second: self.second.2,
            peak_per_minute: self.minute.2,
            most_refused,
            per_minute: self
                .over_time
                .0
                .iter()
                .map(|(minute, (allowed, refused))| (*minute, *allowed, *refused))
                .collect(),
        }
    }
}

/// Whether `key` looks like a fingerprint (16 hex digits): a tollgate log's
/// `key` that does not (an edited or foreign log) is fingerprinted too, so
/// no plain key reaches a report.
fn is_fingerprint(key: &str) -> bool {
    key.len() == 16 && key.bytes().all(|b| b.is_ascii_hexdigit())
}

/// `part / whole` in percent, to two places; 0 of nothing is 0.
pub(crate) fn percent(part: u64, whole: u64) -> f64 {
    if whole == 0 {
        return 0.0;
    }
    (part as f64 * 10_000.0 / whole as f64).round() / 100.0
}

/// Requests allowed and refused per minute (since the epoch).
#[derive(Default)]
struct OverTime(BTreeMap<u64, (u64, u64)>);

impl OverTime {
    fn count(&mut self, time: u64, refused: bool) {
        let minute = self.0.entry(time / (60 * NANOS_PER_SECOND)).or_default();
        if refused {
            minute.1 += 1;
        } else {
            minute.0 += 1;
        }
    }
}
