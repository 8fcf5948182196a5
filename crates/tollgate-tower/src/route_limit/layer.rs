//! [`RouteLimitLayer`]: the layer a route is wrapped in.

use std::sync::Arc;

use tollgate_core::PolicyError;
use tower_layer::Layer;

use super::{Route, RouteLimit};
use crate::budget::Budget;
use crate::key::KeySelector;

/// The rate limit of one route, as a tower [`Layer`] making [`RouteLimit`]
/// services; made by [`HostLimits::route`](crate::HostLimits::route).
///
/// Every service it wraps, and every clone, shares the route's budgets (they
/// live in the host's store, under keys `{route}/{kind}:{value}`).
#[derive(Clone, Debug)]
pub struct RouteLimitLayer {
    route: Route,
}

impl RouteLimitLayer {
    pub(crate) fn new(route: Route) -> Self {
        RouteLimitLayer { route }
    }

    /// The route's own budget, which overrides the host defaults for this
    /// route. Setting it again replaces it.
    ///
    /// # Errors
    ///
    /// [`PolicyError`] when the host's store cannot use the budget (a Redis
    /// store refuses budgets whose numbers could pass 2^52).
    pub fn budget(mut self, budget: Budget) -> Result<Self, PolicyError> {
        self.route.own = Some(self.route.shared.prepare(&self.route.name, budget)?);
        // The route's own budget overrides the host's.
        self.route.host_tenant = None;
        self.route.host_ip = None;
        Ok(self)
    }

    /// What the route's own budget is keyed by (default:
    /// [`KeySelector::PrincipalOrIp`]). Host defaults always key by tenant
    /// or IP, so without [`budget`](Self::budget) the selector is unused.
    pub fn key(mut self, selector: KeySelector) -> Self {
        self.route.selector = selector;
        self
    }
}

impl<S> Layer<S> for RouteLimitLayer {
    type Service = RouteLimit<S>;

    fn layer(&self, inner: S) -> RouteLimit<S> {
        RouteLimit::new(inner, Arc::new(self.route.clone()))
    }
}
