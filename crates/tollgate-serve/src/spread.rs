//! The two ways a listener's connections are spread over worker threads.
//!
//! - [`bind_reuse_port`]: one `SO_REUSEPORT` socket per worker, each worker
//!   accepting on its own; the kernel spreads connections by a hash of their
//!   addresses. No connection is handed between threads. The gateway's way:
//!   many clients, many short connections.
//! - [`FewestOpen`]: one acceptor hands each connection to the worker with
//!   the fewest open (the first of them on a tie). `tollgate rls`'s way:
//!   Envoy opens one long-lived connection per Envoy worker, and a hash could
//!   put two of them on one of ours while another idles; counting open
//!   connections keeps short-lived ones (health probes) from doing so too.

use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use tokio::net::TcpListener;
use tokio::sync::mpsc;

use crate::accept::accept;
use crate::shed::Connections;
use crate::shutdown::Stopping;

/// A listening socket cannot be opened.
#[derive(Debug, thiserror::Error)]
#[error("cannot listen on {address}")]
pub struct ListenError {
    /// The address.
    pub address: SocketAddr,
    /// Why.
    #[source]
    pub source: std::io::Error,
}

/// `count` nonblocking listening sockets sharing `address` (`SO_REUSEPORT`),
/// and the address bound (its port chosen by the system when `address`'s is
/// 0).
///
/// # Errors
///
/// [`ListenError`] when `address` cannot be bound, also when another process
/// listens on it already: with `SO_REUSEPORT` a second server would
/// otherwise share the port silently and split its clients between two
/// budgets.
pub fn bind_reuse_port(
    address: SocketAddr,
    count: usize,
) -> Result<(SocketAddr, Vec<std::net::TcpListener>), ListenError> {
    let error = |address, source| ListenError { address, source };
    if address.port() != 0 {
        // Fails if anyone listens there, SO_REUSEPORT or not.
        std::net::TcpListener::bind(address).map_err(|source| error(address, source))?;
    }
    let first = reuse_port_listener(address).map_err(|source| error(address, source))?;
    let bound = first
        .local_addr()
        .map_err(|source| error(address, source))?;
    let mut listeners = vec![first];
    for _ in 1..count.max(1) {
        listeners.push(reuse_port_listener(bound).map_err(|source| error(bound, source))?);
    }
    Ok((bound, listeners))
}

/// A nonblocking listening socket on `address` that other sockets may share.
fn reuse_port_listener(address: SocketAddr) -> std::io::Result<std::net::TcpListener> {
    use socket2::{Domain, Socket, Type};
    let socket = Socket::new(Domain::for_address(address), Type::STREAM, None)?;
    socket.set_reuse_address(true)?;
    socket.set_reuse_port(true)?;
    socket.set_nonblocking(true)?;
    socket.bind(&address.into())?;
    socket.listen(1024)?;
    Ok(socket.into())
}

/// One connection counted among its worker's open connections, from when it
/// is handed to the worker until it is dropped (closed, or never taken).
#[derive(Debug)]
pub struct Live(Arc<AtomicUsize>);

impl Live {
    /// Counts one more connection in `count`.
    pub fn count_in(count: &Arc<AtomicUsize>) -> Live {
        count.fetch_add(1, Ordering::Relaxed);
        Live(Arc::clone(count))
    }
}

impl Drop for Live {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::Relaxed);
    }
}

/// What a worker receives from [`FewestOpen`]: each connection (a standard
/// stream, to be registered with the worker's own event loop) and its count.
pub type Handed = mpsc::UnboundedReceiver<(std::net::TcpStream, Live)>;

/// One worker as the acceptor sees it.
#[derive(Debug)]
struct Worker {
    connections: mpsc::UnboundedSender<(std::net::TcpStream, Live)>,
    open: Arc<AtomicUsize>,
}

/// One acceptor handing each connection to the worker with the fewest open.
#[derive(Debug, Default)]
pub struct FewestOpen {
    workers: Vec<Worker>,
}

impl FewestOpen {
    /// No workers yet.
    pub fn new() -> FewestOpen {
        FewestOpen::default()
    }

    /// Adds a worker: what it receives its connections from.
    pub fn add_worker(&mut self) -> Handed {
        let (connections, handed) = mpsc::unbounded_channel();
        self.workers.push(Worker {
            connections,
            open: Arc::new(AtomicUsize::new(0)),
        });
        handed
    }

    /// Accepts on `listener` (see [`accept`]) until `stopping` says stop,
    /// handing each connection to the worker with the fewest open. A worker
    /// that no longer takes connections (its thread ended) gets no more;
    /// with none left the acceptor stops.
    pub async fn run(
        mut self,
        listener: TcpListener,
        stopping: Stopping,
        connections: Arc<Connections>,
    ) {
        while let Some((stream, _)) = accept(&listener, &stopping, &connections).await {
            let mut stream = match stream.into_std() {
                Ok(stream) => stream,
                Err(error) => {
                    tracing::warn!(%error, "cannot take a connection");
                    continue;
                }
            };
            loop {
                let open: Vec<usize> = self
                    .workers
                    .iter()
                    .map(|worker| worker.open.load(Ordering::Relaxed))
                    .collect();
                let Some(position) = fewest(&open) else {
                    tracing::error!("every worker has stopped");
                    return;
                };
                let worker = &self.workers[position];
                match worker
                    .connections
                    .send((stream, Live::count_in(&worker.open)))
                {
                    Ok(()) => break,
                    Err(mpsc::error::SendError((returned, _))) => {
                        if stopping.is_stopped() {
                            return;
                        }
                        tracing::error!("a worker has stopped; its connections go to the others");
                        self.workers.remove(position);
                        stream = returned;
                    }
                }
            }
        }
    }
}

/// The position of the smallest of `open`, the first of them on a tie.
fn fewest(open: &[usize]) -> Option<usize> {
    open.iter()
        .enumerate()
        .min_by_key(|&(position, &count)| (count, position))
        .map(|(position, _)| position)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::shutdown::Shutdown;

    #[test]
    fn a_connection_goes_to_the_worker_with_the_fewest_open_the_first_on_a_tie() {
        assert_eq!(fewest(&[0, 0]), Some(0));
        assert_eq!(fewest(&[1, 0]), Some(1));
        assert_eq!(fewest(&[2, 1, 1]), Some(1));
        assert_eq!(fewest(&[3, 5, 3, 4]), Some(0));
        assert_eq!(fewest(&[]), None);
    }

    #[test]
    fn a_connection_counts_until_it_is_dropped() {
        let count = Arc::new(AtomicUsize::new(0));
        let first = Live::count_in(&count);
        let second = Live::count_in(&count);
        assert_eq!(count.load(Ordering::Relaxed), 2);
        drop(first);
        assert_eq!(count.load(Ordering::Relaxed), 1);
        drop(second);
        assert_eq!(count.load(Ordering::Relaxed), 0);
    }

    #[tokio::test]
    async fn connections_held_open_alternate_between_two_workers() {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let address = listener.local_addr().unwrap();
        let mut spread = FewestOpen::new();
        let mut first = spread.add_worker();
        let mut second = spread.add_worker();
        let (shutdown, stopping) = Shutdown::new();
        let acceptor = tokio::spawn(spread.run(listener, stopping, Connections::new()));
        let mut clients = Vec::new();
        let mut held = Vec::new();
        for expected in [0, 1, 0, 1] {
            clients.push(tokio::net::TcpStream::connect(address).await.unwrap());
            let handed = if expected == 0 {
                first.recv().await
            } else {
                second.recv().await
            };
            held.push(handed.expect("handed to the worker with the fewest open"));
        }
        // Worker 0's first connection closes: the next goes to worker 0.
        held.remove(0);
        clients.push(tokio::net::TcpStream::connect(address).await.unwrap());
        assert!(first.recv().await.is_some());
        assert!(second.try_recv().is_err());
        shutdown.stop();
        acceptor.await.unwrap();
    }

    #[test]
    fn a_second_server_on_a_port_in_use_is_refused() {
        let (bound, listeners) = bind_reuse_port("127.0.0.1:0".parse().unwrap(), 2).unwrap();
        assert_eq!(listeners.len(), 2);
        let again = bind_reuse_port(bound, 1).unwrap_err();
        assert_eq!(again.address, bound);
        assert_eq!(again.source.kind(), std::io::ErrorKind::AddrInUse);
    }
}
