//! The gateway listener's worker threads: one `SO_REUSEPORT` socket of the
//! gateway port and one single-threaded event loop each, so a request never
//! changes threads (`tollgate_serve::spread` and `tollgate_serve::workers`).

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use tokio::net::TcpListener;
use tollgate_serve::{Stopping, WorkerThread};

use crate::app::{App, Worker};
use crate::proxy::forward::Proxy;
use crate::serve::error::StartError;
use crate::serve::listener;

/// `count` listening sockets sharing `address`, and the address bound (see
/// [`tollgate_serve::bind_reuse_port`]: a port another process listens on
/// is refused).
pub(crate) fn bind(
    address: SocketAddr,
    count: usize,
) -> Result<(SocketAddr, Vec<std::net::TcpListener>), StartError> {
    tollgate_serve::bind_reuse_port(address, count).map_err(|error| StartError::Listen {
        address: error.address,
        admin: false,
        source: error.source,
    })
}

/// Starts one worker thread per listener, each serving until `stopping`
/// says stop (then draining its connections) or force (then dropping them).
pub(crate) fn spawn(
    listeners: Vec<std::net::TcpListener>,
    app: &Arc<App>,
    connect_timeout: Duration,
    stopping: &Stopping,
) -> Result<Vec<WorkerThread>, StartError> {
    listeners
        .into_iter()
        .enumerate()
        .map(|(index, listener)| {
            let app = Arc::clone(app);
            let stopping = stopping.clone();
            tollgate_serve::spawn_event_loop(format!("tollgate-worker-{index}"), move || {
                run(listener, app, connect_timeout, stopping)
            })
            .map_err(|source| StartError::Start {
                what: "the worker threads",
                source,
            })
        })
        .collect()
}

/// One worker: its own listening socket, served with its own upstream
/// connections on its thread's event loop.
async fn run(
    listener: std::net::TcpListener,
    app: Arc<App>,
    connect_timeout: Duration,
    stopping: Stopping,
) {
    let listener = match TcpListener::from_std(listener) {
        Ok(listener) => listener,
        Err(error) => {
            tracing::error!(%error, "a worker cannot take its listening socket");
            return;
        }
    };
    let proxy = Proxy::new(connect_timeout, Arc::clone(&app.connections));
    let worker = Worker { app, proxy };
    let forced = stopping.forced();
    tokio::select! {
        () = listener::serve(listener, worker, stopping) => {}
        // Its connections are dropped with the event loop.
        () = forced => {}
    }
}
