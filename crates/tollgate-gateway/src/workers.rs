//! The gateway listener's worker threads: one `SO_REUSEPORT` socket of the
//! gateway port and one single-threaded event loop each, so a request never
//! changes threads.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use tokio::net::TcpListener;
use tokio::sync::watch;

use super::app::{App, Worker};
use super::error::StartError;
use super::listener;
use super::proxy::Proxy;

/// `count` listening sockets sharing `address` (`SO_REUSEPORT`: the kernel
/// spreads connections over them), and the address bound (its port chosen by
/// the system when `address`'s is 0).
///
/// Fails when another process listens on `address` already: with
/// `SO_REUSEPORT`, a second gateway would otherwise share the port silently
/// and split its clients between two budgets.
pub(crate) fn bind(
    address: SocketAddr,
    count: usize,
) -> Result<(SocketAddr, Vec<std::net::TcpListener>), StartError> {
    let listen_error = |address, source| StartError::Listen {
        address,
        admin: false,
        source,
    };
    if address.port() != 0 {
        std::net::TcpListener::bind(address).map_err(|error| listen_error(address, error))?;
    }
    let first = reuse_port_listener(address).map_err(|error| listen_error(address, error))?;
    let bound = first
        .local_addr()
        .map_err(|error| listen_error(address, error))?;
    let mut listeners = vec![first];
    for _ in 1..count {
        listeners.push(reuse_port_listener(bound).map_err(|error| listen_error(bound, error))?);
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

/// Starts one worker thread per listener, each serving until `stopped`.
pub(crate) fn spawn(
    listeners: Vec<std::net::TcpListener>,
    app: &Arc<App>,
    connect_timeout: Duration,
    stopped: &watch::Receiver<bool>,
) -> Result<Vec<std::thread::JoinHandle<std::io::Result<()>>>, StartError> {
    listeners
        .into_iter()
        .enumerate()
        .map(|(index, listener)| {
            let app = Arc::clone(app);
            let stopped = stopped.clone();
            std::thread::Builder::new()
                .name(format!("tollgate-worker-{index}"))
                .spawn(move || run(listener, app, connect_timeout, stopped))
                .map_err(|source| StartError::Start {
                    what: "the worker threads",
                    source,
                })
        })
        .collect()
}

/// One worker: a single-threaded event loop serving its own listening socket
/// with its own upstream connections.
fn run(
    listener: std::net::TcpListener,
    app: Arc<App>,
    connect_timeout: Duration,
    stopped: watch::Receiver<bool>,
) -> std::io::Result<()> {
    let event_loop = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    event_loop.block_on(async move {
        let listener = TcpListener::from_std(listener)?;
        let worker = Worker {
            app,
            proxy: Proxy::new(connect_timeout),
        };
        listener::serve(listener, worker, stopped).await
    })
}
