//! The gateway listener of one worker: it accepts client connections and
//! serves each with hyper (HTTP/1.1, or HTTP/2 with prior knowledge; over
//! TLS with `[tls]`, HTTP/2 or HTTP/1.1 as ALPN chose), every request going
//! straight to [`app::handle`] with its [`ClientConnection`]. On shutdown it stops accepting, asks every connection to close once its
//! requests are answered, and returns when all have.

use std::convert::Infallible;
use std::sync::Arc;
use std::time::Duration;

use axum::body::Body;
use hyper::body::Incoming;
use hyper::service::service_fn;
use hyper_util::rt::{TokioExecutor, TokioIo, TokioTimer};
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
    let mut builder = auto::Builder::new(TokioExecutor::new());
    // An HTTP/1 client gets hyper's 30 s to send a request's headers (an idle
    // keep-alive connection is closed after 30 s), so such a connection
    // cannot hold a shutdown up for ever.
    builder.http1().timer(TokioTimer::new());
    let graceful = GracefulShutdown::new();
    let tls = worker
        .app
        .listener_tls
        .as_ref()
        .map(|tls| (tls.acceptor.clone(), Arc::new(builder.clone())));
    loop {
        let accepted = tokio::select! {
            accepted = listener.accept() => accepted,
            _ = stopped.wait_for(|stopped| *stopped) => break,
        };
        let (stream, peer) = match accepted {
            Ok(accepted) => accepted,
            Err(error) => {
                if must_pause(&error) {
                    tokio::select! {
                        () = tokio::time::sleep(ACCEPT_PAUSE) => {}
                        _ = stopped.wait_for(|stopped| *stopped) => break,
                    }
                }
                continue;
            }
        };
        let worker = worker.clone();
        let client = Arc::new(match tls {
            Some(_) => ClientConnection::over_tls(peer),
            None => ClientConnection::new(peer),
        });
        let service = service_fn(move |request: http::Request<Incoming>| {
            let (worker, client) = (worker.clone(), Arc::clone(&client));
            async move {
                let request = request.map(Body::new);
                Ok::<_, Infallible>(app::handle(worker, client, request).await)
            }
        });
        if let Some((acceptor, builder)) = &tls {
            let accepting = acceptor.accept(without_nagle(stream));
            let (builder, watcher) = (Arc::clone(builder), graceful.watcher());
            tokio::spawn(async move {
                let stream = match tokio::time::timeout(HANDSHAKE_TIMEOUT, accepting).await {
                    Ok(Ok(stream)) => stream,
                    Ok(Err(error)) => {
                        tracing::debug!(%error, %peer, "TLS handshake failed");
                        return;
                    }
                    Err(_) => {
                        tracing::debug!(%peer, "TLS handshake timed out");
                        return;
                    }
                };
                let connection =
                    builder.serve_connection_with_upgrades(TokioIo::new(stream), service);
                if let Err(error) = watcher.watch(connection.into_owned()).await {
                    tracing::debug!(%error, "client connection ended");
                }
            });
            continue;
        }
        // With upgrades: a WebSocket's connection leaves hyper after its 101
        // (see `upgrade.rs`).
        let connection = builder
            .serve_connection_with_upgrades(TokioIo::new(without_nagle(stream)), service)
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

/// `stream` with `TCP_NODELAY`: requests and responses are small, each goes
/// out at once instead of waiting for the peer's acknowledgement (Nagle).
fn without_nagle(stream: TcpStream) -> TcpStream {
    if let Err(error) = stream.set_nodelay(true) {
        tracing::debug!(%error, "cannot set TCP_NODELAY");
    }
    stream
}

/// How long a client has for its TLS handshake before its connection is
/// closed.
const HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(10);

/// How long the listener pauses after an `accept` error that is not the
/// connection's own (out of file descriptors, say), rather than spin.
const ACCEPT_PAUSE: Duration = Duration::from_secs(1);

/// Whether an `accept` error calls for a pause (and a log line): not when a
/// connection failed on its own way in.
fn must_pause(error: &std::io::Error) -> bool {
    use std::io::ErrorKind::{ConnectionAborted, ConnectionRefused, ConnectionReset};
    if matches!(
        error.kind(),
        ConnectionAborted | ConnectionRefused | ConnectionReset
    ) {
        return false;
    }
    tracing::error!(%error, "cannot accept a connection");
    true
}
