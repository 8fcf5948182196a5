//! The gateway listener of one worker: it accepts client connections and
//! serves each in its own task (`serve/connection.rs`: HTTP/1.1, or HTTP/2
//! with prior knowledge; over TLS with `[tls]`, HTTP/2 or HTTP/1.1 as ALPN
//! chose), every request going straight to [`handle`] with its
//! [`ClientConnection`]. On shutdown it stops accepting, asks every
//! connection to close once its requests are answered, and returns when all
//! have.

use std::convert::Infallible;
use std::sync::Arc;

use axum::body::Body;
use hyper::body::Incoming;
use hyper::service::service_fn;
use tokio::net::TcpListener;
use tokio_util::task::TaskTracker;
use tollgate_serve::{Activity, InFlight, InFlightBody, Stopping, Tracked};

use crate::app::Worker;
use crate::request::handle::handle;
use crate::serve::client::ClientConnection;
use crate::serve::connection::{Builders, ConnectionContext, serve_plain, serve_tls};

/// Serves `listener` until `stopping` says stop, then drains its
/// connections. Accepting follows `tollgate_serve::accept`'s error policy,
/// and every connection has `TCP_NODELAY`.
pub(crate) async fn serve(listener: TcpListener, worker: Worker, stopping: Stopping) {
    let builders = Arc::new(Builders::new());
    // Every connection's task, waited for once the listener stops.
    let connection_tasks = TaskTracker::new();
    let tls = worker
        .app
        .listener_tls
        .as_ref()
        .map(|tls| tls.acceptor.clone());
    while let Some((stream, peer)) =
        tollgate_serve::accept(&listener, &stopping, &worker.app.connections).await
    {
        // Every phase of the connection is timed: see tollgate_serve::idle.
        let activity = Activity::new();
        worker.app.connections.register_for(&activity, &stopping);
        let context = ConnectionContext {
            activity: Arc::clone(&activity),
            idle_timeout: worker.app.in_force.load().config.idle_timeout,
            access_log: worker.app.access_log.clone(),
            stopping: stopping.clone(),
            peer,
        };
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
        let builders = Arc::clone(&builders);
        match &tls {
            Some(acceptor) => {
                let accepting = acceptor.accept(Tracked::new(stream, &activity));
                connection_tasks.spawn(serve_tls(accepting, builders, service, context));
            }
            None => {
                connection_tasks.spawn(serve_plain(stream, builders, service, context));
            }
        }
    }
    drop(listener);
    connection_tasks.close();
    connection_tasks.wait().await;
}
