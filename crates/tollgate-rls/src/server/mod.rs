//! The listeners of `tollgate rls`, as envoyproxy/ratelimit's server
//! (src/server/server_impl.go) opens them:
//!
//! - gRPC (`GRPC_HOST:GRPC_PORT`, 0.0.0.0:8081):
//!   `envoy.service.ratelimit.v3.RateLimitService/ShouldRateLimit` and
//!   `grpc.health.v1.Health` (service `ratelimit`);
//! - HTTP (`HOST:PORT`, 0.0.0.0:8080): `/json` and `/healthcheck`;
//! - debug (`DEBUG_HOST:DEBUG_PORT`, 0.0.0.0:6070): `/stats`, `/rlconfig`,
//!   and tollgate's `/settings`.
//!
//! The listeners are bound first ([`Listeners::bind`], so a port in use is an
//! error at start), then served ([`Listeners::serve`]) until
//! [`RunningServer::shutdown`], which reports the service unhealthy and lets
//! requests in flight finish.

mod convert;
mod grpc;
mod health;
mod http;
mod serve;
mod stats_export;

use std::future::Future;
use std::net::SocketAddr;
use std::panic::AssertUnwindSafe;
use std::pin::Pin;
use std::sync::Arc;

use futures_util::FutureExt as _;
use tokio::net::TcpListener;
use tokio::task::JoinSet;
use tollgate_serve::{Connections, Shutdown};

use crate::proto::{RateLimitRequest, RateLimitResponse};

pub use grpc::MAX_GRPC_MESSAGE_BYTES;
pub use health::{HEALTH_SERVICE_NAME, Health};
pub use http::MAX_JSON_BODY_BYTES;
pub use serve::{DEFAULT_REDIS_PREFIX, Rls, RlsError, join_host_port, serve};
pub use stats_export::prometheus_page;

/// A boxed future of a decision.
pub type DecideFuture<'a> =
    Pin<Box<dyn Future<Output = Result<RateLimitResponse, String>> + Send + 'a>>;

/// What the listeners ask: the rate limit service (implemented for
/// [`crate::service::RateLimitService`]; tests give their own).
pub trait Decide: Send + Sync + 'static {
    /// Answers one `ShouldRateLimit`; an error is the Go service's message
    /// (`rate limit domain must not be empty`, a store failure), answered as
    /// gRPC `UNKNOWN` and HTTP 400.
    fn decide<'a>(&'a self, request: &'a RateLimitRequest) -> DecideFuture<'a>;
}

/// Why a decision has no answer.
pub(crate) enum DecideError {
    /// The service refused the request (its message).
    Service(String),
    /// The service panicked (a bug): answered as an internal error, and the
    /// listener goes on.
    Panicked,
}

/// Runs `decider`, turning a panic into [`DecideError::Panicked`] (logged).
pub(crate) async fn decide_catching_panics(
    decider: &dyn Decide,
    request: &RateLimitRequest,
) -> Result<RateLimitResponse, DecideError> {
    match AssertUnwindSafe(decider.decide(request))
        .catch_unwind()
        .await
    {
        Ok(Ok(response)) => Ok(response),
        Ok(Err(message)) => Err(DecideError::Service(message)),
        Err(_) => {
            tracing::error!("the rate limit service panicked on a request");
            Err(DecideError::Panicked)
        }
    }
}

/// What the debug listener prints: `/stats` and `/rlconfig` texts, made on
/// each request.
#[derive(Clone)]
pub struct DebugPages {
    /// Every counter, one `name: value` per line.
    pub stats: Arc<dyn Fn() -> String + Send + Sync>,
    /// The configuration in force.
    pub config: Arc<dyn Fn() -> String + Send + Sync>,
    /// Every setting in force, `NAME: value` by environment variable
    /// ([`crate::RlsArguments::settings_dump`]).
    pub settings: Arc<dyn Fn() -> String + Send + Sync>,
}

/// Errors opening or serving the listeners.
#[derive(Debug, thiserror::Error)]
pub enum ServerError {
    /// A listener's address cannot be bound.
    #[error("Failed to listen for {listener} on '{address}'")]
    Bind {
        /// `gRPC`, `HTTP` or `debug`.
        listener: &'static str,
        /// The address.
        address: String,
        /// Why.
        source: std::io::Error,
    },
    /// A gRPC worker thread cannot be started.
    #[error("Failed to start the gRPC workers")]
    Workers {
        /// Why.
        source: std::io::Error,
    },
}

/// The listeners, bound and not yet served.
#[derive(Debug)]
pub struct Listeners {
    grpc: TcpListener,
    http: TcpListener,
    debug: Option<TcpListener>,
    idle_timeout: std::time::Duration,
    /// Every connection of every listener of this server (and of its
    /// Prometheus listener), for shedding the oldest idle one when a
    /// listener runs out of file descriptors.
    connections: Arc<Connections>,
}

/// How long a connection to any listener may move no byte, with no call in
/// flight, before it is closed (`TOLLGATE_IDLE_TIMEOUT`): 30 s, the
/// gateway's `idle_timeout`.
pub const DEFAULT_IDLE_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(30);

/// Where the listeners are: `host:port` texts, as the Go service joins them
/// (`net.JoinHostPort`); port 0 picks a free port.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ListenAddresses {
    /// The gRPC listener.
    pub grpc: String,
    /// The HTTP listener.
    pub http: String,
    /// The debug listener, or none.
    pub debug: Option<String>,
}

impl Listeners {
    /// Binds every listener.
    ///
    /// # Errors
    ///
    /// [`ServerError::Bind`] naming the listener whose address is unusable or
    /// in use.
    pub async fn bind(addresses: &ListenAddresses) -> Result<Listeners, ServerError> {
        let grpc = bind("gRPC", &addresses.grpc).await?;
        let http = bind("HTTP", &addresses.http).await?;
        let debug = match &addresses.debug {
            Some(address) => Some(bind("debug", address).await?),
            None => None,
        };
        Ok(Listeners {
            grpc,
            http,
            debug,
            idle_timeout: DEFAULT_IDLE_TIMEOUT,
            connections: Connections::new(),
        })
    }

    /// These listeners with connections closed once idle for `timeout` (no
    /// byte moved, no call in flight) rather than [`DEFAULT_IDLE_TIMEOUT`].
    pub fn with_idle_timeout(mut self, timeout: std::time::Duration) -> Self {
        self.idle_timeout = timeout;
        self
    }

    /// The list of these listeners' connections, to share with another
    /// listener of the process (the Prometheus page's).
    pub(crate) fn connections(&self) -> Arc<Connections> {
        Arc::clone(&self.connections)
    }

    /// The gRPC listener's address.
    pub fn grpc_address(&self) -> Option<SocketAddr> {
        self.grpc.local_addr().ok()
    }

    /// The HTTP listener's address.
    pub fn http_address(&self) -> Option<SocketAddr> {
        self.http.local_addr().ok()
    }

    /// The debug listener's address.
    pub fn debug_address(&self) -> Option<SocketAddr> {
        self.debug
            .as_ref()
            .and_then(|listener| listener.local_addr().ok())
    }

    /// Serves every listener, answering with `decider`, until
    /// [`RunningServer::shutdown`]: gRPC on `workers` threads of their own,
    /// each a single-threaded event loop, each new connection going to the
    /// one with the fewest open; HTTP and debug on the current tokio runtime.
    ///
    /// # Errors
    ///
    /// [`ServerError::Workers`] when a worker thread cannot be started.
    pub fn serve(
        self,
        workers: usize,
        decider: Arc<dyn Decide>,
        health: Health,
        debug: DebugPages,
    ) -> Result<RunningServer, ServerError> {
        let addresses = (
            self.grpc_address(),
            self.http_address(),
            self.debug_address(),
        );
        let (shutdown, stopping) = Shutdown::new();
        let mut tasks = JoinSet::new();

        let idle_timeout = self.idle_timeout;
        let connections = self.connections;
        let (acceptor, threads) = tollgate_serve::serve_grpc(
            "rls-worker",
            workers,
            self.grpc,
            (idle_timeout, &connections),
            || {
                tonic::service::Routes::new(health.grpc_service())
                    .add_service(grpc::service(Arc::clone(&decider)))
            },
            &stopping,
        )
        .map_err(|source| ServerError::Workers { source })?;
        tasks.spawn(acceptor);
        for thread in threads {
            tasks.spawn(thread.ended());
        }

        let router = http::router(decider, health.clone(), idle_timeout);
        tasks.spawn(tollgate_serve::serve_http(
            self.http,
            move |_| router.clone(),
            stopping.clone(),
            idle_timeout,
            Arc::clone(&connections),
        ));
        if let Some(debug_listener) = self.debug {
            let router = http::debug_router(debug);
            tasks.spawn(tollgate_serve::serve_http(
                debug_listener,
                move |_| router.clone(),
                stopping.clone(),
                idle_timeout,
                Arc::clone(&connections),
            ));
        }

        Ok(RunningServer {
            grpc: addresses.0,
            http: addresses.1,
            debug: addresses.2,
            health,
            shutdown,
            tasks,
            connections,
        })
    }
}

/// Binds `address` for the listener named `listener` (`gRPC`, `HTTP`,
/// `debug`), and logs where it listens, as the Go service does.
///
/// # Errors
///
/// [`ServerError::Bind`] naming the listener.
pub async fn bind(listener: &'static str, address: &str) -> Result<TcpListener, ServerError> {
    let bound = TcpListener::bind(address)
        .await
        .map_err(|source| ServerError::Bind {
            listener,
            address: address.to_owned(),
            source,
        })?;
    tracing::info!(address = %bound.local_addr().map_or_else(|_| address.to_owned(), |a| a.to_string()),
        "Listening for {listener}");
    Ok(bound)
}

/// How long [`RunningServer::shutdown`] lets requests in flight finish.
pub const SHUTDOWN_GRACE: std::time::Duration = std::time::Duration::from_secs(10);

/// The listeners being served. Dropped without [`RunningServer::shutdown`],
/// the gRPC workers close their connections at once and end on their own.
pub struct RunningServer {
    grpc: Option<SocketAddr>,
    http: Option<SocketAddr>,
    debug: Option<SocketAddr>,
    health: Health,
    /// Stops accepting; then ends the gRPC workers' event loops at once,
    /// connections and all.
    shutdown: Shutdown,
    tasks: JoinSet<()>,
    /// The listeners' connections: at a stop, each is closed once none of
    /// its calls is in flight.
    connections: Arc<Connections>,
}

impl RunningServer {
    /// The gRPC listener's address.
    pub fn grpc_address(&self) -> Option<SocketAddr> {
        self.grpc
    }

    /// The HTTP listener's address.
    pub fn http_address(&self) -> Option<SocketAddr> {
        self.http
    }

    /// The debug listener's address.
    pub fn debug_address(&self) -> Option<SocketAddr> {
        self.debug
    }

    /// The health the listeners report.
    pub fn health(&self) -> &Health {
        &self.health
    }

    /// Reports unhealthy, stops accepting, and waits for requests in flight,
    /// at most [`SHUTDOWN_GRACE`]; then closes the connections still open
    /// (`tollgate_serve::Shutdown::drain`).
    pub async fn shutdown(self) {
        self.shutdown_within(SHUTDOWN_GRACE).await;
    }

    /// [`RunningServer::shutdown`] with a grace period of `grace`.
    pub async fn shutdown_within(mut self, grace: std::time::Duration) {
        self.health.fail().await;
        self.shutdown
            .drain_tasks(grace, Some(&self.connections), &mut self.tasks)
            .await;
    }

    /// Serves `router` alone on `listener` (the Prometheus page).
    pub(crate) fn serve_router(
        listener: TcpListener,
        health: Health,
        router: axum::Router,
        (idle_timeout, connections): (std::time::Duration, Arc<Connections>),
    ) -> RunningServer {
        let address = listener.local_addr().ok();
        let (shutdown, stopping) = Shutdown::new();
        let mut tasks = JoinSet::new();
        tasks.spawn(tollgate_serve::serve_http(
            listener,
            move |_| router.clone(),
            stopping,
            idle_timeout,
            Arc::clone(&connections),
        ));
        RunningServer {
            grpc: None,
            http: address,
            debug: None,
            health,
            shutdown,
            tasks,
            connections,
        }
    }

    /// Waits until a listener stops on its own (it failed).
    pub async fn wait_for_failure(&mut self) {
        let _ = self.tasks.join_next().await;
    }
}
