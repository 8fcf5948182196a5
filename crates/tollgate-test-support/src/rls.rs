//! `tollgate rls` on loopback: its settings for a test (every listener on
//! 127.0.0.1 on a port the kernel picks, statsd off), and a service started
//! on them with one configuration file, on a manual clock.

use std::sync::Arc;
use std::time::Duration;

use tollgate_core::ManualClock;
use tollgate_rls::{Rls, RlsArguments};

/// The defaults, on loopback with kernel-chosen ports and no statsd.
pub fn arguments() -> RlsArguments {
    let mut arguments = RlsArguments::defaults();
    "127.0.0.1".clone_into(&mut arguments.host);
    "127.0.0.1".clone_into(&mut arguments.grpc_host);
    "127.0.0.1".clone_into(&mut arguments.debug_host);
    arguments.port = 0;
    arguments.grpc_port = 0;
    arguments.debug_port = 0;
    arguments.use_statsd = false;
    arguments
}

/// How often a test's service polls its configuration files.
pub const FILE_POLL: Duration = Duration::from_millis(100);

/// How long a test's [`stop`] lets calls in flight finish before closing
/// their connections (the service's own is `SHUTDOWN_GRACE`, 10 s, which an
/// Envoy holding its connection open would make every test wait).
pub const TEST_GRACE: Duration = Duration::from_millis(200);

/// The service on `arguments` with `config` as its one file (`rl.yaml`, in
/// the directory returned with it, polled every [`FILE_POLL`]), on a manual
/// clock at 2100-01-01T12:00:00Z (no day's window ends during a test).
pub async fn start_at_noon(config: &str, mut arguments: RlsArguments) -> (Rls, tempfile::TempDir) {
    let directory = tempfile::tempdir().unwrap();
    std::fs::write(directory.path().join("rl.yaml"), config).unwrap();
    arguments.config = Some(directory.path().to_owned());
    let clock = Arc::new(ManualClock::new(4_102_488_000_000_000_000));
    let rls = Rls::start_on_clock(&arguments, FILE_POLL, clock)
        .await
        .unwrap();
    (rls, directory)
}

/// Stops `rls` with a grace period of [`TEST_GRACE`].
pub async fn stop(rls: Rls) {
    rls.shutdown_within(TEST_GRACE).await;
}
