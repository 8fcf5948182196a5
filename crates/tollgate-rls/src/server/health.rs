//! The service's health, as envoyproxy/ratelimit's `HealthChecker`
//! (src/server/health.go) reports it: over gRPC (`grpc.health.v1`, service
//! `ratelimit`, plus the server as a whole, `""`) and as `GET /healthcheck`.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use tonic_health::ServingStatus;
use tonic_health::pb::health_server::HealthServer;
use tonic_health::server::{HealthReporter, HealthService};

/// The gRPC health service name the Go service registers.
pub const HEALTH_SERVICE_NAME: &str = "ratelimit";

/// The service's health: serving from start (the store is open and a
/// configuration read before the listeners serve) until [`Health::fail`]
/// (SIGTERM, shutdown); with `HEALTHY_WITH_AT_LEAST_ONE_CONFIG_LOADED`, also
/// only while a configuration of at least one domain is in force
/// ([`Health::config_loaded`]), as the Go service's `config` component.
/// Clones share it.
#[derive(Clone, Debug)]
pub struct Health {
    state: Arc<State>,
    reporter: HealthReporter,
}

#[derive(Debug)]
struct State {
    /// False once failed (SIGTERM, shutdown).
    serving: AtomicBool,
    /// Whether a configuration of at least one domain is in force.
    config_loaded: AtomicBool,
    /// Whether health waits for one (`HEALTHY_WITH_AT_LEAST_ONE_CONFIG_LOADED`).
    needs_config: bool,
}

impl Health {
    /// A health reporting `ratelimit` as serving.
    pub async fn serving() -> Health {
        Health::new(false, true).await
    }

    /// A health that, when `needs_config`, serves only while a
    /// configuration of at least one domain is in force (`config_loaded`
    /// at start).
    pub async fn new(needs_config: bool, config_loaded: bool) -> Health {
        let health = Health {
            state: Arc::new(State {
                serving: AtomicBool::new(true),
                config_loaded: AtomicBool::new(config_loaded),
                needs_config,
            }),
            reporter: HealthReporter::new(),
        };
        health.report().await;
        health
    }

    /// Whether `/healthcheck` answers 200 `OK` (else 500).
    pub fn is_ok(&self) -> bool {
        let state = &self.state;
        state.serving.load(Ordering::Acquire)
            && (!state.needs_config || state.config_loaded.load(Ordering::Acquire))
    }

    /// Reports `ratelimit` as not serving from now on, as the Go service does
    /// on SIGTERM.
    pub async fn fail(&self) {
        self.state.serving.store(false, Ordering::Release);
        self.report().await;
    }

    /// Notes whether the configuration now in force has at least one domain
    /// (a reload that failed keeps the one in force, and changes nothing).
    pub async fn config_loaded(&self, loaded: bool) {
        self.set_config_loaded(loaded);
        self.report().await;
    }

    /// [`Health::config_loaded`] without reporting to gRPC health yet
    /// (`/healthcheck` sees it at once): for a caller that cannot wait,
    /// which then calls [`Health::report_now`].
    pub fn set_config_loaded(&self, loaded: bool) {
        self.state.config_loaded.store(loaded, Ordering::Release);
    }

    /// Reports the health as it is now to gRPC health.
    pub async fn report_now(&self) {
        self.report().await;
    }

    async fn report(&self) {
        let status = if self.is_ok() {
            ServingStatus::Serving
        } else {
            ServingStatus::NotServing
        };
        self.reporter
            .set_service_status(HEALTH_SERVICE_NAME, status)
            .await;
    }

    /// The `grpc.health.v1.Health` service reporting this health.
    pub fn grpc_service(&self) -> HealthServer<HealthService> {
        HealthServer::new(HealthService::from_health_reporter(self.reporter.clone()))
    }
}
