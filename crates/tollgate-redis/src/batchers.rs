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
//! 13 µs per call on Redis (see docs/performance/history.md). A batcher whose event
//! loop has ended (its runtime shut down) is started again on the thread's
//! next request, and so is every event loop's after [`Renewals::renew`]: the
//! policy-sync task calls it when its channel closes and when it is back
//! after an outage, so that after a Redis restart no event loop sends its
//! next call on a connection Redis has closed (the redis crate reconnects
//! only after a call has failed on it; the shared connection is kept
//! reconnected by the policy-sync task's own calls).

use parking_lot::Mutex;
use std::cell::RefCell;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use thread_local::ThreadLocal;
use tokio::runtime::{Handle, RuntimeFlavor};

use crate::batch::Batcher;
use crate::connection::{Connection, Target};
use crate::context::Context;

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

/// What a batcher is started with beside the store's [`Context`] (its
/// connection, the shared batcher's; its script, clock, time and timeout).
pub(crate) struct BatcherParts {
    /// Where each thread's own connection goes.
    pub(crate) target: Target,
    /// The CA certificates (PEM) a TLS server's certificate must chain to,
    /// when given.
    pub(crate) root_certificates: Option<Vec<u8>>,
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

    /// The batcher of the calling thread's runtime for the store of
    /// `context`, started now if it is not (or no longer) running. Must be
    /// called inside a Tokio runtime.
    pub(crate) fn current(&self, context: &Context) -> Batcher {
        let single_threaded = Handle::try_current()
            .ok()
            .filter(|handle| handle.runtime_flavor() == RuntimeFlavor::CurrentThread);
        let Some(handle) = single_threaded else {
            let mut shared = self.shared.lock();
            return match &*shared {
                Some(batcher) if !batcher.is_closed() => batcher.clone(),
                _ => {
                    let batcher = self.start(context, context.connection.clone());
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
                    context.timeout,
                    self.parts.root_certificates.as_deref(),
                ) {
                    Ok((connection, _)) => connection,
                    Err(error) => {
                        tracing::warn!(%error, "cannot open a Redis connection for this thread; \
                            using the shared one");
                        context.connection.clone()
                    }
                };
                let batcher = self.start(context, connection);
                *slot = Some(Started {
                    runtime,
                    renewals,
                    batcher: batcher.clone(),
                });
                batcher
            }
        }
    }

    fn start(&self, context: &Context, connection: Connection) -> Batcher {
        Batcher::start(
            connection,
            Arc::clone(&context.acquire),
            Arc::clone(&context.clock),
            Arc::clone(&context.now),
            self.parts.minimum_ttl_us,
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Batchers, and the context of their store, whose connection is made on
    /// `runtime` (a connection starts a task as it is made).
    fn batchers(runtime: &tokio::runtime::Runtime) -> (Batchers, Context) {
        let _inside = runtime.enter();
        // Nothing listens on port 1: no test here sends a request.
        let target = Target::parse("redis://127.0.0.1:1").unwrap();
        let timeout = std::time::Duration::from_millis(50);
        let (connection, _) = Connection::open(&target, timeout).unwrap();
        let limits = tollgate_core::LimiterConfig::default();
        let plans = crate::plans::Plans::new(&limits, &limits.default_plan(), 0).unwrap();
        let context = Context::new(
            connection,
            "test".to_owned(),
            None,
            timeout,
            Arc::new(String::new),
            Arc::new(arc_swap::ArcSwap::from_pointee(plans)),
        );
        let batchers = Batchers::new(BatcherParts {
            target,
            root_certificates: None,
            minimum_ttl_us: 0,
            renewals: Renewals::default(),
        });
        (batchers, context)
    }

    #[test]
    fn each_event_loop_thread_has_its_own_batcher_and_a_runtime_of_many_threads_shares_one() {
        let many = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .enable_all()
            .build()
            .unwrap();
        let (batchers, context) = batchers(&many);
        let batchers = Arc::new((batchers, context));
        let single = || {
            tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .unwrap()
        };
        let on_a_thread = |store: Arc<(Batchers, Context)>| {
            std::thread::spawn(move || {
                single().block_on(async move {
                    let (batchers, context) = &*store;
                    let first = batchers.current(context);
                    assert!(
                        first.same_queue(&batchers.current(context)),
                        "one per thread"
                    );
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
            let store = Arc::clone(&batchers);
            async move {
                let other = Arc::clone(&store);
                let elsewhere = tokio::spawn(async move { other.0.current(&other.1) });
                (store.0.current(&store.1), elsewhere.await.unwrap())
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
        let (batchers, context) = batchers(&runtime);
        let first = single().block_on(async { batchers.current(&context) });
        // That runtime is gone, and its batcher's task with it.
        assert!(first.is_closed());
        let second = runtime.block_on(async { batchers.current(&context) });
        assert!(!first.same_queue(&second));
        // Another runtime alive on the same thread gets its own.
        let other = single();
        let elsewhere = other.block_on(async { batchers.current(&context) });
        assert!(!elsewhere.same_queue(&second));
        let second = runtime.block_on(async { batchers.current(&context) });
        assert!(!second.is_closed());
        assert!(second.same_queue(&runtime.block_on(async { batchers.current(&context) })));
        // Renewed: a new one, on a new connection.
        batchers.parts.renewals.renew();
        let third = runtime.block_on(async { batchers.current(&context) });
        assert!(!second.same_queue(&third));
        assert!(third.same_queue(&runtime.block_on(async { batchers.current(&context) })));
    }
}
