//! The server's shared state: the allocator behind one lock, and each open
//! stream's queue of outgoing messages, so that answers to reports, the
//! abandons of idle buckets and a reload's new limits reach their streams.
//!
//! Reports arrive every few seconds per Envoy, so one lock over the
//! allocator is no bottleneck (bench/rlqs.sh measures the reports a second
//! it holds); no lock is held across an await.

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
    clock: Arc<dyn Clock>,
}

impl Quotas {
    /// No stream yet; limits from `config`, time from `clock`.
    pub fn new(
        settings: AllocatorSettings,
        config: Option<Arc<RateLimitConfig>>,
        clock: Arc<dyn Clock>,
    ) -> Arc<Quotas> {
        Arc::new(Quotas {
            allocator: Mutex::new(Allocator::new(settings, config)),
            streams: Mutex::new(HashMap::new()),
            next_stream: AtomicU64::new(1),
            dropped: AtomicU64::new(0),
            clock,
        })
    }

    /// Opens a stream: its number and the queue its messages go to.
    pub fn open(&self, outgoing: Outgoing) -> u64 {
        let stream = self.next_stream.fetch_add(1, Ordering::Relaxed);
        self.streams.lock().insert(stream, outgoing);
        stream
    }

    /// Closes `stream`: its parts return to the others at once.
    pub fn close(&self, stream: u64) {
        self.streams.lock().remove(&stream);
        let pushes = self.allocator.lock().close(stream);
        self.push(pushes);
    }

    /// The answers to `stream`'s report of `usages` in `domain`, now; the
    /// parts the report freed are sent to the other streams waiting for
    /// them.
    pub fn report(&self, stream: u64, domain: &str, usages: &[Usage]) -> Vec<BucketAnswer> {
        let now = self.clock.now_nanos();
        let (answers, pushes) = self.allocator.lock().report(stream, domain, usages, now);
        self.push(pushes);
        answers
    }

    /// Counts a malformed report.
    pub fn refused(&self, domain: &str) {
        self.allocator.lock().refused(domain);
    }

    /// Sends the abandons of every bucket idle now.
    pub fn abandon_idle(&self) {
        let now = self.clock.now_nanos();
        let abandons = self.allocator.lock().take_idle(now);
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
