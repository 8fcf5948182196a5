//! The floor of tollgate's HTTP stack, for `bench/limit_cost.sh` and
//! `bench/proxy.sh` (issue #30): a reverse proxy on the same hyper,
//! hyper-util and tokio as the gateway, built with the same release
//! profile, with no routing, limiting, metrics or logs. Each client
//! connection gets one HTTP/1.1 connection to the upstream, over which its
//! requests are forwarded in turn, as they come.
//!
//! `cargo run --release -p tollgate-gateway --example bare_proxy -- LISTEN
//! UPSTREAM [WORKERS] [MODE]`, as `127.0.0.1:18191 127.0.0.1:18190 1`.
//!
//! MODE is how the upstream connection is driven, the prototype of issue
//! #30's "hyper's `conn` APIs driven differently":
//! - `spawned` (the default, as the gateway does): in a task of its own,
//!   which the client connection's task wakes for every request and which
//!   wakes it back with the response;
//! - `one-task`: in the client connection's own task, beside its server
//!   connection, each polled only when its own waker fires (a
//!   `FuturesUnordered` of the two), so a request and its response cross no
//!   task boundary.
//! - `auto`: spawned, with the client connection served by hyper-util's
//!   `auto` builder (HTTP/1 or HTTP/2 told apart from the first bytes,
//!   upgrades allowed), as the gateway's listener serves it: what that
//!   detection costs over hyper's HTTP/1 connection alone.

use std::future::Future;
use std::net::SocketAddr;
use std::pin::Pin;

use futures_util::StreamExt;
use futures_util::stream::FuturesUnordered;

use hyper::body::Incoming;
use hyper::server::conn::http1;
use hyper::service::service_fn;
use hyper::{Request, Response};
use hyper_util::rt::{TokioExecutor, TokioIo};
use hyper_util::server::conn::auto;
use tokio::net::{TcpListener, TcpStream};

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let mut arguments = std::env::args().skip(1);
    let usage = "usage: bare_proxy LISTEN UPSTREAM [WORKERS]";
    let listen: SocketAddr = arguments.next().ok_or(usage)?.parse()?;
    let upstream: SocketAddr = arguments.next().ok_or(usage)?.parse()?;
    let workers: usize = arguments.next().map_or(Ok(1), |text| text.parse())?;
    let mode = match arguments.next().as_deref() {
        None | Some("spawned") => Mode::Spawned,
        Some("one-task") => Mode::OneTask,
        Some("auto") => Mode::Auto,
        Some(_) => return Err("MODE is spawned, one-task or auto".into()),
    };
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(workers)
        .enable_all()
        .build()?
        .block_on(async {
            // Ends on SIGINT (which a shell's background job ignores unless
            // a handler is installed, as the bench scripts need).
            tokio::select! {
                served = serve(listen, upstream, mode) => served,
                _ = tokio::signal::ctrl_c() => Ok(()),
            }
        })
}

/// How a client connection and its upstream connection are driven.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Mode {
    Spawned,
    OneTask,
    Auto,
}

async fn serve(
    listen: SocketAddr,
    upstream: SocketAddr,
    mode: Mode,
) -> Result<(), Box<dyn std::error::Error>> {
    let listener = TcpListener::bind(listen).await?;
    loop {
        let (client, _) = listener.accept().await?;
        client.set_nodelay(true)?;
        tokio::spawn(async move {
            let Ok(stream) = TcpStream::connect(upstream).await else {
                return;
            };
            let _ = stream.set_nodelay(true);
            let Ok((sender, connection)) =
                hyper::client::conn::http1::handshake(TokioIo::new(stream)).await
            else {
                return;
            };
            let upstream_connection = async move {
                let _ = connection.await;
            };
            let upstream_task = if mode == Mode::OneTask {
                Some(upstream_connection)
            } else {
                tokio::spawn(upstream_connection);
                None
            };
            let sender = std::sync::Arc::new(tokio::sync::Mutex::new(sender));
            let service = service_fn(move |request: Request<Incoming>| {
                let sender = std::sync::Arc::clone(&sender);
                async move {
                    let mut sender = sender.lock().await;
                    sender.ready().await?;
                    let response: Response<Incoming> = sender.send_request(request).await?;
                    Ok::<_, hyper::Error>(response)
                }
            });
            let served = async move {
                if mode == Mode::Auto {
                    let _ = auto::Builder::new(TokioExecutor::new())
                        .serve_connection_with_upgrades(TokioIo::new(client), service)
                        .await;
                } else {
                    let _ = http1::Builder::new()
                        .serve_connection(TokioIo::new(client), service)
                        .await;
                }
            };
            match upstream_task {
                None => served.await,
                Some(upstream_connection) => {
                    // Both in this task, each polled on its own wakes; the
                    // client connection's end ends both.
                    let mut both: FuturesUnordered<Pin<Box<dyn Future<Output = bool> + Send>>> =
                        FuturesUnordered::new();
                    both.push(Box::pin(async move {
                        served.await;
                        true
                    }));
                    both.push(Box::pin(async move {
                        upstream_connection.await;
                        false
                    }));
                    while let Some(client_done) = both.next().await {
                        if client_done {
                            break;
                        }
                    }
                }
            }
        });
    }
}
