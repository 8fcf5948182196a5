//! The route rate-limit middleware: [`RouteLimit`] (the layer), [`RateLimit`]
//! (the service), [`ResponseFuture`], and the route's decision in `route.rs`.

mod buckets;
mod future;
mod layer;
mod route;
mod service;

pub(crate) use buckets::Buckets;
pub use future::ResponseFuture;
pub use layer::RouteLimit;
pub(crate) use route::Route;
pub use service::RateLimit;
