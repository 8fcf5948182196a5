//! The rate-limit headers of a request's limits, from their decisions: its
//! plan's (one policy, or every policy of a list) and its route budget's,
//! each where shadow mode describes it. Written at admission and, for a
//! route charged by usage, again as trailers after the settlement.

use tollgate_core::{Decision, LimitDecision, Policy};
use tollgate_tower::{RateLimitField, advertised_quota};

use super::{RateLimitHeaders, rate_limit_headers, rate_limit_headers_listed};
use crate::config::RateLimitHeaderSet;

/// The index of a request's plan among its limits (its route budget is
/// [`ROUTE`]), for shadow mode and the headers.
pub(crate) const PLAN: usize = 0;
/// The index of a request's route budget among its limits.
pub(crate) const ROUTE: usize = 1;

/// The plan's RateLimit field (listed first); none for a key whose plan has
/// no policy.
fn plan_field<'a>(tier: &'a str, plan: &'a LimitDecision) -> Option<RateLimitField<'a>> {
    let (quota, window_s) = advertised_quota(&plan.policy?);
    Some(RateLimitField {
        name: tier,
        quota,
        window_s,
        decision: &plan.decision,
    })
}

/// The headers of a request whose plan lists several policies: every policy
/// (by its name), then the route budget's, in `RateLimit-Policy`; the plan's
/// binding policy ([`Decision::binding`]), then the route budget's, in
/// `RateLimit`.
fn plan_list_headers(
    plan: &LimitDecision,
    route_field: Option<RateLimitField<'_>>,
    set: RateLimitHeaderSet,
) -> RateLimitHeaders {
    let Some(first_policy) = plan.policy else {
        return RateLimitHeaders::default();
    };
    let first_name = plan.name.as_deref().unwrap_or(tollgate_core::DEFAULT_TIER);
    let field = |name, policy: &Policy, decision| {
        let (quota, window_s) = advertised_quota(policy);
        RateLimitField {
            name,
            quota,
            window_s,
            decision,
        }
    };
    let mut listed: Vec<RateLimitField<'_>> =
        std::iter::once(field(first_name, &first_policy, &plan.decision))
            .chain(
                plan.further
                    .iter()
                    .map(|further| field(&further.name, &further.policy, &further.decision)),
            )
            .collect();
    let binding = Decision::binding(listed.iter().map(|field| field.decision)).unwrap_or(0);
    let mut stated: Vec<RateLimitField<'_>> = listed.get(binding).cloned().into_iter().collect();
    if let Some(route) = route_field {
        stated.push(route.clone());
        listed.push(route);
    }
    rate_limit_headers_listed(&listed, &stated, set)
}

/// The route budget's RateLimit field (listed after the plan's), of the
/// route named `route_name` whose budget has `policy`.
fn route_field<'a>(
    route_name: &'a str,
    policy: &Policy,
    decision: &'a LimitDecision,
) -> RateLimitField<'a> {
    let (quota, window_s) = advertised_quota(policy);
    RateLimitField {
        name: route_name,
        quota,
        window_s,
        decision: &decision.decision,
    }
}

/// The rate-limit headers of a request's limits: its plan's decision
/// (`plan`, the key's tier `tier`) and its route budget's (`route`: the
/// route's name, its budget's policy and decision), each only where
/// `described` says so (by [`PLAN`] and [`ROUTE`]); of the headers, those
/// of `set` (none at all, nothing built, for [`RateLimitHeaderSet::None`]).
pub(crate) fn limit_headers(
    tier: &str,
    plan: Option<&LimitDecision>,
    route: Option<(&str, Policy, &LimitDecision)>,
    described: &dyn Fn(usize) -> bool,
    set: RateLimitHeaderSet,
) -> RateLimitHeaders {
    if set == RateLimitHeaderSet::None {
        return RateLimitHeaders::default();
    }
    let route_field = route
        .filter(|_| described(ROUTE))
        .map(|(name, policy, decision)| route_field(name, &policy, decision));
    match plan {
        Some(plan) if !plan.further.is_empty() && described(PLAN) => {
            plan_list_headers(plan, route_field, set)
        }
        _ => {
            let plan_field = plan
                .and_then(|plan| plan_field(tier, plan))
                .filter(|_| described(PLAN));
            match (plan_field, route_field) {
                (Some(plan), Some(route)) => rate_limit_headers(&[plan, route], set),
                (Some(only), None) | (None, Some(only)) => rate_limit_headers(&[only], set),
                (None, None) => RateLimitHeaders::default(),
            }
        }
    }
}
