//! `listen`, `workers`, `drain_timeout` and `idle_timeout`: where clients
//! connect, how many threads serve them, how long a stop waits for them and
//! how long an idle connection stays.

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

/// How long a client connection may be idle by default: 30 s (hyper's wait
/// for a request's headers, which this extends to every phase).
pub(super) fn default_idle_timeout() -> std::time::Duration {
    std::time::Duration::from_secs(30)
}

/// The worker threads for `configured` (`workers` of the file): the one
/// rule of every server, [`tollgate_serve::worker_count`] (one per CPU when
/// absent, from 1 to 1024).
pub(crate) fn worker_count(configured: Option<usize>) -> usize {
    tollgate_serve::worker_count(configured)
}

pub(super) fn validate(workers: Option<usize>) -> Result<(), ServeConfigError> {
    if workers.is_some_and(|workers| !(1..=tollgate_serve::MAX_WORKERS).contains(&workers)) {
        return Err(ServeConfigError::Invalid(format!(
            "workers must be from 1 to {}",
            tollgate_serve::MAX_WORKERS
        )));
    }
    Ok(())
}
