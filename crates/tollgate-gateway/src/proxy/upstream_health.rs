//! A server's passive health: whether it is in back-off (it refused a
//! connection, or did not accept one within `connect_timeout`), and until
//! when. One atomic per server, shared by every worker thread.

use std::sync::OnceLock;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

/// Whether a server is in back-off: until when, in nanoseconds since
/// [`epoch`] plus one (0: it is not).
#[derive(Debug, Default)]
pub(crate) struct Health {
    down_until: AtomicU64,
}

/// The instant health times count from: the first use in the process.
fn epoch() -> Instant {
    static EPOCH: OnceLock<Instant> = OnceLock::new();
    *EPOCH.get_or_init(Instant::now)
}

/// `instant` in nanoseconds since [`epoch`] plus one (0 before it).
fn since_epoch(instant: Instant) -> u64 {
    let since = instant.saturating_duration_since(epoch()).as_nanos();
    u64::try_from(since).unwrap_or(u64::MAX - 1) + 1
}

impl Health {
    /// Whether the server is in back-off at `now`.
    pub(crate) fn is_down(&self, now: Instant) -> bool {
        let until = self.down_until.load(Ordering::Relaxed);
        until != 0 && since_epoch(now) < until
    }

    /// Puts the server in back-off from `now` for `backoff`.
    pub(crate) fn mark_down(&self, now: Instant, backoff: Duration) {
        if backoff.is_zero() {
            return;
        }
        let until = now.checked_add(backoff).map_or(u64::MAX, since_epoch);
        self.down_until.store(until, Ordering::Relaxed);
    }

    /// Ends a back-off early: the server took a connection.
    pub(crate) fn mark_up(&self) {
        if self.down_until.load(Ordering::Relaxed) != 0 {
            self.down_until.store(0, Ordering::Relaxed);
        }
    }
}
