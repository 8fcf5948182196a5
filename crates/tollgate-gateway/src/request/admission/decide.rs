//! A request's limits decided by the store ([`decide_now`], [`decide`]),
//! or booked for a turn ([`reserved`]), and what the store answered
//! ([`Decisions`]); what a request gets when the store cannot answer
//! ([`store_failed`]).

use std::sync::Arc;

use axum::response::Response;
use tollgate_core::{FailurePolicy, Limit, LimitDecision, LimitUnits, Store, StoreError};
use tollgate_tower::Problem;

use super::route_limit::RouteLimit;
use crate::observe::access_log::{Admission, Outcome};
use crate::observe::metrics;
use crate::request::delay::Reserved;
use crate::request::problem::respond;
use crate::request::rate_limit_headers::{PLAN, ROUTE};
use crate::serve::reloadable::Reloadable;

/// The decisions of [`decide`] when `store` gives them at once: a lone
/// limit (the plan of `key` or the budget of `route_limit`) of one unit on a
/// store that answers at once (the in-memory one), decided without a future
/// or a `Vec`. `None` when [`decide`] must ask the store.
pub(super) fn decide_now(
    store: &dyn Store,
    key: Option<&str>,
    route_limit: Option<&RouteLimit<'_>>,
    cost: u64,
) -> Option<Decisions> {
    if cost != 1 {
        return None;
    }
    let only = match (key, route_limit) {
        (Some(key), None) => Limit::Plan(key),
        (None, Some(route_limit)) => Limit::Policy {
            key: &route_limit.key,
            policy: &route_limit.budget.prepared,
        },
        _ => return None,
    };
    let decision = store.acquire_one_now(&only)?;
    Some(Decisions::of(key.is_some(), decision))
}

/// The plan of `key` (none for a keyless request), and the route budget
/// `route_limit` if any, each charged `cost` units, decided together by
/// `store`, which answers when it can (after [`decide_now`] found it
/// could not at once). (A route with a delay reserves instead:
/// [`reserve`](crate::request::delay::reserve).)
pub(super) async fn decide(
    store: &dyn Store,
    key: Option<&str>,
    route_limit: Option<&RouteLimit<'_>>,
    cost: u64,
) -> Result<Decisions, StoreError> {
    let route = route_limit.map(|route_limit| Limit::Policy {
        key: &route_limit.key,
        policy: &route_limit.budget.prepared,
    });
    let plan = key.map(Limit::Plan);
    let limits: Vec<LimitUnits<'_>> = plan
        .into_iter()
        .chain(route)
        .map(|limit| LimitUnits { limit, units: cost })
        .collect();
    let answered = store.acquire_units(&limits).await?;
    Decisions::answered(plan.is_some(), answered, limits.len())
}

/// The limits a reservation charges, owned: the plan of `key`, the budget
/// of `route_limit`, `cost` units each (its `counted_at` set once booked).
pub(super) fn reserved(
    key: Option<&str>,
    route_limit: Option<&RouteLimit<'_>>,
    cost: u64,
) -> Reserved {
    Reserved {
        plan: key.map(str::to_owned),
        route: route_limit.map(|limit| (limit.key.clone(), limit.budget.prepared)),
        units: cost,
        counted_at: 0,
    }
}

/// What a request gets when the store could not decide, by its failure
/// policy: `None`, it goes through (`fail_open`), or the 503 answering it
/// (`fail_closed`); counted and noted in `outcome`.
pub(super) fn store_failed(
    reloadable: &Reloadable,
    route_name: &Arc<str>,
    error: &StoreError,
    outcome: &mut Outcome,
) -> Option<Response> {
    metrics::record_store_failure(route_name, reloadable.failure, error);
    outcome.admission = Admission::Unavailable;
    match reloadable.failure {
        FailurePolicy::FailOpen => None,
        FailurePolicy::FailClosed => Some(respond(Problem::unavailable())),
    }
}

/// What the limits of a request decided: its plan's (none for a keyless
/// request), and its route budget's when it has one.
pub(super) struct Decisions {
    pub(super) plan: Option<LimitDecision>,
    pub(super) route: Option<LimitDecision>,
}

impl Decisions {
    /// The decision of a lone limit: the plan's when `is_plan`, else the
    /// route budget's.
    pub(super) fn of(is_plan: bool, decision: LimitDecision) -> Self {
        if is_plan {
            Decisions {
                plan: Some(decision),
                route: None,
            }
        } else {
            Decisions {
                plan: None,
                route: Some(decision),
            }
        }
    }

    /// The store's answer for a request of `limits` limits: its plan (when
    /// `has_plan`), then its route budget; an error when the store
    /// answered another number of decisions.
    pub(super) fn answered(
        has_plan: bool,
        answered: Vec<LimitDecision>,
        limits: usize,
    ) -> Result<Self, StoreError> {
        if answered.len() != limits || limits == 0 {
            return Err(StoreError::Unavailable(format!(
                "the store answered {} decisions for {limits} limits",
                answered.len(),
            )));
        }
        let mut answered = answered.into_iter();
        Ok(match (has_plan, answered.next(), answered.next()) {
            (true, plan, route) => Decisions { plan, route },
            (false, route, _) => Decisions { plan: None, route },
        })
    }

    /// The decisions in the order of the limits, each with its index
    /// ([`PLAN`], [`ROUTE`]).
    pub(super) fn iter(&self) -> impl Iterator<Item = (usize, &LimitDecision)> {
        let plan = self.plan.as_ref().map(|plan| (PLAN, plan));
        plan.into_iter()
            .chain(self.route.as_ref().map(|route| (ROUTE, route)))
    }
}
