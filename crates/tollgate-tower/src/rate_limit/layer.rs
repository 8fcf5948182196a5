//! [`RouteLimit`]: the layer a route is wrapped in.

use std::sync::Arc;

use tower_layer::Layer;

use super::{Buckets, RateLimit, Route};
use crate::budget::Budget;
use crate::key::KeySelector;

/// The rate limit of one route, as a tower [`Layer`]; made by
/// [`RateLimits::route`](crate::RateLimits::route).
///
/// Every service it wraps, and every clone, shares the route's buckets.
#[derive(Clone, Debug)]
pub struct RouteLimit {
    route: Route,
}

impl RouteLimit {
    pub(crate) fn new(route: Route) -> Self {
        RouteLimit { route }
    }

    /// The route's own budget, which overrides the host defaults for this route.
    /// Setting it again replaces the buckets.
    pub fn budget(mut self, budget: Budget) -> Self {
        let max_tracked_keys = self.route.shared.max_tracked_keys;
        let buckets = Buckets::new(&self.route.name, budget, max_tracked_keys);
        self.route.own = Some(Arc::new(buckets));
        // The route's own budget overrides the host's: their buckets go unused.
        self.route.host_tenant = None;
        self.route.host_ip = None;
        self
    }

    /// What the route's own budget is keyed by (default:
    /// [`KeySelector::PrincipalOrIp`]). Host defaults always key by tenant or IP.
    pub fn key(mut self, selector: KeySelector) -> Self {
        self.route.selector = selector;
        self
    }
}

impl<S> Layer<S> for RouteLimit {
    type Service = RateLimit<S>;

    fn layer(&self, inner: S) -> RateLimit<S> {
        RateLimit::new(inner, Arc::new(self.route.clone()))
    }
}
