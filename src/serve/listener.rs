//! The gateway listener of one worker: it accepts client connections and
//! serves each with hyper (HTTP/1.1, or HTTP/2 with prior knowledge), every
//! request going straight to [`app::handle`] with the connection's peer
//! address and its own upstream connection (see [`ClientConnection`]). On shutdown it stops accepting,
//! asks every connection to close once its requests are answered, and returns
//! when all have.

use std::convert::Infallible;
use std::sync::Arc;
use std::time::Duration;

use axum::body::Body;
use hyper::body::Incoming;
use hyper::service::service_fn;
use hyper_util::rt::{TokioExecutor, TokioIo};
use hyper_util::server::conn::auto;
use hyper_util::server::graceful::GracefulShutdown;
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::watch;

use super::app::{self, Worker};
use super::client::ClientConnection;

/// Serves `listener` until `stopped` turns true, then drains its connections.
pub(crate) async fn serve(
    listener: TcpListener,
    worker: Worker,
    mut stopped: watch::Receiver<bool>,
) -> std::io::Result<()> {
    let builder = auto::Builder::new(TokioExecutor::new());
    let graceful = GracefulShutdown::new();
    loop {
        let (stream, peer) = tokio::select! {
            accepted = listener.accept() => match accepted {
                Ok(accepted) => accepted,
                Err(error) => {
                    wait_after_accept_error(&error).await;
                    continue;
                }
            },
            _ = stopped.wait_for(|stopped| *stopped) => break,
        };
        let worker = worker.clone();
        let client = Arc::new(ClientConnection::new(peer));
        let service = service_fn(move |request: http::Request<Incoming>| {
            let (worker, client) = (worker.clone(), Arc::clone(&client));
            async move {
                let request = request.map(Body::new);
                Ok::<_, Infallible>(app::handle(worker, client, request).await)
            }
        });
        let connection = builder
            .serve_connection(TokioIo::new(stream_for_requests(stream)), service)
            .into_owned();
        let connection = graceful.watch(connection);
        tokio::spawn(async move {
            if let Err(error) = connection.await {
                tracing::debug!(%error, "client connection ended");
            }
        });
    }
    drop(listener);
    graceful.shutdown().await;
    Ok(())
}

/// Requests and responses are small: each goes out at once (no Nagle delay).
fn stream_for_requests(stream: TcpStream) -> TcpStream {
    if let Err(error) = stream.set_nodelay(true) {
        tracing::debug!(%error, "cannot set TCP_NODELAY");
    }
    stream
}

/// After a failed `accept`: a connection that failed on its own way in is
/// nothing to wait for; anything else (out of file descriptors, say) is logged
/// and the listener pauses a second rather than spin.
async fn wait_after_accept_error(error: &std::io::Error) {
    use std::io::ErrorKind::{ConnectionAborted, ConnectionRefused, ConnectionReset};
    if matches!(
        error.kind(),
        ConnectionAborted | ConnectionRefused | ConnectionReset
    ) {
        return;
    }
    tracing::error!(%error, "cannot accept a connection");
    tokio::time::sleep(Duration::from_secs(1)).await;
}
