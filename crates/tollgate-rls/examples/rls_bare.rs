//! A bare tonic `RateLimitService` for `bench/rls.sh`: answers every
//! `ShouldRateLimit` with OK (one OK status per descriptor) without deciding
//! anything, on tokio's multi-threaded runtime with mimalloc: what serving the
//! call over tonic costs, as tonic serves by default (`tollgate rls` serves on
//! single-threaded event loops of its own, `TOLLGATE_WORKERS`, which cost
//! less per call).
//!
//! `cargo run --release -p tollgate-rls --example rls_bare -- --port 18181`

use std::net::SocketAddr;

use clap::Parser;
use envoy_types::pb::envoy::service::ratelimit::v3 as rls;
use rls::rate_limit_response::{Code, DescriptorStatus};
use rls::rate_limit_service_server::{RateLimitService, RateLimitServiceServer};
use tonic::{Request, Response, Status};

#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

#[derive(Parser)]
struct Options {
    /// The port on 127.0.0.1.
    #[arg(long)]
    port: u16,
}

struct Bare;

#[tonic::async_trait]
impl RateLimitService for Bare {
    async fn should_rate_limit(
        &self,
        request: Request<rls::RateLimitRequest>,
    ) -> Result<Response<rls::RateLimitResponse>, Status> {
        let descriptors = request.into_inner().descriptors.len();
        let ok = DescriptorStatus {
            code: Code::Ok as i32,
            ..DescriptorStatus::default()
        };
        Ok(Response::new(rls::RateLimitResponse {
            overall_code: Code::Ok as i32,
            statuses: vec![ok; descriptors],
            ..rls::RateLimitResponse::default()
        }))
    }
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let options = Options::parse();
    let address = SocketAddr::from(([127, 0, 0, 1], options.port));
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()?;
    runtime.block_on(async move {
        tonic::transport::Server::builder()
            .add_service(RateLimitServiceServer::new(Bare))
            .serve_with_shutdown(address, async {
                let _ = tokio::signal::ctrl_c().await;
            })
            .await
    })?;
    Ok(())
}
