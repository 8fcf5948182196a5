//! The server's shared state: the allocator behind one lock, and each open
//! stream's queue of outgoing messages, so that answers to reports, the
//! abandons of idle buckets and a reload's new limits reach their streams.
//!
//! Reports arrive every few seconds per Envoy, so one lock over the
//! allocator is no bottleneck; no lock is held across an await. With a
//! shared store ([`SharedState`], Redis), a report reads its buckets'
//! records first and writes them back after (see `shared.rs`); when the
//! store fails or stalls, the report is answered with nothing: the
//! assignments already sent run until their TTL, and none is sent that the
//! store does not back.

mod shared;

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use envoy_types::pb::envoy::service::rate_limit_quota::v3::RateLimitQuotaResponse;
use parking_lot::Mutex;
use tokio::sync::mpsc;
use tollgate_core::Clock;
use tollgate_rls::RateLimitConfig;

use crate::allocator::{
    Allocator, AllocatorSettings, BucketAnswer, BucketSnapshot, DomainCounters, Usage,
};
use crate::convert::response;
use crate::shared::{SharedState, record_name};

/// How many messages may wait for a stream that does not read: past them a
/// message is dropped (counted), the next report bringing a fresh answer.
pub const STREAM_QUEUE: usize = 64;

/// A stream's outgoing queue.
pub type Outgoing = mpsc::Sender<Result<RateLimitQuotaResponse, tonic::Status>>;

/// The allocator and the open streams (see the module's notes).
pub struct Quotas {
    allocator: Mutex<Allocator>,
    streams: Mutex<HashMap<u64, Outgoing>>,
    next_stream: AtomicU64,
    dropped: AtomicU64,
    refused_streams: AtomicU64,
    store_failures: AtomicU64,
    /// Bumped by every reload: a report with a shared store whose answers
    /// were made before a reload drops them (the reload's pushes stand).
    generation: AtomicU64,
    max_streams: usize,
    clock: Arc<dyn Clock>,
    shared: Option<SharedState>,
}

impl Quotas {
    /// No stream yet; limits from `config`, time from `clock`.
    pub fn new(
        settings: AllocatorSettings,
        config: Option<Arc<RateLimitConfig>>,
        clock: Arc<dyn Clock>,
    ) -> Arc<Quotas> {
        Quotas::shared(settings, config, clock, None)
    }

    /// [`Quotas::new`], each bucket's streams kept in `shared` when given;
    /// streams numbered from a prefix of this replica's own.
    pub fn shared(
        settings: AllocatorSettings,
        config: Option<Arc<RateLimitConfig>>,
        clock: Arc<dyn Clock>,
        shared: Option<SharedState>,
    ) -> Arc<Quotas> {
        let allocator = Allocator::new(settings, config);
        let allocator = if shared.is_some() {
            allocator.kept_in_a_shared_store()
        } else {
            allocator
        };
        Arc::new(Quotas {
            allocator: Mutex::new(allocator),
            streams: Mutex::new(HashMap::new()),
            next_stream: AtomicU64::new((u64::from(replica_prefix()) << 32) | 1),
            dropped: AtomicU64::new(0),
            refused_streams: AtomicU64::new(0),
            store_failures: AtomicU64::new(0),
            generation: AtomicU64::new(0),
            max_streams: settings.max_streams,
            clock,
            shared,
        })
    }

    /// Opens a stream: its number and the queue its messages go to; `None`
    /// past [`AllocatorSettings::max_streams`] open streams.
    pub fn open(&self, outgoing: Outgoing) -> Option<u64> {
        let mut streams = self.streams.lock();
        if streams.len() >= self.max_streams {
            if self.refused_streams.fetch_add(1, Ordering::Relaxed) == 0 {
                tracing::warn!(
                    max_streams = self.max_streams,
                    "a stream refused: TOLLGATE_RLQS_MAX_STREAMS streams are open \
                     (its Envoy applies its no-assignment behaviour)"
                );
            }
            return None;
        }
        let stream = self.next_stream.fetch_add(1, Ordering::Relaxed);
        streams.insert(stream, outgoing);
        Some(stream)
    }

    /// Whether `stream` is open here.
    pub fn is_open(&self, stream: u64) -> bool {
        self.streams.lock().contains_key(&stream)
    }

    /// Closes `stream`: its parts return to the others at once (with a
    /// shared store, the stream leaves its buckets' records, and the other
    /// streams take its parts at their next report).
    pub async fn close(&self, stream: u64) {
        self.streams.lock().remove(&stream);
        let held = self.allocator.lock().buckets_of(stream);
        {
            let mut allocator = self.allocator.lock();
            let pushes = allocator.close(stream);
            self.push(pushes);
        }
        if let Some(shared) = &self.shared {
            for (domain, key) in held {
                self.leave_record(shared, &record_name(&domain, &key), stream)
                    .await;
            }
        }
    }

    /// Answers `stream`'s report of `usages` in `domain`, now, on its queue,
    /// and gives the answers; the parts the report freed are sent to the
    /// other streams waiting for them. With a shared store, a bucket whose
    /// record cannot be written (the store failed, or stayed in conflict)
    /// gets no answer. Answers are queued under the allocator's lock, so
    /// that a reload's pushes are never overtaken by an older answer.
    pub async fn report(&self, stream: u64, domain: &str, usages: &[Usage]) -> Vec<BucketAnswer> {
        self.allocator.lock().count_reported(domain, usages);
        let Some(shared) = &self.shared else {
            let now = self.clock.now_nanos();
            let mut allocator = self.allocator.lock();
            let (answers, pushes) = allocator.report(stream, domain, usages, now);
            self.push(pushes);
            self.answer(stream, &answers);
            return answers;
        };
        self.report_shared(shared, stream, domain, usages).await
    }

    /// Counts a malformed report.
    pub fn refused(&self, domain: &str) {
        self.allocator.lock().refused(domain);
    }

    /// Sends the abandons of every bucket idle now (with a shared store,
    /// this server's abandoned streams leave their records).
    pub async fn abandon_idle(&self) {
        let now = self.clock.now_nanos();
        let abandoned = {
            let mut allocator = self.allocator.lock();
            let (pushes, abandoned) = allocator.take_idle(now);
            self.push(pushes);
            abandoned
        };
        if let Some(shared) = &self.shared {
            for (stream, domain, key) in abandoned {
                self.leave_record(shared, &record_name(&domain, &key), stream)
                    .await;
            }
        }
    }

    /// Puts `config` in force and sends the new limits (with a shared
    /// store, a bucket whose shared limit changed is split again in its
    /// record first).
    pub async fn reload(&self, config: Option<Arc<RateLimitConfig>>) {
        let reshares = {
            let mut allocator = self.allocator.lock();
            self.generation.fetch_add(1, Ordering::AcqRel);
            let (pushes, reshares) = allocator.reload(config);
            self.push(pushes);
            reshares
        };
        if let Some(shared) = &self.shared {
            for reshare in reshares {
                self.reshare(shared, &reshare).await;
            }
        }
    }

    fn push(&self, messages: BTreeMap<u64, Vec<BucketAnswer>>) {
        if messages.is_empty() {
            return;
        }
        let streams = self.streams.lock();
        for (stream, answers) in messages {
            if let Some(outgoing) = streams.get(&stream) {
                self.send(outgoing, &answers);
            }
        }
    }

    /// Queues `answers` for `stream`; false when the stream is closed (the
    /// server is stopping).
    pub fn answer(&self, stream: u64, answers: &[BucketAnswer]) -> bool {
        let streams = self.streams.lock();
        let Some(outgoing) = streams.get(&stream) else {
            return false;
        };
        self.send(outgoing, answers);
        true
    }

    /// Ends `stream` with `status` (a malformed report).
    pub fn fail(&self, stream: u64, status: tonic::Status) {
        if let Some(outgoing) = self.streams.lock().remove(&stream) {
            let _ = outgoing.try_send(Err(status));
        }
    }

    /// Ends every stream's answers (the server is stopping): each Envoy sees
    /// its stream end and opens a new one, to another replica, at its next
    /// report.
    pub fn end_all(&self) {
        self.streams.lock().clear();
    }

    /// Queues `answers` on `outgoing`, or counts them dropped when its queue
    /// is full.
    fn send(&self, outgoing: &Outgoing, answers: &[BucketAnswer]) {
        if answers.is_empty() {
            return;
        }
        if outgoing.try_send(Ok(response(answers))).is_err() {
            self.dropped.fetch_add(1, Ordering::Relaxed);
        }
    }

    /// Each domain's counters.
    pub fn counters(&self) -> BTreeMap<Arc<str>, DomainCounters> {
        self.allocator.lock().counters()
    }

    /// Reports answered with nothing, and streams not taken out of a
    /// record, because the shared store failed or stayed in conflict.
    pub fn store_failures(&self) -> u64 {
        self.store_failures.load(Ordering::Relaxed)
    }

    /// Streams refused past [`AllocatorSettings::max_streams`].
    pub fn refused_streams(&self) -> u64 {
        self.refused_streams.load(Ordering::Relaxed)
    }

    /// Whether a configuration is loaded (without one, every bucket is
    /// `ALLOW_ALL`).
    pub fn config_loaded(&self) -> bool {
        self.allocator.lock().config().is_some()
    }

    /// Messages dropped because a stream did not read.
    pub fn dropped(&self) -> u64 {
        self.dropped.load(Ordering::Relaxed)
    }

    /// Every bucket, for the debug page.
    pub fn snapshot(&self) -> Vec<BucketSnapshot> {
        self.allocator.lock().snapshot()
    }

    /// The configuration in force, one descriptor a line (`/rlconfig`).
    pub fn config_dump(&self) -> String {
        self.allocator
            .lock()
            .config()
            .map(RateLimitConfig::dump)
            .unwrap_or_default()
    }

    /// The allocator's settings.
    pub fn settings(&self) -> AllocatorSettings {
        *self.allocator.lock().settings()
    }
}

/// A 32-bit number of this replica's own, from the process id and the
/// time it started (no two replicas of one Redis start in the same
/// nanosecond with the same process id).
fn replica_prefix() -> u32 {
    use sha2::{Digest, Sha256};
    let started = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |since| since.as_nanos());
    let mut hash = Sha256::new();
    hash.update(std::process::id().to_be_bytes());
    hash.update(started.to_be_bytes());
    let digest = hash.finalize();
    // Below 2^31, so that ids stay clear of u64's top bit.
    u32::from_be_bytes([digest[0], digest[1], digest[2], digest[3]]) >> 1
}
