//! The accept loop's step, with its one error policy.
//!
//! - A connection that failed on its own way in (`ECONNABORTED`,
//!   `ECONNREFUSED`, `ECONNRESET`) is passed over at once: it says nothing
//!   about the listener.
//! - Any other error (out of file descriptors, `EMFILE`/`ENFILE`; out of
//!   memory) is logged and the listener pauses [`ACCEPT_PAUSE`] before it
//!   accepts again, rather than spin on an error that repeats until
//!   connections close; a stop ends the pause.
//!
//! Every listener of every server accepts through it: the gateway's proxy
//! listener and `tollgate rls`'s gRPC listener directly, the plain HTTP
//! listeners (the gateway's admin listener, `tollgate rls`'s HTTP, debug and
//! Prometheus listeners) through [`serve_http`](crate::serve_http).
//!
//! Every accepted connection gets `TCP_NODELAY`: requests and answers are
//! small, and Nagle's algorithm would hold one back until the peer's delayed
//! acknowledgement.

use std::net::SocketAddr;
use std::time::Duration;

use tokio::net::{TcpListener, TcpStream};

use crate::shed::Connections;
use crate::shutdown::Stopping;

/// How long a listener pauses after an `accept` error that is not the
/// connection's own: nginx's pause when it runs out of file descriptors
/// (`accept_mutex_delay`, 500 ms, in `ngx_event_accept.c`).
pub const ACCEPT_PAUSE: Duration = Duration::from_millis(500);

/// How long a listener waits after shedding a connection (`shed.rs`) for its
/// descriptor to be closed by the connection's task, before it accepts
/// again.
pub const SHED_PAUSE: Duration = Duration::from_millis(5);

/// The next connection on `listener`, with `TCP_NODELAY` set, and its peer;
/// `None` once `stopping` says stop (stopping wins over a connection
/// arriving at that moment). Out of file descriptors, it sheds the oldest
/// idle connections of `connections` ([`SHED_PER_SHORTAGE`]) and accepts
/// again at once; with none to
/// shed it pauses [`ACCEPT_PAUSE`].
pub async fn accept(
    listener: &TcpListener,
    stopping: &Stopping,
    connections: &Connections,
) -> Option<(TcpStream, SocketAddr)> {
    loop {
        let accepted = tokio::select! {
            biased;
            () = stopping.stopped() => return None,
            accepted = listener.accept() => accepted,
        };
        match accepted {
            Ok((stream, peer)) => {
                if let Err(error) = stream.set_nodelay(true) {
                    tracing::debug!(%error, "cannot set TCP_NODELAY");
                }
                return Some((stream, peer));
            }
            Err(error) if is_connection_error(&error) => {
                tracing::debug!(%error, "a connection failed before it was accepted");
            }
            Err(error) => {
                let pause = if is_out_of_descriptors(&error) && shed(connections) {
                    tracing::warn!(%error, "out of file descriptors: the oldest idle connection was closed");
                    SHED_PAUSE
                } else {
                    tracing::error!(%error, pause = ?ACCEPT_PAUSE, "cannot accept a connection");
                    ACCEPT_PAUSE
                };
                tokio::select! {
                    biased;
                    () = stopping.stopped() => return None,
                    () = tokio::time::sleep(pause) => {}
                }
            }
        }
    }
}

/// How many idle connections are shed when a listener is out of file
/// descriptors: one for the connection it accepts, one for the upstream
/// connection its request may need (a gateway's), so that it is answered.
pub const SHED_PER_SHORTAGE: usize = 2;

/// Sheds up to [`SHED_PER_SHORTAGE`] of the oldest idle connections, less
/// those shed before and still closing (a busy worker has not yet run their
/// tasks: shedding more would close connections for nothing); whether any
/// is closing now.
fn shed(connections: &Connections) -> bool {
    let mut shed = connections.closing();
    if shed >= SHED_PER_SHORTAGE {
        return true;
    }
    while shed < SHED_PER_SHORTAGE && connections.shed_oldest_idle() {
        shed += 1;
    }
    shed > 0
}

/// Whether an `accept` error says the process (`EMFILE`) or the system
/// (`ENFILE`) has no file descriptor left.
fn is_out_of_descriptors(error: &std::io::Error) -> bool {
    matches!(error.raw_os_error(), Some(libc::EMFILE | libc::ENFILE))
}

/// Whether `error`, or an error it was caused by, says the process or the
/// system has no file descriptor left: for a connection a server opens
/// itself (the gateway's to an upstream), which then sheds an idle client
/// connection and tries once more, rather than take the upstream for down.
pub fn out_of_descriptors(error: &(dyn std::error::Error + 'static)) -> bool {
    let mut cause = Some(error);
    while let Some(error) = cause {
        if let Some(io) = error.downcast_ref::<std::io::Error>() {
            if is_out_of_descriptors(io) {
                return true;
            }
            // An I/O error made from another (`io::Error::other`) gives it
            // by `get_ref`, not as its source.
            if let Some(inner) = io.get_ref() {
                cause = Some(inner);
                continue;
            }
        }
        cause = error.source();
    }
    false
}

/// Whether an `accept` error is the connection's own, not the listener's.
fn is_connection_error(error: &std::io::Error) -> bool {
    use std::io::ErrorKind::{ConnectionAborted, ConnectionRefused, ConnectionReset};
    matches!(
        error.kind(),
        ConnectionAborted | ConnectionRefused | ConnectionReset
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::shutdown::Shutdown;

    #[test]
    fn only_the_connections_own_errors_are_passed_over_without_a_pause() {
        use std::io::{Error, ErrorKind};
        assert!(is_connection_error(&Error::from(
            ErrorKind::ConnectionReset
        )));
        assert!(is_connection_error(&Error::from(
            ErrorKind::ConnectionAborted
        )));
        assert!(is_connection_error(&Error::from(
            ErrorKind::ConnectionRefused
        )));
        // EMFILE: too many open files.
        assert!(!is_connection_error(&Error::from_raw_os_error(24)));
        assert!(!is_connection_error(&Error::from(ErrorKind::OutOfMemory)));
        assert!(is_out_of_descriptors(&Error::from_raw_os_error(24)));
        assert!(is_out_of_descriptors(&Error::from_raw_os_error(23)));
        assert!(!is_out_of_descriptors(&Error::from(ErrorKind::OutOfMemory)));
        // Found as the cause of another error, as a connector wraps it.
        let wrapped = Error::other(Error::from_raw_os_error(24));
        assert!(out_of_descriptors(&wrapped));
        assert!(!out_of_descriptors(&Error::other("refused")));
    }

    #[tokio::test]
    async fn a_connection_is_accepted_without_nagle_and_a_stop_ends_the_wait() {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let address = listener.local_addr().unwrap();
        let (shutdown, stopping) = Shutdown::new();
        let client = TcpStream::connect(address).await.unwrap();
        let (stream, peer) = accept(&listener, &stopping, &Connections::default())
            .await
            .unwrap();
        assert_eq!(peer, client.local_addr().unwrap());
        assert!(stream.nodelay().unwrap());
        shutdown.stop();
        assert!(
            accept(&listener, &stopping, &Connections::default())
                .await
                .is_none()
        );
    }

    #[tokio::test]
    async fn a_stop_ends_a_wait_already_under_way() {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let (shutdown, stopping) = Shutdown::new();
        let waiting = tokio::spawn(async move {
            accept(&listener, &stopping, &Connections::default())
                .await
                .is_none()
        });
        // The wait is under way (no connection comes); the stop ends it.
        tokio::task::yield_now().await;
        shutdown.stop();
        assert!(waiting.await.unwrap(), "no connection, and the wait ended");
    }
}
