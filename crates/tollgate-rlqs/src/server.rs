//! `tollgate rlqs`'s listeners, opened as `tollgate rls` opens its own:
//!
//! - gRPC (`--grpc-host:--grpc-port`, 0.0.0.0:8081):
//!   `envoy.service.rate_limit_quota.v3.RateLimitQuotaService` and
//!   `grpc.health.v1.Health`, on worker threads
//!   (`tollgate_serve::serve_grpc`);
//! - HTTP (`--host:--port`, 0.0.0.0:8080): `GET /healthcheck`;
//! - debug (`--debug-host:--debug-port`, 0.0.0.0:6070): `/rlqs`, `/metrics`
//!   and `/rlconfig`.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use axum::Router;
use axum::http::{StatusCode, header};
use axum::routing::get;
use tokio::net::TcpListener;
use tokio::task::JoinSet;
use tollgate_rls::server::{Health, ServerError, bind};
use tollgate_serve::{Connections, Shutdown};

use crate::debug::{buckets_json, prometheus_page};
use crate::quotas::Quotas;
use crate::service::service;

/// Where to listen: `host:port` texts (port 0 picks a free port).
#[derive(Clone, Debug)]
pub struct Addresses {
    /// gRPC.
    pub grpc: String,
    /// `/healthcheck`.
    pub http: String,
    /// The debug pages.
    pub debug: String,
}

/// The listeners being served.
pub struct Listening {
    /// The gRPC listener's address.
    pub grpc: Option<SocketAddr>,
    /// The HTTP listener's address.
    pub http: Option<SocketAddr>,
    /// The debug listener's address.
    pub debug: Option<SocketAddr>,
    health: Health,
    shutdown: Shutdown,
    tasks: JoinSet<()>,
    connections: Arc<Connections>,
    quotas: Arc<Quotas>,
}

/// The configuration dump `/rlconfig` prints.
pub type ConfigDump = Arc<dyn Fn() -> String + Send + Sync>;

/// Binds and serves every listener.
///
/// # Errors
///
/// [`ServerError`] naming the listener that cannot be bound, or the workers.
pub async fn listen(
    addresses: &Addresses,
    (workers, idle_timeout): (usize, Duration),
    quotas: &Arc<Quotas>,
    config_dump: ConfigDump,
) -> Result<Listening, ServerError> {
    let grpc = bind("gRPC", &addresses.grpc).await?;
    let http = bind("HTTP", &addresses.http).await?;
    let debug = bind("debug", &addresses.debug).await?;
    let local = |listener: &TcpListener| listener.local_addr().ok();
    let (grpc_address, http_address, debug_address) = (local(&grpc), local(&http), local(&debug));
    let connections = Connections::new();
    let health = Health::serving().await;
    let (shutdown, stopping) = Shutdown::new();
    let mut tasks = JoinSet::new();
    let (acceptor, threads) = tollgate_serve::serve_grpc(
        "rlqs-worker",
        workers,
        grpc,
        (idle_timeout, &connections),
        || {
            tonic::service::Routes::new(health.grpc_service())
                .add_service(service(Arc::clone(quotas)))
        },
        &stopping,
    )
    .map_err(|source| ServerError::Workers { source })?;
    tasks.spawn(acceptor);
    for thread in threads {
        tasks.spawn(thread.ended());
    }
    let checked = health.clone();
    let http_router = Router::new().route(
        "/healthcheck",
        get(move || {
            let ok = checked.is_ok();
            async move {
                if ok {
                    (StatusCode::OK, "OK")
                } else {
                    (StatusCode::INTERNAL_SERVER_ERROR, "NOT OK")
                }
            }
        }),
    );
    let debug_router = debug_router(quotas, config_dump);
    for (listener, router) in [(http, http_router), (debug, debug_router)] {
        tasks.spawn(tollgate_serve::serve_http(
            listener,
            move |_| router.clone(),
            stopping.clone(),
            idle_timeout,
            Arc::clone(&connections),
        ));
    }
    Ok(Listening {
        grpc: grpc_address,
        http: http_address,
        debug: debug_address,
        health,
        shutdown,
        tasks,
        connections,
        quotas: Arc::clone(quotas),
    })
}

fn debug_router(quotas: &Arc<Quotas>, config_dump: ConfigDump) -> Router {
    let json_quotas = Arc::clone(quotas);
    let metrics_quotas = Arc::clone(quotas);
    Router::new()
        .route(
            "/rlqs",
            get(move || {
                let page = buckets_json(&json_quotas);
                async move { axum::Json(page) }
            }),
        )
        .route(
            "/metrics",
            get(move || {
                let page = prometheus_page(&metrics_quotas);
                async move { ([(header::CONTENT_TYPE, "text/plain; version=0.0.4")], page) }
            }),
        )
        .route(
            "/rlconfig",
            get(move || {
                let page = config_dump();
                async move { page }
            }),
        )
}

impl Listening {
    /// Reports unhealthy, ends every stream's answers (each Envoy reopens
    /// its stream at its next report, to another replica), stops accepting,
    /// and waits for calls in flight at most `grace`; then closes the
    /// connections still open.
    pub async fn shutdown_within(mut self, grace: Duration) {
        self.health.fail().await;
        self.quotas.end_all();
        self.shutdown
            .drain_tasks(grace, Some(&self.connections), &mut self.tasks)
            .await;
    }

    /// Waits until a listener stops on its own (it failed).
    pub async fn wait_for_failure(&mut self) {
        let _ = self.tasks.join_next().await;
    }
}
