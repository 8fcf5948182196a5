//! `tollgate serve`: the rate-limiting reverse proxy. Every request's API key
//! is limited by its plan and its route's budget, all or nothing, before it is
//! forwarded to the route's upstream; an admin API and `/metrics`, `/healthz`,
//! `/readyz` listen apart. SIGTERM drains in-flight requests; SIGHUP reloads
//! the configuration file.

mod admin;
mod api_key;
mod app;
pub mod config;
mod demo;
mod headers;
mod limit;
mod metrics;
mod proxy;
mod routes;
mod runtime;

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
    shutdown: watch::Sender<bool>,
    servers: Vec<JoinHandle<std::io::Result<()>>>,
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
    /// returns when both listeners are done.
    pub async fn shutdown(self) {
        self.app.draining.store(true, Ordering::Release);
        let _ = self.shutdown.send(true);
        for server in self.servers {
            if let Ok(Err(error)) = server.await {
                tracing::warn!(%error, "listener stopped with an error");
            }
        }
    }
}

/// Binds both listeners and starts serving.
///
/// # Errors
///
/// When a listener cannot be bound or the configuration cannot be used.
pub async fn start(options: ServeOptions) -> anyhow::Result<Running> {
    let config = options.config;
    let store: Arc<dyn Store> = match options.store {
        Some(store) => store,
        None => Arc::new(MemoryStore::new(&config.limits, options.clock)?),
    };
    let runtime = Runtime::build(&config, store.as_ref())?;
    let admin_token = std::env::var(&config.admin.token_env)
        .ok()
        .filter(|token| !token.is_empty())
        .or_else(|| config.admin.token.clone());
    if admin_token.is_none() {
        tracing::warn!(
            "no admin token (admin.token or ${}): every admin call will be refused",
            config.admin.token_env
        );
    }
    let app = Arc::new(App {
        store,
        runtime: ArcSwap::from_pointee(runtime),
        proxy: Proxy::new(config.upstream.connect_timeout),
        draining: AtomicBool::new(false),
        admin_token,
        config_path: options.config_path,
    });
    let _ = metrics::handle();
    let gateway = TcpListener::bind(config.listen)
        .await
        .with_context(|| format!("cannot listen on {}", config.listen))?;
    let admin = TcpListener::bind(config.admin.listen)
        .await
        .with_context(|| format!("cannot listen on {} (admin)", config.admin.listen))?;
    let address = gateway.local_addr()?;
    let admin_address = admin.local_addr()?;
    let (shutdown, stopped) = watch::channel(false);
    let gateway_router = Router::new()
        .fallback(app::handle)
        .with_state(Arc::clone(&app));
    let servers = vec![
        tokio::spawn(serve(gateway, gateway_router, stopped.clone())),
        tokio::spawn(serve(admin, admin::router(Arc::clone(&app)), stopped)),
    ];
    tracing::info!(%address, %admin_address, "tollgate serving");
    Ok(Running {
        address,
        admin_address,
        app,
        shutdown,
        servers,
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
    tracing::info!("draining in-flight requests");
    running.shutdown().await;
    tracing::info!("stopped");
    Ok(())
}
