//! Which [`Batcher`] a request on one Redis server queues at: on a thread
//! that runs a single-threaded event loop (the gateway's workers, `tollgate
//! rls`'s gRPC workers, a `#[tokio::test]`), that thread's own batcher, on a
//! connection of its own, both started there on the thread's first request;
//! on a multi-threaded runtime, one batcher shared by all its threads.
//!
//! A request then never changes threads on its way to Redis and back: its
//! caller, the batcher, the call and the connection's task all run on the
//! caller's event loop, with no wake-up of another thread between them. On
//! a shared batcher each of those hand-overs can wake a sleeping thread, which
//! cost `tollgate rls` a quarter of its CPU time per call (see
//! docs/PERFORMANCE.md). A batcher whose event loop has ended (its runtime
//! shut down) is started again on the thread's next request, and so is every
//! thread's after [`Renewals::renew`]: the policy-sync task calls it when its
//! channel closes and when it is back after an outage, so that after a Redis
//! restart no thread sends its next call on a connection Redis has closed
//! (the redis crate reconnects only after a call has failed on it).

use std::cell::RefCell;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, OnceLock};
use std::time::Duration;

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
    /// The connection of the shared batcher.
    pub(crate) connection: Connection,
    /// Where each thread's own connection goes, with its timeout and the CA
    /// certificates (PEM) of a TLS server when given.
    pub(crate) target: Target,
    pub(crate) timeout: Duration,
    pub(crate) root_certificates: Option<Vec<u8>>,
    pub(crate) script: Arc<Script>,
    pub(crate) clock: Arc<RedisClock>,
    pub(crate) now: Arc<dyn Fn() -> String + Send + Sync>,
    pub(crate) minimum_ttl: u64,
    pub(crate) renewals: Renewals,
}

/// The batchers of a store on one Redis server.
pub(crate) struct Batchers {
    parts: BatcherParts,
    /// Started on the first request from a multi-threaded runtime.
    shared: OnceLock<Batcher>,
    /// Each single-threaded event loop's own, with the count of renewals
    /// when it was started.
    per_thread: ThreadLocal<RefCell<Option<(u64, Batcher)>>>,
}

impl Batchers {
    /// No batcher started yet.
    pub(crate) fn new(parts: BatcherParts) -> Self {
        Batchers {
            parts,
            shared: OnceLock::new(),
            per_thread: ThreadLocal::new(),
        }
    }

    /// The batcher of the calling thread's runtime, started now if it is not
    /// (or no longer) running. Must be called inside a Tokio runtime.
    pub(crate) fn current(&self) -> Batcher {
        let single_threaded = Handle::try_current()
            .is_ok_and(|handle| handle.runtime_flavor() == RuntimeFlavor::CurrentThread);
        if !single_threaded {
            return self
                .shared
                .get_or_init(|| self.start(self.parts.connection.clone()))
                .clone();
        }
        let slot = self.per_thread.get_or(|| RefCell::new(None));
        let mut slot = slot.borrow_mut();
        let renewals = self.parts.renewals.count();
        match &*slot {
            Some((started, batcher)) if *started == renewals && !batcher.is_closed() => {
                batcher.clone()
            }
            _ => {
                // A connection of this thread's own: its task runs on this
                // event loop. Opening one only parses what `connect` parsed
                // already (it connects on the first call), so it does not
                // fail; should it, the shared connection serves.
                let connection = Connection::open_with(
                    &self.parts.target,
                    self.parts.timeout,
                    self.parts.root_certificates.as_deref(),
                )
                .map_or_else(
                    |_| self.parts.connection.clone(),
                    |(connection, _)| connection,
                );
                let batcher = self.start(connection);
                *slot = Some((renewals, batcher.clone()));
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
            self.parts.minimum_ttl,
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
            minimum_ttl: 0,
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
    fn a_thread_whose_event_loop_ended_or_whose_connections_were_renewed_gets_a_new_batcher() {
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
        assert!(!second.is_closed());
        assert!(second.same_queue(&runtime.block_on(async { batchers.current() })));
        // Renewed: a new one, on a new connection.
        batchers.parts.renewals.renew();
        let third = runtime.block_on(async { batchers.current() });
        assert!(!second.same_queue(&third));
        assert!(third.same_queue(&runtime.block_on(async { batchers.current() })));
    }
}
