//! Stopping a server: stop accepting and let requests in flight finish for
//! a grace period, then force (end the worker event loops, their
//! connections with them), then give up waiting.
//!
//! [`Shutdown`] is the server's side, [`Stopping`] (cloned into every
//! listener and worker) what they watch.

use std::future::Future;
use std::time::Duration;

use tokio::sync::watch;

use crate::shed::Connections;

/// How long [`Shutdown::drain`] waits, once it has forced the end, for what
/// it drains to finish.
pub const FORCED_GRACE: Duration = Duration::from_secs(1);

/// The server's side of a stop: [`Shutdown::stop`], then
/// [`Shutdown::force`]; dropped, it stops and forces at once.
#[derive(Debug)]
pub struct Shutdown {
    stop: watch::Sender<bool>,
    force: watch::Sender<bool>,
}

/// What listeners and workers watch: whether to stop accepting, whether to
/// end now. Clones watch the same [`Shutdown`].
#[derive(Clone, Debug)]
pub struct Stopping {
    stopped: watch::Receiver<bool>,
    forced: watch::Receiver<bool>,
}

/// How a drain ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Drained {
    /// Everything finished within the grace period.
    InTime,
    /// The grace period ran out; the end was forced, and everything
    /// finished after it.
    Forced,
    /// Even the forced end did not finish within [`FORCED_GRACE`]; it was no
    /// longer waited for.
    Abandoned,
}

impl Shutdown {
    /// A shutdown not yet begun, and what its listeners watch.
    pub fn new() -> (Shutdown, Stopping) {
        let (stop, stopped) = watch::channel(false);
        let (force, forced) = watch::channel(false);
        (Shutdown { stop, force }, Stopping { stopped, forced })
    }

    /// Stop accepting; requests in flight go on.
    pub fn stop(&self) {
        self.stop.send_replace(true);
    }

    /// End now: worker event loops end, dropping their connections.
    pub fn force(&self) {
        self.stop.send_replace(true);
        self.force.send_replace(true);
    }

    /// Stops, waits for `drained` at most `grace`, then forces and waits at
    /// most [`FORCED_GRACE`] more.
    pub async fn drain(&self, grace: Duration, drained: impl Future<Output = ()>) -> Drained {
        self.drain_closing_idle(grace, None, drained).await
    }

    /// [`Shutdown::drain`], and once stopped, every connection of
    /// `connections` is closed as soon as none of its requests is in flight
    /// (at once for most): a connection that never sent its HTTP/2 preface,
    /// or sent half a request head, would otherwise hold the drain until the
    /// grace period ran out.
    pub async fn drain_closing_idle(
        &self,
        grace: Duration,
        connections: Option<&Connections>,
        drained: impl Future<Output = ()>,
    ) -> Drained {
        self.stop();
        if let Some(connections) = connections {
            connections.shed_all();
        }
        tokio::pin!(drained);
        if tokio::time::timeout(grace, &mut drained).await.is_ok() {
            return Drained::InTime;
        }
        tracing::warn!(
            ?grace,
            "requests still in flight after the grace period; closing their connections"
        );
        self.force();
        match tokio::time::timeout(FORCED_GRACE, drained).await {
            Ok(()) => Drained::Forced,
            Err(_) => Drained::Abandoned,
        }
    }
}

impl Shutdown {
    /// [`Shutdown::drain_closing_idle`] of the listeners' tasks in `tasks`
    /// (drained: every task ended); tasks still running when the drain is
    /// abandoned (a plain HTTP listener's) are aborted and waited for.
    pub async fn drain_tasks(
        &self,
        grace: Duration,
        connections: Option<&Connections>,
        tasks: &mut tokio::task::JoinSet<()>,
    ) -> Drained {
        let drained = self
            .drain_closing_idle(grace, connections, async {
                while tasks.join_next().await.is_some() {}
            })
            .await;
        if drained == Drained::Abandoned {
            tasks.abort_all();
            while tasks.join_next().await.is_some() {}
        }
        drained
    }
}

impl Stopping {
    /// The stop signal, for the list of connections to tell whose listener
    /// stopped.
    pub(crate) fn stop_signal(&self) -> watch::Receiver<bool> {
        self.stopped.clone()
    }

    /// Resolves once the server stops accepting (or its [`Shutdown`] is
    /// gone).
    pub fn stopped(&self) -> impl Future<Output = ()> + Send + 'static {
        let mut stopped = self.stopped.clone();
        async move {
            let _ = stopped.wait_for(|stopped| *stopped).await;
        }
    }

    /// Resolves once the end is forced (or the [`Shutdown`] is gone).
    pub fn forced(&self) -> impl Future<Output = ()> + Send + 'static {
        let mut forced = self.forced.clone();
        async move {
            let _ = forced.wait_for(|forced| *forced).await;
        }
    }

    /// Whether the server has stopped accepting.
    pub fn is_stopped(&self) -> bool {
        *self.stopped.borrow()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test(start_paused = true)]
    async fn a_drain_that_finishes_in_time_is_not_forced() {
        let (shutdown, stopping) = Shutdown::new();
        let watched = stopping.clone();
        let drained = async move {
            watched.stopped().await;
            tokio::time::sleep(Duration::from_secs(2)).await;
        };
        assert_eq!(
            shutdown.drain(Duration::from_secs(5), drained).await,
            Drained::InTime
        );
        assert!(stopping.is_stopped());
        assert!(
            tokio::time::timeout(Duration::ZERO, stopping.forced())
                .await
                .is_err(),
            "not forced"
        );
    }

    #[tokio::test(start_paused = true)]
    async fn past_the_grace_the_end_is_forced_then_abandoned() {
        let (shutdown, stopping) = Shutdown::new();
        let watched = stopping.clone();
        let ends_when_forced = async move { watched.forced().await };
        assert_eq!(
            shutdown
                .drain(Duration::from_secs(5), ends_when_forced)
                .await,
            Drained::Forced
        );
        let (shutdown, _stopping) = Shutdown::new();
        let never = std::future::pending::<()>();
        let start = tokio::time::Instant::now();
        assert_eq!(
            shutdown.drain(Duration::from_secs(5), never).await,
            Drained::Abandoned
        );
        // 5 s of grace, then FORCED_GRACE (1 s), on tokio's paused clock.
        assert_eq!(start.elapsed(), Duration::from_secs(6));
    }

    #[tokio::test]
    async fn a_dropped_shutdown_stops_and_forces() {
        let (shutdown, stopping) = Shutdown::new();
        drop(shutdown);
        stopping.stopped().await;
        stopping.forced().await;
    }
}
