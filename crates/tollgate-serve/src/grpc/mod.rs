//! Serving gRPC (tonic) on worker threads: each worker runs a
//! single-threaded event loop serving the connections the acceptor hands it,
//! each new connection to the worker with the fewest open ([`FewestOpen`]).
//! A call then never changes threads: its HTTP/2 stream and whatever the
//! service does for it (on one Redis server, the store's batcher and
//! connection of that thread) run on one event loop.
//!
//! Every connection counts itself among its worker's open connections
//! ([`Live`]), closes itself once idle ([`ClosedWhenIdle`](crate::ClosedWhenIdle),
//! in `counted_stream`), and every call, a long-lived stream included, is in
//! flight on its connection from its headers until its response's last byte
//! (`in_flight`), so that no call is cut as idle or shed.

mod counted_stream;
mod in_flight;

use std::sync::Arc;

use tokio::net::TcpListener;
use tokio_stream::StreamExt as _;
use tokio_stream::wrappers::UnboundedReceiverStream;
use tonic::service::Routes;

use crate::{Connections, FewestOpen, Live, Stopping, WorkerThread};
use counted_stream::CountedStream;
use in_flight::InFlightLayer;

/// Starts `count` workers (at least one) named `name-0`, `name-1`…, each
/// serving the gRPC services `routes` builds for it (a connection idle for
/// `idle_timeout`, no byte moved and no call in flight, closed; every
/// connection listed in `listed`, for shedding) until `stopping` says stop
/// (the calls in flight finish) or force (its event loop ends, dropping its
/// connections); and the acceptor task for `listener`, to be spawned on the
/// caller's runtime.
///
/// # Errors
///
/// The system's error when a thread cannot be started (the threads started
/// before it end when their acceptor, dropped with the error, drops their
/// queues).
pub fn serve_grpc(
    name: &str,
    count: usize,
    listener: TcpListener,
    (idle_timeout, listed): (std::time::Duration, &Arc<Connections>),
    routes: impl Fn() -> Routes,
    stopping: &Stopping,
) -> std::io::Result<(impl Future<Output = ()> + Send + 'static, Vec<WorkerThread>)> {
    let mut spread = FewestOpen::new();
    let mut threads = Vec::new();
    for index in 0..count.max(1) {
        let connections = spread.add_worker();
        let routes = routes();
        let stop = stopping.stopped();
        let force = stopping.forced();
        let listed = Arc::clone(listed);
        let listener_stopping = stopping.clone();
        threads.push(crate::spawn_event_loop(
            format!("{name}-{index}"),
            move || async move {
                // Registered with this thread's event loop as it takes them.
                let incoming = UnboundedReceiverStream::new(connections).map(
                    |(stream, live): (std::net::TcpStream, Live)| {
                        tokio::net::TcpStream::from_std(stream).map(|stream| {
                            CountedStream::new(
                                stream,
                                live,
                                (idle_timeout, &listed),
                                &listener_stopping,
                            )
                        })
                    },
                );
                let serving = tonic::transport::Server::builder()
                    .layer(InFlightLayer)
                    .add_routes(routes)
                    .serve_with_incoming_shutdown(incoming, stop);
                tokio::select! {
                    served = serving => if let Err(error) = served {
                        tracing::error!(%error, "the gRPC listener failed");
                    },
                    () = force => {}
                }
            },
        )?);
    }
    Ok((
        spread.run(listener, stopping.clone(), Arc::clone(listed)),
        threads,
    ))
}
