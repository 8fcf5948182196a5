//! `listen`, `workers` and `drain_timeout`: where clients connect, how many
//! threads serve them, and how long a stop waits for them.

use std::net::SocketAddr;

use super::ServeConfigError;

/// The gateway listener's default address, `127.0.0.1:8080`.
pub(super) fn default_listen() -> SocketAddr {
    SocketAddr::from(([127, 0, 0, 1], 8080))
}

/// How long SIGTERM waits for in-flight requests by default: 30 s.
pub(super) fn default_drain_timeout() -> std::time::Duration {
    std::time::Duration::from_secs(30)
}

/// The worker threads for `configured` (`workers` of the file): one per CPU
/// when absent, at least one.
pub(crate) fn worker_count(configured: Option<usize>) -> usize {
    configured
        .unwrap_or_else(|| std::thread::available_parallelism().map_or(1, usize::from))
        .max(1)
}

pub(super) fn validate(workers: Option<usize>) -> Result<(), ServeConfigError> {
    if workers == Some(0) {
        return Err(ServeConfigError::Invalid(
            "workers must be at least 1".into(),
        ));
    }
    Ok(())
}
