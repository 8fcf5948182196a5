//! Starting a gateway ([`start`]) in a few named steps, the handle of a
//! running one ([`Running`]: reload, shutdown), and [`run`], which serves
//! until a signal says stop.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use crate::observe::top_keys::TopKeys;
use arc_swap::ArcSwap;
use axum::Extension;
use axum::extract::ConnectInfo;
use tokio::net::TcpListener;
use tokio::signal::unix::SignalKind;
use tokio::task::JoinHandle;
use tollgate_core::{Clock, Fingerprinter, SlotStore, Store, SystemClock};
use tollgate_serve::shutdown::FORCED_GRACE;
use tollgate_serve::{Connections, Drained, Shutdown, Signals, WorkerThread};

use crate::admin::endpoints;
use crate::admin::guard::AdminGuard;
use crate::app::App;
use crate::config::{InForce, ServeConfig, ServeConfigError};
use crate::observe::access_log::AccessLog;
use crate::observe::metrics;
use crate::serve::error::StartError;
use crate::serve::reloadable::Reloadable;
use crate::serve::tls::ListenerTls;
use crate::serve::{store, workers};

/// How to start a gateway.
pub struct ServeOptions {
    /// The configuration.
    pub config: ServeConfig,
    /// The file it came from, read again on SIGHUP; `None` for the built-in
    /// defaults.
    pub config_path: Option<PathBuf>,
    /// Where time comes from: the system clock, or a manual clock in tests.
    pub clock: Arc<dyn Clock>,
    /// The limit store; `None` builds the in-memory store from the config.
    pub store: Option<Arc<dyn Store>>,
    /// Where concurrency slots are kept; `None` opens what the config
    /// names (memory, or leases in its Redis).
    pub slots: Option<Arc<dyn SlotStore>>,
    /// A Redis URL given outside the file (the command line's `--store`): it
    /// stands for `[store] url` at start and on every reload.
    pub store_url: Option<String>,
}

impl ServeOptions {
    /// Options for `config` read from `config_path`, on the system clock and
    /// the in-memory store.
    pub fn new(config: ServeConfig, config_path: Option<PathBuf>) -> Self {
        ServeOptions {
            config,
            config_path,
            clock: Arc::new(SystemClock::new()),
            store: None,
            slots: None,
            store_url: None,
        }
    }
}

/// A running gateway: its two listeners' addresses, and the handles to reload
/// and stop it.
pub struct Running {
    /// Where clients connect.
    pub address: SocketAddr,
    /// Where the admin API and operations endpoints listen.
    pub admin_address: SocketAddr,
    app: Arc<App>,
    /// Stops the gateway listener's workers: drains, then forces.
    shutdown: Shutdown,
    /// Stops the admin listener, once the workers are done.
    admin_shutdown: Shutdown,
    admin: JoinHandle<()>,
    workers: Vec<WorkerThread>,
}

impl Running {
    /// Reads the configuration file again and puts it in force (what SIGHUP
    /// does); an invalid file changes nothing.
    ///
    /// # Errors
    ///
    /// [`ServeConfigError`] naming the problem.
    pub fn reload(&self) -> Result<(), ServeConfigError> {
        self.app.reload()
    }

    /// The concurrency slots (`max_in_flight`) this gateway holds now, over
    /// every route and key: 0 once no request is in flight.
    pub fn slots_held(&self) -> u64 {
        self.app.slots.held()
    }

    /// The requests waiting for their turn now (a route's `delay`), over
    /// every route and key: 0 once none waits.
    pub fn requests_waiting(&self) -> u64 {
        self.app.waiting.waiting()
    }

    /// The turns booked in the store (a route's or a tier's `delay`, or a
    /// reservation held until a tier's slot is taken) and not yet served
    /// nor given back, over every route and key: 0 once every request with
    /// a turn has been served or has given its units back.
    pub fn turns_booked(&self) -> u64 {
        self.app.waiting.turns_open()
    }

    /// Stops accepting connections and lets in-flight requests finish for
    /// at most the configuration's `drain_timeout` (the one in force: a
    /// reload may have changed it); then closes the connections still open
    /// (`tollgate_serve::Shutdown::drain`). The admin listener stays up
    /// (with `/readyz` answering 503) until the gateway's requests are done.
    /// Returns within `drain_timeout` plus at most three times
    /// `tollgate_serve::shutdown::FORCED_GRACE` (1 s): the forced end, the
    /// access log's last lines, the admin listener's requests.
    pub async fn shutdown(self) {
        self.app.draining.store(true, Ordering::Release);
        // Logged once `/readyz` says so: what reads the log may rely on it.
        tracing::info!("draining in-flight requests");
        let drain_timeout = self.app.in_force.load().config.drain_timeout;
        let workers = self.workers;
        let drained = self
            .shutdown
            .drain_closing_idle(drain_timeout, Some(&self.app.connections), async move {
                for worker in workers {
                    worker.ended().await;
                }
            })
            .await;
        if drained != Drained::InTime {
            tracing::warn!(
                drain_timeout = %humantime::format_duration(drain_timeout),
                "in-flight requests still running after the drain timeout were cut off"
            );
        }
        // The access log's last lines are written: every request's, unless
        // the drain was abandoned (a worker still running may log a line
        // after this, and it is lost). Bounded as the rest of the stop.
        if let Some(access_log) = self.app.access_log.clone() {
            let stopping = tokio::task::spawn_blocking(move || access_log.stop());
            if tokio::time::timeout(FORCED_GRACE, stopping).await.is_err() {
                tracing::warn!("the access log did not finish writing in time");
            }
        }
        // The admin listener drains its requests for at most FORCED_GRACE
        // too (a client holding a half-sent request would hold it for
        // ever), then closes its connections.
        let mut admin = self.admin;
        let drained = self
            .admin_shutdown
            .drain(FORCED_GRACE, async {
                let _ = (&mut admin).await;
            })
            .await;
        if drained == Drained::Abandoned {
            admin.abort();
        }
    }
}

/// Binds both listeners and starts serving: the gateway listener on worker
/// threads of its own, the admin listener on the calling runtime.
///
/// # Errors
///
/// [`StartError`] when the configuration cannot be used, the store cannot be
/// set up or a listener cannot be bound.
pub async fn start(options: ServeOptions) -> Result<Running, StartError> {
    let mut config = options.config;
    config.override_store_url(options.store_url.as_deref());
    if options.store.is_none() {
        crate::check_store_url(&config, options.config_path.as_deref())?;
    }
    let store = match options.store {
        Some(store) => store,
        None => store::open(
            &config,
            Arc::clone(&options.clock),
            options.config_path.as_deref(),
        )?,
    };
    let slots = match options.slots {
        Some(slots) => slots,
        None => store::open_slots(&config, &options.clock)?,
    };
    let known_keys = crate::config::load_known_keys(&config.keys)?;
    if let Some(known) = &known_keys {
        log_known_keys(known, config.keys.unknown);
    }
    let reloadable = Reloadable::build(&config, store.as_ref(), known_keys)?;
    let listener_tls = config.tls.as_ref().map(ListenerTls::new).transpose()?;
    let fingerprints = Fingerprinter::new(config.store.key_secret().as_deref().map(str::as_bytes));
    let access_log = AccessLog::start(
        &config.access_log,
        fingerprints.clone(),
        Arc::clone(&options.clock),
    )?;
    let top_keys = config
        .admin
        .top_keys
        .then(|| TopKeys::new(Arc::clone(&options.clock), fingerprints));
    let started = InForce::new(config);
    log_start_warnings(&started);
    let app = Arc::new(App {
        store,
        slots,
        waiting: Arc::default(),
        reloadable: ArcSwap::from_pointee(reloadable),
        in_force: ArcSwap::from_pointee(started.clone()),
        started,
        draining: AtomicBool::new(false),
        config_path: options.config_path,
        store_url: options.store_url,
        admin_guard: AdminGuard::new(options.clock),
        listener_tls,
        access_log,
        top_keys,
        connections: Connections::new(),
    });
    let config = &app.started.config;
    let (address, listeners) = workers::bind(config.listen, app.started.workers)?;
    let (admin, admin_address) = bind_admin(config.admin.listen).await?;
    let (shutdown, stopping) = Shutdown::new();
    let workers = workers::spawn(listeners, &app, config.upstream.connect_timeout, &stopping)?;
    let (admin_shutdown, admin_stopping) = Shutdown::new();
    let router = endpoints::router(Arc::clone(&app));
    let admin = tokio::spawn(tollgate_serve::serve_http(
        admin,
        // The admin guard limits failed calls per client address.
        move |peer: SocketAddr| router.clone().layer(Extension(ConnectInfo(peer))),
        admin_stopping,
        config.idle_timeout,
        Arc::clone(&app.connections),
    ));
    // A store that cannot decide at start (Redis down, a wrong password) is
    // an error worth a line, whatever the failure policy does with requests.
    match app.store.reach().await {
        Ok(reach) => {
            metrics::record_store_up(reach.share());
            if !reach.is_whole() {
                tracing::error!(
                    answering = reach.answering,
                    of = reach.of,
                    "part of the Redis Cluster cannot decide at start; its keys follow store.failure"
                );
            }
        }
        Err(error) => {
            metrics::record_store_up(0.0);
            tracing::error!(%error, "the limit store cannot decide at start; requests follow store.failure");
        }
    }
    let scheme = if app.listener_tls.is_some() {
        "https"
    } else {
        "http"
    };
    tracing::info!(%address, %admin_address, scheme, workers = workers.len(), "tollgate serving");
    Ok(Running {
        address,
        admin_address,
        app,
        shutdown,
        admin_shutdown,
        admin,
        workers,
    })
}

/// The admin listener on `address`, and the address bound.
async fn bind_admin(address: SocketAddr) -> Result<(TcpListener, SocketAddr), StartError> {
    let listen_error = |source| StartError::Listen {
        address,
        admin: true,
        source,
    };
    let listener = TcpListener::bind(address).await.map_err(listen_error)?;
    let bound = listener.local_addr().map_err(listen_error)?;
    Ok((listener, bound))
}

/// The warnings a configuration owes at start: settings that work but
/// probably not as meant, and a missing or well-known admin token.
/// Logs what the list of known keys read holds, and warns when it lists no
/// key while unknown keys are refused.
pub(crate) fn log_known_keys(
    known: &tollgate_core::KnownKeys,
    unknown: tollgate_core::UnknownKeys,
) {
    let (line, warning) = crate::config::known_keys_report(known, unknown);
    tracing::info!("{line}");
    if let Some(warning) = warning {
        tracing::warn!("{warning}");
    }
}

fn log_start_warnings(started: &InForce) {
    for warning in started.config.warnings() {
        tracing::warn!("{warning}");
    }
    if let Some(warning) = started
        .config
        .admin_token_warning(started.admin_token.as_deref())
    {
        tracing::warn!("{warning}");
    }
    if let Some(warning) = started.config.key_secret_warning() {
        tracing::warn!("{warning}");
    }
}

/// Runs a gateway until SIGTERM or Ctrl-C (SIGINT), reloading on SIGHUP.
/// Stopping drains in-flight requests for at most `drain_timeout`, then
/// closes their connections; a second SIGTERM or SIGINT stops at once.
///
/// # Errors
///
/// When the gateway cannot start.
pub async fn run(options: ServeOptions) -> Result<(), StartError> {
    let signals_error = |source| StartError::Start {
        what: "the signal handlers",
        source,
    };
    let mut hangup = Signals::listen(&[SignalKind::hangup()]).map_err(signals_error)?;
    let mut stop = Signals::listen(&[SignalKind::terminate(), SignalKind::interrupt()])
        .map_err(signals_error)?;
    let running = start(options).await?;
    loop {
        tokio::select! {
            () = hangup.next() => match running.reload() {
                Ok(()) => tracing::info!("configuration reloaded"),
                Err(error) => tracing::error!(%error, "configuration rejected; the previous one stays in force"),
            },
            () = stop.next() => break,
        }
    }
    tokio::select! {
        () = running.shutdown() => tracing::info!("stopped"),
        () = stop.next() => tracing::warn!("a second signal: stopping at once"),
    }
    Ok(())
}
