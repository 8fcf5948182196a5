//! The route rate-limit middleware: [`RouteLimitLayer`] (the layer),
//! [`RouteLimit`] (the service), [`ResponseFuture`]; a request's budget and
//! key in `route.rs`, the limits of stacked layers gathered in `pending.rs`,
//! the store's answer turned into a response in `decide.rs`, a request
//! waiting for its turn (a route's delay) in `turn.rs`, a request charged
//! by usage after its response in `charge.rs`, the requests of one key
//! waiting at once in `waiting.rs`.

mod charge;
mod decide;
mod future;
mod layer;
mod pending;
mod route;
mod service;
mod turn;
mod waiting;

pub use future::ResponseFuture;
pub use layer::{ChargeError, CostError, DelayError, MAX_DELAY, RouteLimitLayer};
pub(crate) use route::{PreparedBudget, Route};
pub use service::RouteLimit;
pub use waiting::DEFAULT_MAX_WAITING;
pub(crate) use waiting::WaitingRoom;
