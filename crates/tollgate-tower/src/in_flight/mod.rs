//! The concurrency-limit middleware (`max_in_flight`, nginx's
//! `limit_conn`): [`InFlightLimitLayer`] (the layer, made by
//! [`HostLimits::in_flight`](crate::HostLimits::in_flight)),
//! [`InFlightLimit`] (the service), and [`InFlightBody`], the response body
//! that holds the request's slot until it is dropped. The rule is core's
//! ([`tollgate_core::SlotStore`]); the slots live in the host's slot store.

mod body;
mod layer;
mod service;

pub use body::InFlightBody;
pub use layer::InFlightLimitLayer;
pub use service::{InFlightLimit, InFlightResponse};
