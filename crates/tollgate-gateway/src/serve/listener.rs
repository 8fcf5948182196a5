//! The gateway listener of one worker: it accepts client connections and
//! serves each with hyper (HTTP/1.1, or HTTP/2 with prior knowledge; over
//! TLS with `[tls]`, HTTP/2 or HTTP/1.1 as ALPN chose), every request going
//! straight to [`handle`] with its [`ClientConnection`]. On shutdown it stops accepting, asks every connection to close once its
//! requests are answered, and returns when all have.

use std::convert::Infallible;
use std::error::Error;
use std::sync::Arc;
use std::time::Duration;

use axum::body::Body;
use hyper::body::Incoming;
use hyper::service::service_fn;
use hyper_util::rt::{TokioExecutor, TokioIo};
use hyper_util::server::conn::auto;
use hyper_util::server::graceful::GracefulShutdown;
use tokio::net::TcpListener;
use tollgate_serve::{Activity, InFlight, InFlightBody, KeptTimers, Stopping, Tracked};

use crate::app::Worker;
use crate::observe::access_log::AccessLog;
use crate::request::handle::handle;
use crate::serve::client::ClientConnection;

/// Serves `listener` until `stopping` says stop, then drains its
/// connections. Accepting follows `tollgate_serve::accept`'s error policy,
/// and every connection has `TCP_NODELAY`.
pub(crate) async fn serve(listener: TcpListener, worker: Worker, stopping: Stopping) {
    let mut builder = auto::Builder::new(TokioExecutor::new());
    // An HTTP/1 client gets hyper's 30 s to send a request's headers (an idle
    // keep-alive connection is closed after 30 s), so such a connection
    // cannot hold a shutdown up for ever. The timers are this worker's
    // (its connections share one event loop), kept and reset per request.
    builder.http1().timer(KeptTimers::default());
    let graceful = GracefulShutdown::new();
    let tls = worker
        .app
        .listener_tls
        .as_ref()
        .map(|tls| (tls.acceptor.clone(), Arc::new(builder.clone())));
    while let Some((stream, peer)) =
        tollgate_serve::accept(&listener, &stopping, &worker.app.connections).await
    {
        // Every phase of the connection is timed: see tollgate_serve::idle.
        let idle_timeout = worker.app.in_force.load().config.idle_timeout;
        let access_log = worker.app.access_log.clone();
        let activity = Activity::new();
        worker.app.connections.register_for(&activity, &stopping);
        let stream = Tracked::new(stream, &activity);
        let worker = worker.clone();
        let client = Arc::new(match tls {
            Some(_) => ClientConnection::over_tls(peer, &activity),
            None => ClientConnection::new(peer, &activity),
        });
        let requests = Arc::clone(&activity);
        let service = service_fn(move |request: http::Request<Incoming>| {
            let (worker, client) = (worker.clone(), Arc::clone(&client));
            // In flight until the response's body has been handed on whole.
            let in_flight = InFlight::start(&requests);
            async move {
                let request = request.map(Body::new);
                let response = handle(worker, client, request).await;
                Ok::<_, Infallible>(
                    response.map(|body| Body::new(InFlightBody::new(body, in_flight))),
                )
            }
        });
        if let Some((acceptor, builder)) = &tls {
            let accepting = acceptor.accept(stream);
            let (builder, watcher) = (Arc::clone(builder), graceful.watcher());
            tokio::spawn(async move {
                // The handshake ends in time, or the connection is closed; a
                // silent one is also closed once idle or shed.
                let handshake = tokio::select! {
                    handshake = tokio::time::timeout(HANDSHAKE_TIMEOUT, accepting) => handshake,
                    () = tollgate_serve::idle(&activity, idle_timeout) => {
                        tracing::debug!(%peer, "idle or shed during its TLS handshake");
                        return;
                    }
                };
                let stream = match handshake {
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
                until_idle(
                    watcher.watch(connection.into_owned()),
                    &activity,
                    idle_timeout,
                    access_log,
                )
                .await;
            });
            continue;
        }
        // With upgrades: a WebSocket's connection leaves hyper after its 101
        // (see `proxy/upgrade.rs`).
        let connection = builder
            .serve_connection_with_upgrades(TokioIo::new(stream), service)
            .into_owned();
        let connection = graceful.watch(connection);
        tokio::spawn(
            async move { until_idle(connection, &activity, idle_timeout, access_log).await },
        );
    }
    drop(listener);
    graceful.shutdown().await;
}

/// How long a client has for its TLS handshake before its connection is
/// closed.
const HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(10);

/// Serves `connection` until it ends, or until it has been idle for
/// `idle_timeout` (no byte, no request in flight), when it is dropped and
/// its socket closed. A request the HTTP parser rejected (and hyper
/// answered) still gets its access-log line.
async fn until_idle(
    connection: impl Future<Output = Result<(), Box<dyn Error + Send + Sync>>>,
    activity: &Activity,
    idle_timeout: Duration,
    access_log: Option<AccessLog>,
) {
    match tollgate_serve::race_idle(connection, activity, idle_timeout).await {
        Some(Err(error)) => {
            tracing::debug!(%error, "client connection ended");
            if let (Some(access_log), Some(status)) = (access_log, rejected_status(&*error)) {
                access_log.rejected(status);
            }
        }
        Some(Ok(())) => {}
        None => tracing::debug!(?idle_timeout, "idle client connection closed"),
    }
}

/// The status hyper's HTTP/1 server answered a request it could not parse
/// with, when `error` is such a rejection: hyper's `Server::on_error` (hyper
/// 1.x, `proto/h1/role.rs`) writes 431 when the head is too large, 414 when
/// the URI is, and 400 for a bad method, URI, version or header; it writes
/// nothing for the other parse errors (an HTTP/2 preface on an HTTP/1
/// connection, its own internal error), which hyper tells apart only by
/// their text.
fn rejected_status(error: &(dyn Error + 'static)) -> Option<u16> {
    let error = error.downcast_ref::<hyper::Error>()?;
    if !error.is_parse() || error.is_parse_status() {
        return None;
    }
    let text = error.to_string();
    if error.is_parse_too_large() {
        return Some(if text == "URI too long" { 414 } else { 431 });
    }
    let unanswered = text.contains("HTTP2 preface") || text.starts_with("internal error");
    (!unanswered).then_some(400)
}
