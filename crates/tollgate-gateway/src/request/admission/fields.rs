//! The rate-limit header fields of an admitted or refused request: its
//! plan's (one policy, or every policy of a list) and its route budget's.

use tollgate_core::{Decision, LimitDecision, Policy};
use tollgate_tower::{RateLimitField, advertised_quota};

use super::{PLAN, ROUTE};
use crate::request::rate_limit_headers::{
    RateLimitHeaders, rate_limit_headers, rate_limit_headers_listed,
};

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
    rate_limit_headers_listed(&listed, &stated)
}

/// What refused a request by its plan, named in the problem's detail: the
/// tier, and for a plan written as a list the policy with the longest wait
/// (the one `Retry-After` gives), as `team (day)`.
pub(super) fn plan_refused_by<'a>(
    tier: &'a str,
    plan: &LimitDecision,
) -> std::borrow::Cow<'a, str> {
    if plan.further.is_empty() {
        return std::borrow::Cow::Borrowed(tier);
    }
    let first = plan
        .name
        .as_deref()
        .map(|name| (name, &plan.decision))
        .into_iter();
    let policies: Vec<(&str, &Decision)> = first
        .chain(
            plan.further
                .iter()
                .map(|further| (&*further.name, &further.decision)),
        )
        .collect();
    match Decision::binding(policies.iter().map(|(_, decision)| *decision))
        .and_then(|index| policies.get(index))
    {
        Some((name, _)) => std::borrow::Cow::Owned(format!("{tier} ({name})")),
        None => std::borrow::Cow::Borrowed(tier),
    }
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
/// `described` says so (by [`PLAN`] and [`ROUTE`]).
pub(crate) fn limit_headers(
    tier: &str,
    plan: Option<&LimitDecision>,
    route: Option<(&str, Policy, &LimitDecision)>,
    described: &dyn Fn(usize) -> bool,
) -> RateLimitHeaders {
    let route_field = route
        .filter(|_| described(ROUTE))
        .map(|(name, policy, decision)| route_field(name, &policy, decision));
    match plan {
        Some(plan) if !plan.further.is_empty() && described(PLAN) => {
            plan_list_headers(plan, route_field)
        }
        _ => {
            let plan_field = plan
                .and_then(|plan| plan_field(tier, plan))
                .filter(|_| described(PLAN));
            match (plan_field, route_field) {
                (Some(plan), Some(route)) => rate_limit_headers(&[plan, route]),
                (Some(only), None) | (None, Some(only)) => rate_limit_headers(&[only]),
                (None, None) => RateLimitHeaders::default(),
            }
        }
    }
}

/// The limit that binds a request ([`Decision::binding`] over its plan's
/// policies and its route budget), named as its `RateLimit` field names it
/// (the tier, a listed policy's name, the route's name), and what it has
/// left (`None`: unlimited). `None` when no limit with a policy decided.
pub(super) fn bound<'a>(
    tier: &'a str,
    plan: Option<&'a LimitDecision>,
    route: Option<(&'a str, &'a LimitDecision)>,
) -> Option<(&'a str, Option<u64>)> {
    let mut limits: Vec<(&str, &Decision)> = Vec::with_capacity(3);
    if let Some(plan) = plan.filter(|plan| plan.policy.is_some()) {
        if plan.further.is_empty() {
            limits.push((tier, &plan.decision));
        } else {
            let first = plan.name.as_deref().unwrap_or(tollgate_core::DEFAULT_TIER);
            limits.push((first, &plan.decision));
            limits.extend(
                plan.further
                    .iter()
                    .map(|further| (&*further.name, &further.decision)),
            );
        }
    }
    if let Some((name, route)) = route {
        limits.push((name, &route.decision));
    }
    let index = Decision::binding(limits.iter().map(|(_, decision)| *decision))?;
    limits
        .get(index)
        .map(|(name, decision)| (*name, decision.remaining))
}
