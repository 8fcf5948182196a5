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
/// configuration loaded before the listeners serve) until [`Health::fail`]
/// (SIGTERM, shutdown). Clones share it.
#[derive(Clone, Debug)]
pub struct Health {
    ok: Arc<AtomicBool>,
    reporter: HealthReporter,
}

impl Health {
    /// A health reporting `ratelimit` as serving.
    pub async fn serving() -> Health {
        let reporter = HealthReporter::new();
        reporter
            .set_service_status(HEALTH_SERVICE_NAME, ServingStatus::Serving)
            .await;
        Health {
            ok: Arc::new(AtomicBool::new(true)),
            reporter,
        }
    }

    /// Whether `/healthcheck` answers 200 `OK` (else 500).
    pub fn is_ok(&self) -> bool {
        self.ok.load(Ordering::Acquire)
    }

    /// Reports `ratelimit` as not serving from now on, as the Go service does
    /// on SIGTERM.
    pub async fn fail(&self) {
        self.ok.store(false, Ordering::Release);
        self.reporter
            .set_service_status(HEALTH_SERVICE_NAME, ServingStatus::NotServing)
            .await;
    }

    /// The `grpc.health.v1.Health` service reporting this health.
    pub fn grpc_service(&self) -> HealthServer<HealthService> {
        HealthServer::new(HealthService::from_health_reporter(self.reporter.clone()))
    }
}
