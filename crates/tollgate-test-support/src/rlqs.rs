//! `tollgate rlqs` on loopback: every listener on 127.0.0.1 on a port the
//! kernel picks (`rls::arguments`), one configuration file, its files
//! polled every 100 ms, demand read on the clock a test gives.

use std::sync::Arc;
use std::time::Duration;

use tollgate_core::Clock;
use tollgate_rlqs::{Rlqs, RlqsArguments};

/// The service with `yaml` as its one file (`quota.yaml`, in the directory
/// returned with it), on `clock`, `adjust` applied to its settings.
pub async fn start(
    yaml: &str,
    clock: Arc<dyn Clock>,
    adjust: impl FnOnce(&mut RlqsArguments),
) -> (Rlqs, tempfile::TempDir) {
    let directory = tempfile::tempdir().unwrap();
    std::fs::write(directory.path().join("quota.yaml"), yaml).unwrap();
    let mut arguments = RlqsArguments::defaults();
    arguments.rls = crate::rls::arguments();
    arguments.rls.config = Some(directory.path().to_owned());
    adjust(&mut arguments);
    let rlqs = Rlqs::start_on_clock(&arguments, Duration::from_millis(100), clock)
        .await
        .unwrap();
    (rlqs, directory)
}
