//! The gRPC listener's worker threads (`tollgate_serve::workers`): each runs
//! a single-threaded event loop serving the connections the acceptor hands
//! it, each new connection to the worker with the fewest open
//! (`tollgate_serve::FewestOpen`). A call then never changes threads: its
//! HTTP/2 stream, the decision and, on one Redis server, the store's batcher
//! and connection of that thread (tollgate-redis's `batchers.rs`) all run on
//! one event loop.

use std::sync::Arc;

use tokio::net::TcpListener;
use tokio_stream::StreamExt as _;
use tokio_stream::wrappers::UnboundedReceiverStream;
use tollgate_serve::{Connections, FewestOpen, Live, Stopping, WorkerThread};

use super::counted_stream::CountedStream;
use super::health::Health;
use super::in_flight::InFlightLayer;
use super::{Decide, grpc};

/// Starts `count` workers (at least one), each serving the health service
/// and `decider` (a connection idle for `idle_timeout`, no byte moved and no
/// call in flight, closed; every connection listed in `listed`, for
/// shedding) until `stopping` says stop (the calls in flight finish) or
/// force (its event loop ends, dropping its connections); and the acceptor
/// task for `listener`, to be spawned on the caller's runtime.
///
/// # Errors
///
/// The system's error when a thread cannot be started (the threads started
/// before it end when their acceptor, dropped with the error, drops their
/// queues).
pub(crate) fn start(
    count: usize,
    listener: TcpListener,
    (idle_timeout, listed): (std::time::Duration, &Arc<Connections>),
    decider: &Arc<dyn Decide>,
    health: &Health,
    stopping: &Stopping,
) -> std::io::Result<(impl Future<Output = ()> + Send + 'static, Vec<WorkerThread>)> {
    let mut spread = FewestOpen::new();
    let mut threads = Vec::new();
    for index in 0..count.max(1) {
        let connections = spread.add_worker();
        let grpc_service = grpc::service(Arc::clone(decider));
        let health_service = health.grpc_service();
        let stop = stopping.stopped();
        let force = stopping.forced();
        let listed = Arc::clone(listed);
        threads.push(tollgate_serve::spawn_event_loop(
            format!("rls-worker-{index}"),
            move || async move {
                // Registered with this thread's event loop as it takes them.
                let incoming = UnboundedReceiverStream::new(connections).map(
                    |(stream, live): (std::net::TcpStream, Live)| {
                        tokio::net::TcpStream::from_std(stream)
                            .map(|stream| CountedStream::new(stream, live, idle_timeout, &listed))
                    },
                );
                let serving = tonic::transport::Server::builder()
                    .layer(InFlightLayer)
                    .add_service(health_service)
                    .add_service(grpc_service)
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
