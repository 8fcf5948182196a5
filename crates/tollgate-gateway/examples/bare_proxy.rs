//! The floor of tollgate's HTTP stack, for `bench/limit_cost.sh` and
//! `bench/proxy.sh` (issue #30): a reverse proxy on the same hyper,
//! hyper-util and tokio as the gateway, built with the same release
//! profile, with no routing, limiting, metrics or logs. Each client
//! connection gets one HTTP/1.1 connection to the upstream, over which its
//! requests are forwarded in turn, as they come.
//!
//! `cargo run --release -p tollgate-gateway --example bare_proxy -- LISTEN
//! UPSTREAM [WORKERS]`, as `127.0.0.1:18191 127.0.0.1:18190 1`.

use std::net::SocketAddr;

use hyper::body::Incoming;
use hyper::server::conn::http1;
use hyper::service::service_fn;
use hyper::{Request, Response};
use hyper_util::rt::TokioIo;
use tokio::net::{TcpListener, TcpStream};

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let mut arguments = std::env::args().skip(1);
    let usage = "usage: bare_proxy LISTEN UPSTREAM [WORKERS]";
    let listen: SocketAddr = arguments.next().ok_or(usage)?.parse()?;
    let upstream: SocketAddr = arguments.next().ok_or(usage)?.parse()?;
    let workers: usize = arguments.next().map_or(Ok(1), |text| text.parse())?;
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(workers)
        .enable_all()
        .build()?
        .block_on(async {
            // Ends on SIGINT (which a shell's background job ignores unless
            // a handler is installed, as the bench scripts need).
            tokio::select! {
                served = serve(listen, upstream) => served,
                _ = tokio::signal::ctrl_c() => Ok(()),
            }
        })
}

async fn serve(listen: SocketAddr, upstream: SocketAddr) -> Result<(), Box<dyn std::error::Error>> {
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
            tokio::spawn(connection);
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
            let _ = http1::Builder::new()
                .serve_connection(TokioIo::new(client), service)
                .await;
        });
    }
}
