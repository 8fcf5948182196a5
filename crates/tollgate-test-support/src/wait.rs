//! Waiting until a condition holds ([`until`]): what a test does after an
//! action whose effect lands a little later (a slot given back once a
//! response is dropped, a release sent to Redis, a request that reaches
//! the upstream), without asserting how long it took.

use std::time::Duration;

/// Waits until `check` holds, looking every 10 ms on tokio's timer for at
/// most 10 s; panics with `never: {what}` otherwise.
pub async fn until(what: &str, mut check: impl FnMut() -> bool) {
    for _ in 0..1000 {
        if check() {
            return;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    panic!("never: {what}");
}
