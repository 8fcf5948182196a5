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

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use envoy_types::pb::envoy::service::rate_limit_quota::v3::RateLimitQuotaResponse;
use futures_util::future::join_all;
use parking_lot::Mutex;
use tokio::sync::mpsc;
use tollgate_core::Clock;
use tollgate_rls::RateLimitConfig;

use crate::allocator::{
    Allocator, AllocatorSettings, BucketAnswer, BucketSnapshot, DomainCounters, Usage,
};
use crate::bucket::BucketKey;
use crate::convert::response;
use crate::shared::{ATTEMPTS, SharedState, decode, encode, record_name};

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
    store_failures: AtomicU64,
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
        Arc::new(Quotas {
            allocator: Mutex::new(Allocator::new(settings, config)),
            streams: Mutex::new(HashMap::new()),
            next_stream: AtomicU64::new((u64::from(replica_prefix()) << 32) | 1),
            dropped: AtomicU64::new(0),
            store_failures: AtomicU64::new(0),
            clock,
            shared,
        })
    }

    /// Opens a stream: its number and the queue its messages go to.
    pub fn open(&self, outgoing: Outgoing) -> u64 {
        let stream = self.next_stream.fetch_add(1, Ordering::Relaxed);
        self.streams.lock().insert(stream, outgoing);
        stream
    }

    /// Closes `stream`: its parts return to the others at once (with a
    /// shared store, to this replica's streams at once and to the others'
    /// at their next report).
    pub async fn close(&self, stream: u64) {
        self.streams.lock().remove(&stream);
        let held = self.allocator.lock().buckets_of(stream);
        let pushes = self.allocator.lock().close(stream);
        self.push(pushes);
        if let Some(shared) = &self.shared {
            for (domain, key) in held {
                let name = record_name(&domain, &key);
                self.without_stream(shared, &name, stream).await;
            }
        }
    }

    /// Takes `stream` out of the record `name`, by compare-and-set.
    async fn without_stream(&self, shared: &SharedState, name: &str, stream: u64) {
        for _ in 0..ATTEMPTS {
            let Ok(read) = shared.records.get(name).await else {
                self.store_failures.fetch_add(1, Ordering::Relaxed);
                return;
            };
            let Some(read) = read else { return };
            let mut demand = decode(&read);
            if !demand.records().iter().any(|&(id, _)| id == stream) {
                return;
            }
            demand.close(stream);
            let written = shared
                .records
                .compare_and_set(name, Some(&read), &encode(&demand), shared.time_to_live)
                .await;
            match written {
                Ok(true) => return,
                Ok(false) => {}
                Err(_) => {
                    self.store_failures.fetch_add(1, Ordering::Relaxed);
                    return;
                }
            }
        }
    }

    /// The answers to `stream`'s report of `usages` in `domain`, now; the
    /// parts the report freed are sent to the other streams waiting for
    /// them. With a shared store, none when the store fails or stays in
    /// conflict.
    pub async fn report(&self, stream: u64, domain: &str, usages: &[Usage]) -> Vec<BucketAnswer> {
        self.allocator.lock().count_reported(domain, usages);
        let Some(shared) = &self.shared else {
            let now = self.clock.now_nanos();
            let (answers, pushes) = self.allocator.lock().report(stream, domain, usages, now);
            self.push(pushes);
            return answers;
        };
        // Each bucket is tried until its record is written: a bucket whose
        // record another replica wrote in between is tried again alone, so
        // that no report counts twice in a record.
        let mut answered: Vec<Option<BucketAnswer>> = vec![None; usages.len()];
        let mut pending: Vec<usize> = (0..usages.len()).collect();
        for _ in 0..ATTEMPTS {
            if pending.is_empty() {
                break;
            }
            let subset: Vec<Usage> = pending.iter().map(|&index| usages[index].clone()).collect();
            let Ok(results) = self.report_shared(shared, stream, domain, &subset).await else {
                break;
            };
            let mut conflicted = Vec::new();
            for (index, (answer, written)) in pending.iter().zip(results) {
                if written {
                    answered[*index] = Some(answer);
                } else {
                    conflicted.push(*index);
                }
            }
            pending = conflicted;
        }
        if !pending.is_empty() {
            self.store_failures.fetch_add(1, Ordering::Relaxed);
        }
        answered.into_iter().flatten().collect()
    }

    /// One attempt at a report with a shared store: each bucket's answer and
    /// whether its record was written (false: another replica wrote it in
    /// between); `Err` when the store failed. The records are read, and
    /// written, all at once.
    async fn report_shared(
        &self,
        shared: &SharedState,
        stream: u64,
        domain: &str,
        usages: &[Usage],
    ) -> Result<Vec<(BucketAnswer, bool)>, ()> {
        let names: Vec<String> = usages
            .iter()
            .map(|(key, _)| record_name(domain, key))
            .collect();
        let records = join_all(names.iter().map(|name| shared.records.get(name))).await;
        let records: Vec<Option<Vec<u8>>> = records
            .into_iter()
            .collect::<Result<_, _>>()
            .map_err(|_| ())?;
        let now = self.clock.now_nanos();
        let (answers, pushes, writes) = {
            let mut allocator = self.allocator.lock();
            for ((key, _), record) in usages.iter().zip(&records) {
                let demand = record.as_deref().map(decode).unwrap_or_default();
                allocator.keep(domain, key, demand);
            }
            let (answers, pushes) = allocator.report(stream, domain, usages, now);
            let writes: Vec<Option<Vec<u8>>> = usages
                .iter()
                .map(|(key, _)| {
                    allocator
                        .shared_demand(domain, key)
                        .map(|demand| encode(&demand))
                })
                .collect();
            (answers, pushes, writes)
        };
        let written = join_all(names.iter().zip(&records).zip(&writes).map(
            |((name, record), new)| async move {
                match new {
                    None => Ok(true),
                    Some(new) => {
                        shared
                            .records
                            .compare_and_set(name, record.as_deref(), new, shared.time_to_live)
                            .await
                    }
                }
            },
        ))
        .await;
        let written: Vec<bool> = written
            .into_iter()
            .collect::<Result<_, _>>()
            .map_err(|_| ())?;
        // Parts pushed to other streams only from the records written.
        let conflicted: Vec<&BucketKey> = usages
            .iter()
            .zip(&written)
            .filter(|(_, written)| !**written)
            .map(|((key, _), _)| key)
            .collect();
        let pushes = pushes
            .into_iter()
            .map(|(stream, answers)| {
                let kept: Vec<BucketAnswer> = answers
                    .into_iter()
                    .filter(|answer| match answer {
                        BucketAnswer::Assign { bucket, .. } | BucketAnswer::Abandon { bucket } => {
                            !conflicted.contains(&bucket)
                        }
                    })
                    .collect();
                (stream, kept)
            })
            .filter(|(_, answers)| !answers.is_empty())
            .collect();
        self.push(pushes);
        Ok(answers.into_iter().zip(written).collect())
    }

    /// Counts a malformed report.
    pub fn refused(&self, domain: &str) {
        self.allocator.lock().refused(domain);
    }

    /// Sends the abandons of every bucket idle now (with a shared store,
    /// taking this replica's abandoned streams out of its records).
    pub async fn abandon_idle(&self) {
        let now = self.clock.now_nanos();
        let abandons = self.allocator.lock().take_idle(now);
        if let Some(shared) = &self.shared {
            let local: Vec<(u64, BucketKey)> = {
                let streams = self.streams.lock();
                abandons
                    .iter()
                    .filter(|(stream, _)| streams.contains_key(stream))
                    .flat_map(|(&stream, answers)| {
                        answers.iter().filter_map(move |answer| match answer {
                            BucketAnswer::Abandon { bucket } => Some((stream, bucket.clone())),
                            BucketAnswer::Assign { .. } => None,
                        })
                    })
                    .collect()
            };
            let domains = self.allocator.lock().domains();
            for (stream, key) in local {
                for domain in &domains {
                    let name = record_name(domain, &key);
                    self.without_stream(shared, &name, stream).await;
                }
            }
        }
        self.push(abandons);
    }

    /// Puts `config` in force and sends the new limits.
    pub fn reload(&self, config: Option<Arc<RateLimitConfig>>) {
        let pushes = self.allocator.lock().reload(config);
        self.push(pushes);
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
