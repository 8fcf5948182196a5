//! Which [`Batcher`] a request on one Redis server queues at: on a thread
//! that runs a single-threaded event loop (the gateway's workers, `tollgate
//! rls`'s gRPC workers, a `#[tokio::test]`), that event loop's own batcher, on
//! a connection of its own, both started there on its first request; on a
//! multi-threaded runtime, one batcher shared by all its threads, on the
//! store's first connection.
//!
//! A request on an event loop then never changes threads on its way to Redis
//! and back: its caller, the batcher, the call and the connection's task all
//! run there, with no wake-up of another thread between them. Sharing one
//! connection among the event loops instead cost `tollgate rls` 2 µs of its
//! 13 µs per call on Redis (see docs/PERFORMANCE.md). A batcher whose event
//! loop has ended (its runtime shut down) is started again on the thread's
//! next request, and so is every event loop's after [`Renewals::renew`]: the
//! policy-sync task calls it when its channel closes and when it is back
//! after an outage, so that after a Redis restart no event loop sends its
//! next call on a connection Redis has closed (the redis crate reconnects
//! only after a call has failed on it; the shared connection is kept
//! reconnected by the policy-sync task's own calls).

use std::cell::RefCell;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use parking_lot::Mutex;
use redis::Script;
use thread_local::ThreadLocal;
use tokio::runtime::{Handle, RuntimeFlavor};

use crate::batch::Batcher;
use crate::connection::{Connection, Target};
use crate::context::redis_clock::RedisClock;

/// How many times the store's connections were found dropped; cheap to clone
/// (the clones count together).
#[derive(Clone, Debug, Default)]
pub(crate) struct Renewals(Arc<AtomicU64>);

impl Renewals {
    /// Every thread's batcher is started again, on a new connection, on that
    /// thread's next request.
    pub(crate) fn renew(&self) {
        self.0.fetch_add(1, Ordering::Relaxed);
    }

    fn count(&self) -> u64 {
        self.0.load(Ordering::Relaxed)
    }
}

/// What a batcher is started with.
pub(crate) struct BatcherParts {
    /// The connection of the shared batcher (the store's first connection).
    pub(crate) connection: Connection,
    /// Where each thread's own connection goes.
    pub(crate) target: Target,
    /// The timeout of each connection attempt and response.
    pub(crate) timeout: Duration,
    /// The CA certificates (PEM) a TLS server's certificate must chain to,
    /// when given.
    pub(crate) root_certificates: Option<Vec<u8>>,
    /// The acquire script.
    pub(crate) script: Arc<Script>,
    /// Redis's clock, for the calls' deadlines.
    pub(crate) clock: Arc<RedisClock>,
    /// Each call's time as the script takes it.
    pub(crate) now: Arc<dyn Fn() -> String + Send + Sync>,
    /// The shortest TTL of a state key, in microseconds.
    pub(crate) minimum_ttl_us: u64,
    /// When every thread's batcher is to be made anew.
    pub(crate) renewals: Renewals,
}

/// A batcher and what it was started for: the runtime whose event loop runs
/// it, and the count of renewals then.
struct Started {
    runtime: tokio::runtime::Id,
    renewals: u64,
    batcher: Batcher,
}

/// The batchers of a store on one Redis server.
pub(crate) struct Batchers {
    parts: BatcherParts,
    /// Started on the first request from a multi-threaded runtime (again
    /// if that runtime has shut down); on the store's first connection,
    /// which the policy-sync task's own calls keep reconnected, so it is not
    /// renewed.
    shared: Mutex<Option<Batcher>>,
    /// Each single-threaded event loop's own.
    per_thread: ThreadLocal<RefCell<Option<Started>>>,
}

impl Batchers {
    /// No batcher started yet.
    pub(crate) fn new(parts: BatcherParts) -> Self {
        Batchers {
            parts,
            shared: Mutex::new(None),
            per_thread: ThreadLocal::new(),
        }
    }

    /// The batcher of the calling thread's runtime, started now if it is not
    /// (or no longer) running. Must be called inside a Tokio runtime.
    pub(crate) fn current(&self) -> Batcher {
        let single_threaded = Handle::try_current()
            .ok()
            .filter(|handle| handle.runtime_flavor() == RuntimeFlavor::CurrentThread);
        let Some(handle) = single_threaded else {
            let mut shared = self.shared.lock();
            return match &*shared {
                Some(batcher) if !batcher.is_closed() => batcher.clone(),
                _ => {
                    let batcher = self.start(self.parts.connection.clone());
                    *shared = Some(batcher.clone());
                    batcher
                }
            };
        };
        let slot = self.per_thread.get_or(|| RefCell::new(None));
        let mut slot = slot.borrow_mut();
        let runtime = handle.id();
        let renewals = self.parts.renewals.count();
        match &*slot {
            // Another runtime on this thread (one after another, or two
            // alive and run in turn) gets a batcher of its own.
            Some(started)
                if started.runtime == runtime
                    && started.renewals == renewals
                    && !started.batcher.is_closed() =>
            {
                started.batcher.clone()
            }
            _ => {
                // A connection of this thread's own: its task runs on this
                // event loop. Opening one only parses what `connect` parsed
                // already (it connects on the first call), so it does not
                // fail; should it, the shared connection serves.
                let connection = match Connection::open_with(
                    &self.parts.target,
                    self.parts.timeout,
                    self.parts.root_certificates.as_deref(),
                ) {
                    Ok((connection, _)) => connection,
                    Err(error) => {
                        tracing::warn!(%error, "cannot open a Redis connection for this thread; \
                            using the shared one");
                        self.parts.connection.clone()
                    }
                };
                let batcher = self.start(connection);
                *slot = Some(Started {
                    runtime,
                    renewals,
                    batcher: batcher.clone(),
                });
                batcher
            }
        }
    }

    fn start(&self, connection: Connection) -> Batcher {
        Batcher::start(
            connection,
            Arc::clone(&self.parts.script),
            Arc::clone(&self.parts.clock),
            Arc::clone(&self.parts.now),
            self.parts.minimum_ttl_us,
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Batchers whose shared connection is made on `runtime` (a connection
    /// starts a task as it is made).
    fn batchers(runtime: &tokio::runtime::Runtime) -> Batchers {
        let _inside = runtime.enter();
        // Nothing listens on port 1: no test here sends a request.
        let target = Target::parse("redis://127.0.0.1:1").unwrap();
        let timeout = Duration::from_millis(50);
        let (connection, _) = Connection::open(&target, timeout).unwrap();
        Batchers::new(BatcherParts {
            connection,
            target,
            timeout,
            root_certificates: None,
            script: Arc::new(crate::script::acquire()),
            clock: Arc::new(RedisClock::new(timeout)),
            now: Arc::new(String::new),
            minimum_ttl_us: 0,
            renewals: Renewals::default(),
        })
    }

    #[test]
    fn each_event_loop_thread_has_its_own_batcher_and_a_runtime_of_many_threads_shares_one() {
        let many = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .enable_all()
            .build()
            .unwrap();
        let batchers = Arc::new(batchers(&many));
        let single = || {
            tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .unwrap()
        };
        let on_a_thread = |batchers: Arc<Batchers>| {
            std::thread::spawn(move || {
                single().block_on(async move {
                    let first = batchers.current();
                    assert!(first.same_queue(&batchers.current()), "one per thread");
                    first
                })
            })
            .join()
            .unwrap()
        };
        let a = on_a_thread(Arc::clone(&batchers));
        let b = on_a_thread(Arc::clone(&batchers));
        assert!(!a.same_queue(&b), "each thread its own");
        let (c, d) = many.block_on({
            let batchers = Arc::clone(&batchers);
            async move {
                let other = Arc::clone(&batchers);
                let elsewhere = tokio::spawn(async move { other.current() });
                (batchers.current(), elsewhere.await.unwrap())
            }
        });
        assert!(c.same_queue(&d), "one for the runtime");
        assert!(!c.same_queue(&a));
    }

    #[test]
    fn an_event_loop_ended_another_on_the_thread_or_a_renewal_gets_a_new_batcher() {
        let single = || {
            tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .unwrap()
        };
        let runtime = single();
        let batchers = batchers(&runtime);
        let first = single().block_on(async { batchers.current() });
        // That runtime is gone, and its batcher's task with it.
        assert!(first.is_closed());
        let second = runtime.block_on(async { batchers.current() });
        assert!(!first.same_queue(&second));
        // Another runtime alive on the same thread gets its own.
        let other = single();
        let elsewhere = other.block_on(async { batchers.current() });
        assert!(!elsewhere.same_queue(&second));
        let second = runtime.block_on(async { batchers.current() });
        assert!(!second.is_closed());
        assert!(second.same_queue(&runtime.block_on(async { batchers.current() })));
        // Renewed: a new one, on a new connection.
        batchers.parts.renewals.renew();
        let third = runtime.block_on(async { batchers.current() });
        assert!(!second.same_queue(&third));
        assert!(third.same_queue(&runtime.block_on(async { batchers.current() })));
    }
}
