//! Serving one client connection of the gateway listener, in its own task:
//! a plain one by its first bytes, peeked (hyper's HTTP/1 connection alone
//! when they are not HTTP/2's preface, see `tollgate_serve::first_bytes`;
//! hyper-util's `auto` otherwise), a TLS one after its handshake by `auto`
//! (HTTP/2 or HTTP/1.1 as ALPN chose). Either is closed once idle
//! (`tollgate_serve::race_idle`) and asked to close gracefully once the
//! listener stops (`tollgate_serve::close_when_stopped`).

use std::convert::Infallible;
use std::error::Error;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use axum::body::Body;
use hyper::body::Incoming;
use hyper::server::conn::http1;
use hyper_util::rt::{TokioExecutor, TokioIo};
use hyper_util::server::conn::auto;
use tokio::net::TcpStream;
use tollgate_serve::{
    Activity, CloseGracefully, FirstBytes, KeptTimers, Stopping, Tracked, close_when_stopped,
    first_bytes,
};

use crate::observe::access_log::AccessLog;

/// How long a client has for its TLS handshake before its connection is
/// closed.
const HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(10);

/// The builders of one worker's connections: hyper's HTTP/1 connection,
/// and hyper-util's `auto` for what may be HTTP/2.
pub(crate) struct Builders {
    http1: http1::Builder,
    auto: auto::Builder<TokioExecutor>,
}

impl Builders {
    /// The builders of one worker. Every HTTP/1 setting is given to both
    /// (an HTTP/1 client may be served by either).
    pub(crate) fn new() -> Builders {
        // An HTTP/1 client gets hyper's 30 s to send a request's headers (an
        // idle keep-alive connection is closed after 30 s), so such a
        // connection cannot hold a shutdown up for ever. The timers are this
        // worker's (its connections share one event loop), kept and reset
        // per request.
        let timers = KeptTimers::default();
        let mut http1 = http1::Builder::new();
        http1.timer(timers.clone());
        let mut auto = auto::Builder::new(TokioExecutor::new());
        auto.http1().timer(timers);
        Builders { http1, auto }
    }
}

/// What a connection's requests are answered by: the gateway's handler. A
/// name for these bounds, implemented for every service that meets them
/// (bounds in a supertrait hold wherever the trait does).
pub(crate) trait ConnectionService:
    hyper::service::Service<
        http::Request<Incoming>,
        Response = http::Response<Body>,
        Error = Infallible,
        Future: Send + 'static,
    > + Send
    + 'static
{
}

impl<Service> ConnectionService for Service where
    Service: hyper::service::Service<
            http::Request<Incoming>,
            Response = http::Response<Body>,
            Error = Infallible,
            Future: Send + 'static,
        > + Send
        + 'static
{
}

/// One connection's context: its activity (idle and in-flight
/// bookkeeping), idle timeout, access log, listener's stop and peer.
pub(crate) struct ConnectionContext {
    pub(crate) activity: Arc<Activity>,
    pub(crate) idle_timeout: Duration,
    pub(crate) access_log: Option<AccessLog>,
    pub(crate) stopping: Stopping,
    pub(crate) peer: SocketAddr,
}

/// Serves the plain connection `stream` with `service`: HTTP/1 by hyper's
/// HTTP/1 connection alone, what may be HTTP/2 by `auto`, told from its
/// first bytes. A connection that sends none before it is idle or shed, or
/// before the listener stops, is closed.
pub(crate) async fn serve_plain(
    stream: TcpStream,
    builders: Arc<Builders>,
    service: impl ConnectionService,
    context: ConnectionContext,
) {
    let ConnectionContext {
        activity,
        idle_timeout,
        stopping,
        peer,
        ..
    } = &context;
    let first = tollgate_serve::race_idle(first_bytes(&stream), activity, *idle_timeout);
    let protocol = tokio::select! {
        // The first bytes first: a request already sent when the listener
        // stops is answered (with `Connection: close`), not cut off.
        biased;
        first = first => match first {
            Some(Ok(protocol)) => protocol,
            Some(Err(error)) => {
                tracing::debug!(%error, %peer, "client connection failed before a byte");
                return;
            }
            None => {
                tracing::debug!(?idle_timeout, %peer, "idle client connection closed");
                return;
            }
        },
        () = stopping.stopped() => {
            tracing::debug!(%peer, "client connection closed at the stop before a byte");
            return;
        }
    };
    let stream = TokioIo::new(Tracked::new(stream, activity));
    // With upgrades: a WebSocket's connection leaves hyper after its 101
    // (see `proxy/upgrade.rs`).
    match protocol {
        FirstBytes::Http1 => {
            let connection = builders.http1.serve_connection(stream, service);
            serve_to_end(connection.with_upgrades(), context).await;
        }
        FirstBytes::Http2OrUndecided => {
            let connection = builders
                .auto
                .serve_connection_with_upgrades(stream, service);
            serve_to_end(connection, context).await;
        }
    }
}

/// Serves a TLS connection with `service` once `accepting` has ended its
/// handshake, in time and before the connection is idle or shed.
pub(crate) async fn serve_tls(
    accepting: tokio_rustls::Accept<Tracked<TcpStream>>,
    builders: Arc<Builders>,
    service: impl ConnectionService,
    context: ConnectionContext,
) {
    let ConnectionContext {
        activity,
        idle_timeout,
        peer,
        ..
    } = &context;
    let handshake = tokio::select! {
        handshake = tokio::time::timeout(HANDSHAKE_TIMEOUT, accepting) => handshake,
        () = tollgate_serve::idle(activity, *idle_timeout) => {
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
    let connection = builders
        .auto
        .serve_connection_with_upgrades(TokioIo::new(stream), service);
    serve_to_end(connection, context).await;
}

/// Serves `connection` until it ends, asked to close gracefully once the
/// listener stops, or until it has been idle for the context's idle timeout
/// (no byte, no request in flight), when it is dropped and its socket
/// closed. A request the HTTP parser rejected (and hyper answered) still
/// gets its access-log line.
async fn serve_to_end<Connection, Failure>(connection: Connection, context: ConnectionContext)
where
    Connection: CloseGracefully<Output = Result<(), Failure>>,
    Failure: Into<Box<dyn Error + Send + Sync>>,
{
    let connection = close_when_stopped(connection, context.stopping.stopped());
    let idle_timeout = context.idle_timeout;
    match tollgate_serve::race_idle(connection, &context.activity, idle_timeout).await {
        Some(Err(error)) => {
            let error: Box<dyn Error + Send + Sync> = error.into();
            tracing::debug!(%error, peer = %context.peer, "client connection ended");
            if let (Some(access_log), Some(status)) = (context.access_log, rejected_status(&*error))
            {
                access_log.rejected(status);
            }
        }
        Some(Ok(())) => {}
        None => {
            tracing::debug!(?idle_timeout, peer = %context.peer, "idle client connection closed")
        }
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
