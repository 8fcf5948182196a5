//! The gateway's shared state: [`App`], what every listener and handler
//! sees, and [`Worker`], what one worker thread's handlers see.

use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use arc_swap::ArcSwap;
use tollgate_core::{SlotStore, Store};
use tollgate_serve::Connections;

use crate::admin::guard::AdminGuard;
use crate::config::InForce;
use crate::observe::access_log::AccessLog;
use crate::proxy::forward::Proxy;
use crate::serve::reloadable::Reloadable;
use crate::serve::tls::ListenerTls;
/// Everything the listeners share.
pub(crate) struct App {
    pub(crate) store: Arc<dyn Store>,
    /// Where concurrency slots (`max_in_flight`) are kept: in memory, or as
    /// leases in the Redis of `[store] url`.
    pub(crate) slots: Arc<dyn SlotStore>,
    /// The requests waiting for their turn (a route's `delay`), per route
    /// and key.
    pub(crate) waiting: Arc<crate::request::delay::WaitingRoom>,
    /// What a reload replaces.
    pub(crate) reloadable: ArcSwap<Reloadable>,
    /// The configuration in force (a reload replaces it; its start-only
    /// settings keep their start values, see [`App::started`]).
    pub(crate) in_force: ArcSwap<InForce>,
    /// The configuration as started: the admin token and the other settings
    /// a reload cannot change are read from here.
    pub(crate) started: InForce,
    /// Set once shutdown has begun: `/readyz` answers 503.
    pub(crate) draining: AtomicBool,
    /// The file to read again on SIGHUP.
    pub(crate) config_path: Option<PathBuf>,
    /// The Redis URL given outside the file, which stands for the file's.
    pub(crate) store_url: Option<String>,
    /// Failed admin calls, limited per client address.
    pub(crate) admin_guard: AdminGuard,
    /// The gateway listener's TLS, when `[tls]` was set at start.
    pub(crate) listener_tls: Option<ListenerTls>,
    /// The access log, when `[access_log] enabled`.
    pub(crate) access_log: Option<AccessLog>,
    /// The keys most active and most refused lately (`/admin/top`); none
    /// with `[admin] top_keys = false`.
    pub(crate) top_keys: Option<crate::observe::top_keys::TopKeys>,
    /// Every open connection of both listeners, the oldest idle one shed
    /// when a listener runs out of file descriptors.
    pub(crate) connections: Arc<Connections>,
}

impl App {
    /// The admin API's bearer token; `None` refuses every admin call.
    pub(crate) fn admin_token(&self) -> Option<&str> {
        self.started.admin_token.as_deref()
    }

    pub(crate) fn is_draining(&self) -> bool {
        self.draining.load(Ordering::Acquire)
    }
}

/// What one worker thread's handlers see: the shared state, and the worker's
/// own upstream connections.
#[derive(Clone)]
pub(crate) struct Worker {
    pub(crate) app: Arc<App>,
    pub(crate) proxy: Proxy,
}
