//! What bound or refused a request, by its plan's policies and its route
//! budget's decisions (their headers: `rate_limit_headers/limits.rs`).

use tollgate_core::{Decision, LimitDecision};

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
