//! [`RouteLimitLayer`]: the layer a route is wrapped in.

use std::sync::Arc;
use std::time::Duration;

use tollgate_core::{MAX_COST, PolicyError};
use tower_layer::Layer;

use super::{Route, RouteLimit};
use crate::budget::Budget;
use crate::key::KeySelector;

/// A cost a route cannot have: 0, more than [`MAX_COST`] (2^32), or more than
/// the burst of a budget it is held to.
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
#[error("{}", match burst {
    Some(burst) => format!("a cost of {units} units is more than a burst of {burst}: no request could pass"),
    None => format!("a cost must be 1 to 2^32 units, got {units}"),
})]
pub struct CostError {
    /// The cost asked for.
    pub units: u64,
    /// The burst it is more than, if that was the fault.
    pub burst: Option<u64>,
}

/// A delay a route cannot have: more than [`MAX_DELAY`] (one hour), or any
/// on a route charged by usage ([`RouteLimitLayer::charge`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
#[error("{}", if *charged {
    "a route charged by usage does not make requests wait: a refund of unused units would hand a waiting request's turn to a newcomer".to_owned()
} else {
    format!("a delay must be at most 1h, how long a request may wait for its turn; got {delay:?}")
})]
pub struct DelayError {
    /// The delay asked for.
    pub delay: Duration,
    /// Whether the route is charged by usage, which a delay cannot join.
    pub charged: bool,
}

/// A charge by usage a route cannot have ([`RouteLimitLayer::charge`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
pub enum ChargeError {
    /// `max` of 0 or above [`MAX_CHARGE`](tollgate_core::MAX_CHARGE) (2^53).
    #[error("the most units one request is charged must be 1 to 2^53, got {0}")]
    Max(u64),
    /// `max` below the route's cost.
    #[error(
        "a charge of at most {max} is below the cost of {cost}: every request would be given back part of its cost"
    )]
    BelowCost {
        /// The `max` asked for.
        max: u64,
        /// The route's cost.
        cost: u64,
    },
    /// The route makes requests wait ([`RouteLimitLayer::delay`]).
    #[error(
        "a route with a delay is not charged by usage: a refund of unused units would hand a waiting request's turn to a newcomer"
    )]
    WithDelay,
}

/// The longest [`RouteLimitLayer::delay`]: one hour, as a gateway route's.
pub const MAX_DELAY: Duration = Duration::from_secs(3600);

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
        self.cover_delay();
        Ok(self)
    }

    /// The units each request uses of every budget it is held to (the
    /// route's own, or the host's): 1 by default, as `cost` of a gateway
    /// route. Set it after [`budget`](Self::budget): it is checked against
    /// the budgets the route has then.
    ///
    /// # Errors
    ///
    /// [`CostError`] for 0, more than 2^32, or more than a budget's burst
    /// (no request could ever pass); and, on a route charged by usage, a
    /// cost above the charge's `max` (a [`ChargeError::BelowCost`] as a
    /// cost error: every request would be given back part of its cost).
    pub fn cost(mut self, units: u64) -> Result<Self, CostError> {
        if !(1..=MAX_COST).contains(&units) {
            return Err(CostError { units, burst: None });
        }
        if let Some(charge) = &self.route.charge
            && charge.max < units
        {
            return Err(CostError {
                units,
                burst: Some(charge.max),
            });
        }
        let bursts = [
            &self.route.own,
            &self.route.host_tenant,
            &self.route.host_ip,
        ];
        if let Some(burst) = bursts
            .into_iter()
            .flatten()
            .map(|budget| budget.quota().0)
            .find(|burst| *burst < units)
        {
            return Err(CostError {
                units,
                burst: Some(burst),
            });
        }
        self.route.cost = units;
        Ok(self)
    }

    /// How long a request its budgets would refuse may wait for its turn
    /// instead (nginx's `limit_req ... burst=N delay=M`, a gateway route's
    /// `delay`): default zero, refused at once. Who waits and how long is
    /// core's rule ([`Store::reserve_units`](tollgate_core::Store::reserve_units)):
    /// a request whose turn is within `delay` is charged at its turn, waits
    /// on a tokio timer, then is called; one whose turn is further is
    /// refused at once with `Retry-After` its wait less the delay. A client
    /// gone while it waits gives its turn back. Stacked layers wait only
    /// when every one of them has a delay, up to the shortest. At most
    /// [`max_waiting`](Self::max_waiting) requests of one key wait at once.
    /// Served after a wait, a request is counted in
    /// [`DELAYED_METRIC`](crate::DELAYED_METRIC). Needs a tokio runtime.
    ///
    /// # Errors
    ///
    /// [`DelayError`] for more than [`MAX_DELAY`].
    pub fn delay(mut self, delay: Duration) -> Result<Self, DelayError> {
        if delay > MAX_DELAY {
            return Err(DelayError {
                delay,
                charged: false,
            });
        }
        if !delay.is_zero() && self.route.charge.is_some() {
            return Err(DelayError {
                delay,
                charged: true,
            });
        }
        self.route.max_wait = delay;
        self.cover_delay();
        Ok(self)
    }

    /// The most requests of one key that wait for their turn at once (a
    /// gateway route's `max_waiting`, nginx's `limit_req ... burst`'s
    /// queue): [`DEFAULT_MAX_WAITING`](super::DEFAULT_MAX_WAITING) (100) by
    /// default. One more is decided without waiting: refused at once, with
    /// `Retry-After` until its turn would have been, its units untouched.
    /// Stacked layers count the outermost's key.
    #[must_use]
    pub fn max_waiting(mut self, most: std::num::NonZeroU64) -> Self {
        self.route.max_waiting = most.get();
        self
    }

    /// Keeps the route's budgets' state in the builder's in-memory store
    /// through a wait of the route's delay and the refill after it.
    fn cover_delay(&self) {
        let route = &self.route;
        if route.max_wait.is_zero() {
            return;
        }
        for budget in [&route.own, &route.host_tenant, &route.host_ip]
            .into_iter()
            .flatten()
        {
            route.shared.cover_delay(budget.budget(), route.max_wait);
        }
    }

    /// Charges each request by usage (a gateway route's `charge`, Envoy's
    /// `apply_on_stream_done`): admitted when its budget has the route's
    /// cost left, charged that cost, then, when its response ends (the body
    /// ended or dropped), charged the units the inner service reported in
    /// response header (or trailer) `header` in place of the cost, at most
    /// `max`: the difference given back, or charged past the budget into a
    /// debt of at most `max` units, which refuses every request until it is
    /// repaid (core's `settle_usage`, `Store::give_back_units` and
    /// `Store::overdraw_units`). A missing or bad report (not one decimal
    /// integer) leaves the cost. The settlement runs in a tokio task as the
    /// response ends; the response's RateLimit fields show the state at
    /// admission. A request accepting trailers (`TE: trailers`) gets the
    /// RateLimit fields after the settlement as trailers too (announced in
    /// `Trailer`, its `Content-Length` dropped; its body's end waits for the
    /// settlement); of stacked layers charging by usage, the outermost's
    /// trailers replace the others'. Set it after [`cost`](Self::cost).
    ///
    /// # Errors
    ///
    /// [`ChargeError`] for a `max` of 0, above 2^53 or below the cost, or
    /// on a route with a delay.
    pub fn charge(mut self, header: http::HeaderName, max: u64) -> Result<Self, ChargeError> {
        if !(1..=tollgate_core::MAX_CHARGE).contains(&max) {
            return Err(ChargeError::Max(max));
        }
        if max < self.route.cost {
            return Err(ChargeError::BelowCost {
                max,
                cost: self.route.cost,
            });
        }
        if !self.route.max_wait.is_zero() {
            return Err(ChargeError::WithDelay);
        }
        self.route.charge = Some(super::charge::Charge { header, max });
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
