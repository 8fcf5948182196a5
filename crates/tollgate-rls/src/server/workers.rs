//! The gRPC listener's worker threads: each runs a single-threaded event loop
//! serving the connections the accepting task hands it, one in turn to each
//! worker. A call then never changes threads: its HTTP/2 stream, the
//! decision and, on Redis, the store's batcher and connection of that thread
//! (see tollgate-redis's `batchers.rs`) all run on one event loop. Envoy
//! opens a connection per worker of its own, so its calls spread over them.

use std::sync::Arc;
use std::thread::JoinHandle;

use tokio::net::TcpListener;
use tokio::sync::{mpsc, watch};
use tokio_stream::StreamExt as _;
use tokio_stream::wrappers::UnboundedReceiverStream;

use super::health::Health;
use super::{Decide, grpc, until_stopped};

/// How long the listener pauses after failing to accept a connection.
const ACCEPT_PAUSE: std::time::Duration = std::time::Duration::from_millis(10);

/// The queues of the worker threads that serve one gRPC listener.
pub(crate) struct Workers {
    /// Each worker's queue of accepted connections.
    queues: Vec<mpsc::UnboundedSender<std::net::TcpStream>>,
}

impl Workers {
    /// Starts `count` workers (at least one), each serving the health service
    /// and `decider` until `stopped` says so or its queue is dropped; and
    /// their threads, which end when they have.
    ///
    /// # Errors
    ///
    /// The system's error when a thread or its event loop cannot be started.
    pub(crate) fn start(
        count: usize,
        decider: &Arc<dyn Decide>,
        health: &Health,
        stopped: &watch::Receiver<bool>,
    ) -> std::io::Result<(Workers, Vec<JoinHandle<()>>)> {
        let mut queues = Vec::new();
        let mut threads = Vec::new();
        for index in 0..count.max(1) {
            let (queue, connections) = mpsc::unbounded_channel::<std::net::TcpStream>();
            let event_loop = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()?;
            let grpc_service = grpc::service(Arc::clone(decider));
            let health_service = health.grpc_service();
            let stop = until_stopped(stopped.clone());
            let thread = std::thread::Builder::new()
                .name(format!("tollgate-rls-{index}"))
                .spawn(move || {
                    event_loop.block_on(async move {
                        // Registered with this thread's event loop as it
                        // takes them.
                        let incoming = UnboundedReceiverStream::new(connections)
                            .map(tokio::net::TcpStream::from_std);
                        let served = tonic::transport::Server::builder()
                            .add_service(health_service)
                            .add_service(grpc_service)
                            .serve_with_incoming_shutdown(incoming, stop)
                            .await;
                        if let Err(error) = served {
                            tracing::error!(%error, "the gRPC listener failed");
                        }
                    });
                })?;
            queues.push(queue);
            threads.push(thread);
        }
        Ok((Workers { queues }, threads))
    }

    /// Accepts connections on `listener` until `stopped`, handing each to the
    /// next worker in turn, with `TCP_NODELAY` set (HTTP/2 frames are small:
    /// Nagle's algorithm would hold an answer back until the peer's delayed
    /// acknowledgement).
    pub(crate) async fn accept(self, listener: TcpListener, stopped: watch::Receiver<bool>) {
        let mut next = 0;
        let stop = until_stopped(stopped);
        tokio::pin!(stop);
        loop {
            let accepted = tokio::select! {
                () = &mut stop => return,
                accepted = listener.accept() => accepted,
            };
            let stream = match accepted {
                Ok((stream, _)) => stream,
                Err(error) => {
                    // Out of file descriptors, a connection reset before it
                    // was taken: the listener goes on, after a pause that
                    // lets descriptors free up.
                    tracing::warn!(%error, "the gRPC listener could not accept a connection");
                    tokio::time::sleep(ACCEPT_PAUSE).await;
                    continue;
                }
            };
            let _ = stream.set_nodelay(true);
            let Ok(stream) = stream.into_std() else {
                continue;
            };
            if let Some(queue) = self.queues.get(next % self.queues.len().max(1)) {
                let _ = queue.send(stream);
            }
            next = next.wrapping_add(1);
        }
    }
}
