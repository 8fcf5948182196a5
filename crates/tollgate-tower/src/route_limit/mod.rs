//! The route rate-limit middleware: [`RouteLimitLayer`] (the layer),
//! [`RouteLimit`] (the service), [`ResponseFuture`]; a request's budget and
//! key in `route.rs`, the limits of stacked layers gathered in `pending.rs`,
//! the store's answer turned into a response in `decide.rs`.

mod decide;
mod future;
mod layer;
mod pending;
mod route;
mod service;

pub use future::ResponseFuture;
pub use layer::{CostError, RouteLimitLayer};
pub(crate) use route::{PreparedBudget, Route};
pub use service::RouteLimit;
