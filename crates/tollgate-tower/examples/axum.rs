//! A small axum app with two rate-limited routes: `/orders` per tenant with its
//! own budget (60 per minute, bursts of 5), `/search` per client IP with the host
//! default budget of `host.json` (30 per minute, bursts of 3).
//!
//! Run it with `cargo run -p tollgate-tower --example axum`, then try
//! `curl -i -H 'x-tenant: acme' http://127.0.0.1:3000/orders` six times quickly.

use std::net::SocketAddr;

use axum::Router;
use axum::extract::Request;
use axum::middleware::{self, Next};
use axum::response::Response;
use axum::routing::get;
use tollgate_tower::{Budget, HostDefaults, HostLimits, KeySelector, Tenant};

/// Stands in for a real authentication layer: trusts `X-Tenant` as the tenant.
async fn authenticate(mut request: Request, next: Next) -> Response {
    let tenant = request
        .headers()
        .get("x-tenant")
        .and_then(|value| value.to_str().ok())
        .map(|tenant| Tenant(tenant.to_owned()));
    if let Some(tenant) = tenant {
        request.extensions_mut().insert(tenant);
    }
    next.run(request).await
}

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let host = HostDefaults::from_file(concat!(env!("CARGO_MANIFEST_DIR"), "/examples/host.json"))?;
    // In memory; `.store(Arc::new(redis_store))` shares the budgets between
    // processes instead (see the crate documentation).
    let limits = HostLimits::builder().host_defaults(host).build()?;

    let orders = limits
        .route("orders")
        .budget(Budget::new(60, 5)?)?
        .key(KeySelector::Tenant);
    let search = limits.route("search"); // no budget of its own: the host default per IP

    let app = Router::new()
        .route("/orders", get(|| async { "orders\n" }).layer(orders))
        .route("/search", get(|| async { "search\n" }).layer(search))
        .layer(middleware::from_fn(authenticate));

    let listener = tokio::net::TcpListener::bind("127.0.0.1:3000").await?;
    println!("listening on http://{}", listener.local_addr()?);
    // `ConnectInfo` gives the layer each request's peer address.
    axum::serve(
        listener,
        app.into_make_service_with_connect_info::<SocketAddr>(),
    )
    .await?;
    Ok(())
}
