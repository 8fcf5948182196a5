//! The keys most active and most refused lately (`GET /admin/top`), in
//! bounded memory whatever the number of keys. Each worker thread counts
//! into sketches of its own (core's [`HeavyHitters`], space-saving), one
//! pair per clock minute (every request; the refused ones), behind a lock
//! only its own thread and a reader ever take; a read merges the workers'
//! sketches of the minutes asked for. Keys are held as given and shown only
//! as fingerprints. On Redis each gateway counts its own requests.

use std::collections::VecDeque;
use std::sync::Arc;

use parking_lot::Mutex;
use serde::Serialize;
use thread_local::ThreadLocal;
use tollgate_core::{Clock, Counted, Fingerprinter, HeavyHitters, KeySpace};

/// Counters per sketch: a key heavier than a window's requests / 256 is
/// always listed, and a count is at most requests / 256 too high.
pub(crate) const CAPACITY: usize = 256;

/// The longest window, in minutes (the minutes kept).
pub(crate) const MAX_MINUTES: u64 = 60;

const NANOS_PER_MINUTE: u64 = 60_000_000_000;

/// What a key's counter notes when it is taken: the route and tier of the
/// key's first request that minute, and whether it was keyless (then the
/// key is its route budget's: a client address, a header's value).
#[derive(Clone, Debug)]
struct Seen {
    route: Arc<str>,
    tier: Arc<str>,
    keyless: bool,
}

type Sketch = HeavyHitters<Box<str>, Seen>;

/// One minute of one worker.
struct Minute {
    minute: u64,
    active: Sketch,
    refused: Sketch,
}

/// The minutes a worker has counted, oldest first.
#[derive(Default)]
struct Minutes(VecDeque<Minute>);

/// Every worker's counts.
pub(crate) struct TopKeys {
    workers: ThreadLocal<Mutex<Minutes>>,
    clock: Arc<dyn Clock>,
    fingerprints: Fingerprinter,
}

impl std::fmt::Debug for TopKeys {
    fn fmt(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        formatter.debug_struct("TopKeys").finish_non_exhaustive()
    }
}

/// One decided request, as [`TopKeys::record`] counts it.
pub(crate) struct Decided<'a> {
    /// The API key; for a keyless request its route budget's key.
    pub(crate) key: &'a str,
    pub(crate) keyless: bool,
    /// Whether a limit refused it (in shadow mode too).
    pub(crate) refused: bool,
    pub(crate) tier: &'a str,
    pub(crate) route: &'a Arc<str>,
}

/// One listed key.
#[derive(Debug, Serialize, PartialEq, Eq)]
pub(crate) struct Listed {
    /// The key's fingerprint (16 hex digits, as the access log's `key`).
    pub(crate) key: String,
    /// `api_key`, or `keyless` for a route budget's key.
    pub(crate) kind: &'static str,
    /// Its requests (or refusals) in the window: at most `error` too many.
    pub(crate) count: u64,
    pub(crate) error: u64,
    pub(crate) tier: String,
    pub(crate) route: String,
}

/// `GET /admin/top`'s answer.
#[derive(Debug, Serialize)]
pub(crate) struct Top {
    /// The window: this minute and the whole minutes before it.
    pub(crate) window_s: u64,
    /// Requests counted in it.
    pub(crate) requests: u64,
    /// Refusals counted in it.
    pub(crate) refusals: u64,
    /// The most any count may be too high by: requests / 256.
    pub(crate) error_bound: u64,
    pub(crate) most_refused: Vec<Listed>,
    pub(crate) most_active: Vec<Listed>,
}

impl TopKeys {
    /// Counts on `clock`'s minutes; keys shown by `fingerprints`.
    pub(crate) fn new(clock: Arc<dyn Clock>, fingerprints: Fingerprinter) -> Self {
        TopKeys {
            workers: ThreadLocal::new(),
            clock,
            fingerprints,
        }
    }

    /// Counts `decided` in this thread's sketches of this minute.
    pub(crate) fn record(&self, decided: &Decided<'_>) {
        let minute = self.clock.now_nanos() / NANOS_PER_MINUTE;
        let mut minutes = self.workers.get_or_default().lock();
        let current = minutes.now(minute);
        let seen = || {
            (
                Box::from(decided.key),
                Seen {
                    route: Arc::clone(decided.route),
                    tier: Arc::from(decided.tier),
                    keyless: decided.keyless,
                },
            )
        };
        current.active.add(decided.key, 1, seen);
        if decided.refused {
            current.refused.add(decided.key, 1, seen);
        }
    }

    /// The `n` keys most refused and most active over the last `minutes`
    /// minutes (this one included), at most [`MAX_MINUTES`].
    pub(crate) fn top(&self, minutes: u64, n: usize) -> Top {
        let minutes = minutes.clamp(1, MAX_MINUTES);
        let now = self.clock.now_nanos() / NANOS_PER_MINUTE;
        let since = now.saturating_sub(minutes - 1);
        let mut active = Vec::new();
        let mut refused = Vec::new();
        for worker in self.workers.iter() {
            let worker = worker.lock();
            for minute in worker.0.iter().filter(|minute| minute.minute >= since) {
                active.push(minute.active.clone());
                refused.push(minute.refused.clone());
            }
        }
        let requests = active.iter().map(Sketch::total).sum();
        let refusals = refused.iter().map(Sketch::total).sum();
        Top {
            window_s: minutes * 60,
            requests,
            refusals,
            error_bound: requests / CAPACITY as u64,
            most_refused: self.listed(&refused, n),
            most_active: self.listed(&active, n),
        }
    }

    fn listed(&self, sketches: &[Sketch], n: usize) -> Vec<Listed> {
        HeavyHitters::merged(sketches)
            .into_iter()
            .take(n)
            .map(|counted: Counted<Box<str>, Seen>| Listed {
                key: if counted.payload.keyless {
                    self.fingerprints.of_in(KeySpace::Policy, &counted.key)
                } else {
                    self.fingerprints.of(&counted.key)
                }
                .to_string(),
                kind: if counted.payload.keyless {
                    "keyless"
                } else {
                    "api_key"
                },
                count: counted.count,
                error: counted.error,
                tier: counted.payload.tier.to_string(),
                route: counted.payload.route.to_string(),
            })
            .collect()
    }
}

impl Minutes {
    /// The sketches of `minute`, begun if need be, the minutes older than
    /// [`MAX_MINUTES`] dropped.
    fn now(&mut self, minute: u64) -> &mut Minute {
        // A clock read earlier than the last (never on a monotonic clock)
        // counts in the last minute, so the minutes stay in order.
        if self.0.back().is_none_or(|last| last.minute < minute) {
            while self
                .0
                .front()
                .is_some_and(|first| first.minute + MAX_MINUTES <= minute)
            {
                self.0.pop_front();
            }
            self.0.push_back(Minute {
                minute,
                active: HeavyHitters::new(CAPACITY),
                refused: HeavyHitters::new(CAPACITY),
            });
        }
        let last = self.0.len() - 1;
        &mut self.0[last]
    }
}
