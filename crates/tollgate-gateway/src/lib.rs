//! `tollgate serve`: the rate-limiting reverse proxy. Every request's API key
//! is limited by its plan and its route's budget, all or nothing, before it is
//! forwarded to the route's upstream; an admin API and `/metrics`, `/healthz`,
//! `/readyz` listen apart. SIGTERM drains in-flight requests; SIGHUP reloads
//! the configuration file.

mod admin;
mod api_key;
mod app;
mod body_timeout;
mod client;
pub mod config;
mod demo;
mod headers;
mod limit;
mod listener;
mod metrics;
mod path;
mod proxy;
mod restart;
mod routes;
mod runtime;
mod upstream;

use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use anyhow::Context;
use arc_swap::ArcSwap;
use axum::Router;
use tokio::net::TcpListener;
use tokio::sync::watch;
use tokio::task::JoinHandle;
use tollgate_core::{Clock, MemoryStore, Store, SystemClock};

use app::App;
pub use config::{ServeConfig, ServeConfigError};
use proxy::Proxy;
use restart::StartSettings;
use runtime::Runtime;

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
    /// Stops the gateway listener's workers.
    shutdown: watch::Sender<bool>,
    /// Stops the admin listener, once the workers are done.
    shutdown_admin: watch::Sender<bool>,
    admin: JoinHandle<std::io::Result<()>>,
    workers: Vec<std::thread::JoinHandle<std::io::Result<()>>>,
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

    /// Stops accepting connections, lets in-flight requests finish, and
    /// returns when every listener is done. The admin listener stays up (with
    /// `/readyz` answering 503) until the gateway's requests are done.
    pub async fn shutdown(self) {
        self.app.draining.store(true, Ordering::Release);
        // Logged once `/readyz` says so: what reads the log may rely on it.
        tracing::info!("draining in-flight requests");
        let _ = self.shutdown.send(true);
        let workers = self.workers;
        let workers = tokio::task::spawn_blocking(move || {
            workers
                .into_iter()
                .map(|worker| worker.join().unwrap_or(Ok(())))
                .collect::<Vec<_>>()
        });
        let mut results = workers.await.unwrap_or_default();
        let _ = self.shutdown_admin.send(true);
        results.push(self.admin.await.unwrap_or(Ok(())));
        for error in results.into_iter().filter_map(Result::err) {
            tracing::warn!(%error, "listener stopped with an error");
        }
    }
}

/// The worker threads for `configured` (`workers` of the file): one per CPU
/// when absent, at least one.
pub(crate) fn worker_count(configured: Option<usize>) -> usize {
    configured
        .unwrap_or_else(|| std::thread::available_parallelism().map_or(1, usize::from))
        .max(1)
}

/// Binds both listeners and starts serving: the gateway listener on `workers`
/// threads of their own, the admin listener on the calling runtime.
///
/// # Errors
///
/// When a listener cannot be bound or the configuration cannot be used.
pub async fn start(options: ServeOptions) -> anyhow::Result<Running> {
    let mut config = options.config;
    config.override_store_url(options.store_url.as_deref());
    let in_memory = options.store.is_none() && config.store.url.is_none();
    let store: Arc<dyn Store> = match (options.store, &config.store.url) {
        (Some(store), _) => store,
        (None, None) => Arc::new(MemoryStore::new(&config.limits, options.clock)?),
        (None, Some(url)) => {
            let mut redis = tollgate_redis::RedisConfig::new(url.as_str());
            redis.prefix.clone_from(&config.store.prefix);
            redis.timeout = config.store.timeout;
            if config.store.time == config::StoreTime::Local {
                redis.time = tollgate_redis::TimeSource::Clock(options.clock);
            }
            // Never the password: the URL's part after any `@`.
            let server = url
                .rsplit_once('@')
                .map_or(url.as_str(), |(_, server)| server);
            let prefix = redis.prefix.clone();
            let store = tollgate_redis::RedisStore::connect(redis, &config.limits).map_err(
                |error| match (&error, &options.config_path) {
                    // A policy of the file that the Redis store cannot hold.
                    (tollgate_redis::RedisStoreError::Policy(_), Some(path)) => {
                        anyhow::anyhow!("{}: invalid limits: {error}", path.display())
                    }
                    _ => error.into(),
                },
            )?;
            tracing::info!(server, %prefix, "limits in Redis");
            Arc::new(store)
        }
    };
    let runtime = Runtime::build(&config, store.as_ref())?;
    for warning in config.warnings(in_memory) {
        tracing::warn!("{warning}");
    }
    let admin_token = restart::admin_token(&config);
    match admin_token.as_deref() {
        None => tracing::warn!(
            "no admin token (admin.token or ${}): every admin call will be refused",
            config.admin.token_env
        ),
        Some(restart::EXAMPLE_ADMIN_TOKEN) => tracing::warn!(
            "the admin token is the example's \"{}\": set your own in admin.token or ${}",
            restart::EXAMPLE_ADMIN_TOKEN,
            config.admin.token_env
        ),
        Some(_) => {}
    }
    let app = Arc::new(App {
        store,
        runtime: ArcSwap::from_pointee(runtime),
        draining: AtomicBool::new(false),
        started: StartSettings::new(&config, admin_token.clone(), in_memory),
        store_url: options.store_url,
        admin_token,
        config_path: options.config_path,
    });
    let workers = worker_count(config.workers);
    // One listening socket per worker on one port (SO_REUSEPORT): the kernel
    // spreads connections over them.
    ensure_port_free(config.listen)
        .with_context(|| format!("cannot listen on {}", config.listen))?;
    let first = reuse_port_listener(config.listen)
        .with_context(|| format!("cannot listen on {}", config.listen))?;
    let address = first.local_addr()?;
    let mut listeners = vec![first];
    for _ in 1..workers {
        let listener =
            reuse_port_listener(address).with_context(|| format!("cannot listen on {address}"))?;
        listeners.push(listener);
    }
    let admin = TcpListener::bind(config.admin.listen)
        .await
        .with_context(|| format!("cannot listen on {} (admin)", config.admin.listen))?;
    let admin_address = admin.local_addr()?;
    let (shutdown, stopped) = watch::channel(false);
    let connect_timeout = config.upstream.connect_timeout;
    let workers = listeners
        .into_iter()
        .enumerate()
        .map(|(index, listener)| {
            let app = Arc::clone(&app);
            let stopped = stopped.clone();
            std::thread::Builder::new()
                .name(format!("tollgate-worker-{index}"))
                .spawn(move || run_worker(listener, app, connect_timeout, stopped))
        })
        .collect::<Result<Vec<_>, _>>()
        .context("cannot start the worker threads")?;
    let (shutdown_admin, admin_stopped) = watch::channel(false);
    let admin = tokio::spawn(serve(admin, admin::router(Arc::clone(&app)), admin_stopped));
    tracing::info!(%address, %admin_address, workers = workers.len(), "tollgate serving");
    Ok(Running {
        address,
        admin_address,
        app,
        shutdown,
        shutdown_admin,
        admin,
        workers,
    })
}

/// Fails when another process listens on `address` already: with
/// `SO_REUSEPORT`, a second gateway would otherwise share the port silently
/// and split its clients between two budgets.
fn ensure_port_free(address: SocketAddr) -> std::io::Result<()> {
    if address.port() == 0 {
        return Ok(());
    }
    std::net::TcpListener::bind(address).map(drop)
}

/// A nonblocking listening socket on `address` that other sockets may share.
fn reuse_port_listener(address: SocketAddr) -> std::io::Result<std::net::TcpListener> {
    use socket2::{Domain, Socket, Type};
    let socket = Socket::new(Domain::for_address(address), Type::STREAM, None)?;
    socket.set_reuse_address(true)?;
    socket.set_reuse_port(true)?;
    socket.set_nonblocking(true)?;
    socket.bind(&address.into())?;
    socket.listen(1024)?;
    Ok(socket.into())
}

/// One worker: a single-threaded event loop serving its own listening socket
/// with its own upstream connections, so a request never changes threads.
fn run_worker(
    listener: std::net::TcpListener,
    app: Arc<App>,
    connect_timeout: std::time::Duration,
    stopped: watch::Receiver<bool>,
) -> std::io::Result<()> {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    runtime.block_on(async move {
        let listener = TcpListener::from_std(listener)?;
        let worker = app::Worker {
            app,
            proxy: Proxy::new(connect_timeout),
        };
        listener::serve(listener, worker, stopped).await
    })
}

async fn serve(
    listener: TcpListener,
    router: Router,
    mut stopped: watch::Receiver<bool>,
) -> std::io::Result<()> {
    axum::serve(
        listener,
        router.into_make_service_with_connect_info::<SocketAddr>(),
    )
    .with_graceful_shutdown(async move {
        let _ = stopped.wait_for(|stopped| *stopped).await;
    })
    .await
}

/// Runs a gateway until SIGTERM or Ctrl-C, reloading on SIGHUP.
///
/// # Errors
///
/// When the gateway cannot start.
pub async fn run(options: ServeOptions) -> anyhow::Result<()> {
    use tokio::signal::unix::{SignalKind, signal};
    let running = start(options).await?;
    let mut hangup = signal(SignalKind::hangup())?;
    let mut terminate = signal(SignalKind::terminate())?;
    loop {
        tokio::select! {
            _ = hangup.recv() => match running.reload() {
                Ok(()) => tracing::info!("configuration reloaded"),
                Err(error) => tracing::error!(%error, "configuration rejected; the previous one stays in force"),
            },
            _ = terminate.recv() => break,
            _ = tokio::signal::ctrl_c() => break,
        }
    }
    running.shutdown().await;
    tracing::info!("stopped");
    Ok(())
}
