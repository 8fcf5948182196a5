//! [`InFlightLimitLayer`]: the layer a route's concurrency limit wraps it in.

use std::sync::Arc;

use tower_layer::Layer;

use super::InFlightLimit;
use crate::host_limits::Shared;
use crate::key::KeySelector;

/// The concurrency limit of one route, as a tower [`Layer`]: at most `max`
/// requests of one key in flight at once, each holding its slot from the
/// call until its response body is dropped; made by
/// [`HostLimits::in_flight`](crate::HostLimits::in_flight). Over the limit
/// a request is answered 429 with `Retry-After: 1` and problem+json, and
/// the inner service is not called. Its key is chosen as a route budget's
/// ([`KeySelector`], the principal or else the client IP by default); with
/// known keys ([`HostLimitsBuilder::known_keys`](crate::HostLimitsBuilder::known_keys)),
/// an unknown principal is refused (401) or counted per client IP. Unlike
/// the gateway's, its refusals are 429 always, counted in
/// `api_rate_limit_exceeded_total` under the key's kind, and an upgrade's
/// slot is given back with its 101 response (the layer does not see the
/// upgraded connection).
#[derive(Clone, Debug)]
pub struct InFlightLimitLayer {
    pub(crate) name: Arc<str>,
    pub(crate) max: u64,
    pub(crate) selector: KeySelector,
    pub(crate) shared: Arc<Shared>,
}

impl InFlightLimitLayer {
    /// What the slots are counted per (default
    /// [`KeySelector::PrincipalOrIp`]).
    pub fn key(mut self, selector: KeySelector) -> Self {
        self.selector = selector;
        self
    }
}

impl<S> Layer<S> for InFlightLimitLayer {
    type Service = InFlightLimit<S>;

    fn layer(&self, inner: S) -> InFlightLimit<S> {
        InFlightLimit::new(inner, Arc::new(self.clone()))
    }
}
