//! The HTTP upstream behind Envoy in `bench/rls.sh`: answers `200 ok` to
//! everything, on one tokio worker thread (axum over hyper).
//!
//! `cargo run --release -p tollgate-rls --example rls_upstream -- --port 18190`

use std::net::SocketAddr;

use clap::Parser;

#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

#[derive(Parser)]
struct Options {
    /// The port on 127.0.0.1.
    #[arg(long)]
    port: u16,
    /// Worker threads.
    #[arg(long, default_value_t = 1)]
    threads: usize,
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let options = Options::parse();
    let address = SocketAddr::from(([127, 0, 0, 1], options.port));
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(options.threads.max(1))
        .enable_all()
        .build()?;
    runtime.block_on(async move {
        let listener = tokio::net::TcpListener::bind(address).await?;
        let app = axum::Router::new().fallback(|| async { "ok\n" });
        axum::serve(listener, app)
            .with_graceful_shutdown(async {
                let _ = tokio::signal::ctrl_c().await;
            })
            .await
    })?;
    Ok(())
}
