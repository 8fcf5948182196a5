//! A connection raced against its idle check ([`race_idle`]), the check
//! polled only when its own timer or shed notice wakes it. Raced with
//! `tokio::select!`, which polls every branch whenever the task wakes, the
//! idle check (its `Notify` and its timer) was polled at each of the
//! connection's wakes, several times a request: about 800 instructions a
//! proxied request under callgrind (issue #30, PERFORMANCE.md).

use std::future::Future;
use std::task::Poll;
use std::time::Duration;

use crate::idle::{Activity, idle};
use crate::own_wakes::OnOwnWakes;

/// Polls `connection` until it ends (`Some` of its output) or until
/// `activity`'s connection is idle for `timeout` (`None`, `connection`
/// dropped unfinished), by the rules of [`idle`]. The idle check is polled
/// first, then only when its own waker is woken: never on the connection's
/// wakes.
pub async fn race_idle<Connection: Future>(
    connection: Connection,
    activity: &Activity,
    timeout: Duration,
) -> Option<Connection::Output> {
    let mut connection = std::pin::pin!(connection);
    let idle = std::pin::pin!(idle(activity, timeout));
    let mut idle = OnOwnWakes::new(idle);
    std::future::poll_fn(|context| {
        if let Poll::Ready(output) = connection.as_mut().poll(context) {
            return Poll::Ready(Some(output));
        }
        if idle.poll(context).is_ready() {
            return Poll::Ready(None);
        }
        Poll::Pending
    })
    .await
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::idle::{InFlight, Tracked};
    use std::sync::Arc;
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    use tokio::time::Instant;

    const TIMEOUT: Duration = Duration::from_secs(30);

    #[tokio::test(start_paused = true)]
    async fn a_connection_that_ends_first_gives_its_output() {
        let activity = Activity::new();
        let ended = race_idle(async { 7 }, &activity, TIMEOUT).await;
        assert_eq!(ended, Some(7));
    }

    #[tokio::test(start_paused = true)]
    async fn a_quiet_connection_is_dropped_a_timeout_after_its_last_byte() {
        let activity = Activity::new();
        let (mut client, server) = tokio::io::duplex(64);
        let mut server = Tracked::new(server, &activity);
        let start = Instant::now();
        // The connection reads two bytes, 20 s apart (each wakes it, not the
        // idle check), then waits for a third that never comes.
        let serving = async move {
            let mut byte = [0];
            server.read_exact(&mut byte).await.unwrap();
            server.read_exact(&mut byte).await.unwrap();
            server.read_exact(&mut byte).await
        };
        let writing = async move {
            tokio::time::sleep(Duration::from_secs(20)).await;
            client.write_all(b"x").await.unwrap();
            tokio::time::sleep(Duration::from_secs(20)).await;
            client.write_all(b"y").await.unwrap();
            client
        };
        let (raced, _client) = tokio::join!(race_idle(serving, &activity, TIMEOUT), writing);
        assert!(raced.is_none());
        // The last byte at 40 s: dropped at 70 s.
        assert_eq!(start.elapsed(), Duration::from_secs(70));
    }

    #[tokio::test(start_paused = true)]
    async fn a_shed_connection_is_dropped_once_its_request_ends() {
        let activity = Activity::new();
        let request = InFlight::start(&activity);
        let start = Instant::now();
        let shedding = {
            let activity = Arc::clone(&activity);
            async move {
                tokio::time::sleep(Duration::from_secs(5)).await;
                activity.shed();
                tokio::time::sleep(Duration::from_secs(5)).await;
                drop(request);
            }
        };
        let (raced, ()) = tokio::join!(
            race_idle(std::future::pending::<()>(), &activity, TIMEOUT),
            shedding
        );
        assert!(raced.is_none());
        // Shed at 5 s with a request in flight; dropped when it ends, 10 s.
        assert_eq!(start.elapsed(), Duration::from_secs(10));
    }
}
