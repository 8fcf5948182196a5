//! The gRPC listener's worker threads: each runs a single-threaded event loop
//! serving the connections the accepting task hands it, each new connection
//! to the worker with the fewest open. A call then never changes threads:
//! its HTTP/2 stream, the decision and, on one Redis server, the store's
//! batcher and connection of that thread (tollgate-redis's `batchers.rs`)
//! all run on one event loop. Envoy opens a connection per worker of its own;
//! counting open connections, rather than taking workers in turn, keeps
//! short-lived ones (health probes) from putting two of Envoy's on one
//! worker.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use tokio::net::TcpListener;
use tokio::sync::{mpsc, oneshot, watch};
use tokio_stream::StreamExt as _;
use tokio_stream::wrappers::UnboundedReceiverStream;

use super::counted_stream::{CountedStream, Live};
use super::health::Health;
use super::{Decide, grpc, until_stopped};

/// The longest a worker's ended event loop waits for its blocking tasks.
const EVENT_LOOP_END: std::time::Duration = std::time::Duration::from_millis(500);

/// How long the listener pauses after failing to accept a connection.
const ACCEPT_PAUSE: std::time::Duration = std::time::Duration::from_millis(10);

/// One worker as the accepting task sees it.
struct Worker {
    /// Its queue of accepted connections.
    connections: mpsc::UnboundedSender<(std::net::TcpStream, Live)>,
    /// Its open connections.
    open: Arc<AtomicUsize>,
}

/// The workers that serve one gRPC listener.
pub(crate) struct Workers {
    workers: Vec<Worker>,
}

/// The position of the smallest of `open`, the first of them on a tie.
fn fewest(open: &[usize]) -> Option<usize> {
    open.iter()
        .enumerate()
        .min_by_key(|&(position, &count)| (count, position))
        .map(|(position, _)| position)
}

/// A worker's thread, and a receiver that resolves (with an error) as it
/// ends.
pub(crate) struct Ending {
    thread: std::thread::JoinHandle<()>,
    end: oneshot::Receiver<()>,
}

impl Ending {
    /// Waits until the thread has ended: without holding a thread until its
    /// end is near, then joining it.
    pub(crate) async fn wait(self) {
        let _ = self.end.await;
        let thread = self.thread;
        let _ = tokio::task::spawn_blocking(move || thread.join()).await;
    }
}

/// What a worker is started with.
pub(crate) struct Signals {
    /// Stop accepting and finish the calls in flight.
    pub(crate) stopped: watch::Receiver<bool>,
    /// Stop now: end the event loop, dropping its connections.
    pub(crate) forced: watch::Receiver<bool>,
}

impl Workers {
    /// Starts `count` workers (at least one), each serving the health service
    /// and `decider` until `signals` say so or its queue is dropped; and
    /// their threads, each with a receiver that resolves (with an error) as
    /// the thread ends, its event loop and connections dropped.
    ///
    /// # Errors
    ///
    /// The system's error when a thread cannot be started (the threads
    /// started before it end when the returned error drops their queues).
    pub(crate) fn start(
        count: usize,
        decider: &Arc<dyn Decide>,
        health: &Health,
        signals: &Signals,
    ) -> std::io::Result<(Workers, Vec<Ending>)> {
        let mut workers = Vec::new();
        let mut ended = Vec::new();
        for index in 0..count.max(1) {
            let (queue, connections) = mpsc::unbounded_channel();
            let (ends, end) = oneshot::channel::<()>();
            let grpc_service = grpc::service(Arc::clone(decider));
            let health_service = health.grpc_service();
            let stop = until_stopped(signals.stopped.clone());
            let force = until_stopped(signals.forced.clone());
            let thread = std::thread::Builder::new()
                .name(format!("rls-worker-{index}"))
                .spawn(move || {
                    // Dropped last, after the event loop and its connections:
                    // the thread's end is reported however it ends.
                    let _ends = ends;
                    let event_loop = match tokio::runtime::Builder::new_current_thread()
                        .enable_all()
                        .build()
                    {
                        Ok(event_loop) => event_loop,
                        Err(error) => {
                            tracing::error!(%error, "a gRPC worker cannot start its event loop");
                            return;
                        }
                    };
                    let served = async move {
                        // Registered with this thread's event loop as it
                        // takes them.
                        let incoming = UnboundedReceiverStream::new(connections).map(
                            |(stream, live): (std::net::TcpStream, Live)| {
                                tokio::net::TcpStream::from_std(stream)
                                    .map(|stream| CountedStream::new(stream, live))
                            },
                        );
                        let serving = tonic::transport::Server::builder()
                            .add_service(health_service)
                            .add_service(grpc_service)
                            .serve_with_incoming_shutdown(incoming, stop);
                        tokio::select! {
                            served = serving => if let Err(error) = served {
                                tracing::error!(%error, "the gRPC listener failed");
                            },
                            () = force => {}
                        }
                    };
                    event_loop.block_on(served);
                    // Its connections are dropped with it; a blocking task
                    // (a DNS lookup) is not waited for past this.
                    event_loop.shutdown_timeout(EVENT_LOOP_END);
                })?;
            workers.push(Worker {
                connections: queue,
                open: Arc::new(AtomicUsize::new(0)),
            });
            ended.push(Ending { thread, end });
        }
        Ok((Workers { workers }, ended))
    }

    /// Accepts connections on `listener` until `stopped`, handing each to the
    /// worker with the fewest open (the first of them on a tie), with
    /// `TCP_NODELAY` set (HTTP/2 frames are small: Nagle's algorithm would
    /// hold an answer back until the peer's delayed acknowledgement).
    pub(crate) async fn accept(mut self, listener: TcpListener, stopped: watch::Receiver<bool>) {
        let stop = until_stopped(stopped.clone());
        tokio::pin!(stop);
        loop {
            let accepted = tokio::select! {
                // Stopping wins over a connection arriving at that moment:
                // the workers no longer take any.
                biased;
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
            let stream = match stream.into_std() {
                Ok(stream) => stream,
                Err(error) => {
                    tracing::warn!(%error, "the gRPC listener could not take a connection");
                    continue;
                }
            };
            // A worker whose thread has ended (which `wait_for_failure`
            // reports) takes no more; with none left, the listener stops.
            let mut stream = stream;
            loop {
                let open: Vec<usize> = self
                    .workers
                    .iter()
                    .map(|worker| worker.open.load(Ordering::Relaxed))
                    .collect();
                let Some(position) = fewest(&open) else {
                    tracing::error!("every gRPC worker has stopped");
                    return;
                };
                let worker = &self.workers[position];
                match worker
                    .connections
                    .send((stream, Live::count_in(&worker.open)))
                {
                    Ok(()) => break,
                    Err(mpsc::error::SendError((returned, _))) => {
                        if *stopped.borrow() {
                            // Shutting down: the workers stopped taking
                            // connections.
                            return;
                        }
                        tracing::error!(
                            "a gRPC worker has stopped; its connections go to the others"
                        );
                        self.workers.remove(position);
                        stream = returned;
                    }
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::fewest;

    #[test]
    fn a_connection_goes_to_the_worker_with_the_fewest_open_the_first_on_a_tie() {
        assert_eq!(fewest(&[0, 0]), Some(0));
        assert_eq!(fewest(&[1, 0]), Some(1));
        assert_eq!(fewest(&[2, 1, 1]), Some(1));
        assert_eq!(fewest(&[3, 5, 3, 4]), Some(0));
        assert_eq!(fewest(&[]), None);
    }
}
