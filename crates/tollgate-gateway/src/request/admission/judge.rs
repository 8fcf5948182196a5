//! What a request's decided limits make of it ([`judge`]): allowed, let
//! through by shadow mode, or refused; and what an allowed request carries
//! on ([`Allowed::admit`]). Neither waits: the slot of a tier's concurrency
//! limit, taken between the two, is its caller's.

use std::sync::Arc;

use axum::response::Response;
use tollgate_core::{KEYLESS, Redacted};

use super::decide::Decisions;
use super::fields::bound;
use super::identify::Identified;
use super::refusal::{Refusal, Refusing};
use super::route_limit::RouteLimit;
use super::{Admitted, Asked, Limits};
use crate::observe::access_log::{Admission, Outcome};
use crate::observe::top_keys::Decided;
use crate::request::charge::Settlement;
use crate::request::in_flight::SlotGuard;
use crate::request::rate_limit_headers::{PLAN, ROUTE, RateLimitHeaders, limit_headers};
use crate::request::shadow::ShadowLimits;

/// What a request's decisions make of it.
pub(super) enum Judged<'d> {
    /// Every limit allowed it: it takes its tier's slot, if any, then is
    /// [admitted](Allowed::admit).
    Allowed(Allowed<'d>),
    /// Only limits in shadow mode refused it (counted already): let
    /// through, with these headers, once it has its tier's slot, if any.
    Shadow {
        headers: RateLimitHeaders,
        /// The tier its plan was decided on.
        tier: &'d str,
    },
    /// Refused, with this response (counted and noted already).
    Refused(Response),
}

/// A request every limit allowed.
pub(super) struct Allowed<'d> {
    /// The headers its response carries.
    headers: RateLimitHeaders,
    /// The tier its plan was decided on.
    pub(super) tier: &'d str,
    shadow: ShadowLimits,
}

/// What `decisions` make of the request `asked` about, identified as
/// `who`, held to `limits`: its tier noted in `outcome`, with the limit
/// that bound it; a refusal counted (in the decision counters and the top
/// keys), then answered unless only limits in shadow mode refused.
pub(super) fn judge<'d>(
    asked: &Asked<'_>,
    who: &Identified<'_>,
    limits: &Limits<'_>,
    decisions: &'d Decisions,
    outcome: &mut Outcome,
) -> Judged<'d> {
    let reloadable = asked.reloadable;
    let route_name = who.route_name;
    let route_limit = limits.route_limit.as_ref();
    let plan = decisions.plan.as_ref();
    let tier = match plan {
        Some(plan) => {
            outcome.set_tier(plan.tier.as_ref());
            plan.tier.as_deref().unwrap_or(tollgate_core::DEFAULT_TIER)
        }
        None => {
            outcome.set_tier(Some(&reloadable.keyless_tier));
            KEYLESS
        }
    };
    let own_budget = route_limit.is_some_and(|limit| limit.own);
    let shadow = ShadowLimits::of(
        &reloadable.refusal,
        tier,
        asked.route.filter(|_| own_budget),
    );
    // The headers of the limits `described` says (PLAN, ROUTE), those of
    // `[responses] rate_limit_headers`.
    let header_set = reloadable.rate_limit_headers;
    let headers_of = |described: &dyn Fn(usize) -> bool| {
        let route = route_limit
            .zip(decisions.route.as_ref())
            .map(|(limit, decision)| (&**route_name, limit.budget.budget.policy(), decision));
        limit_headers(tier, plan, route, described, header_set)
    };
    // The limit that bound it, for the access log: of an enforced refusal,
    // the enforced limits' (as its Retry-After); else of every limit, so a
    // shadow refusal names the shadow limit that would have refused.
    outcome.set_bound(|| {
        // A limit refuses when it has a wait (as `Refusal::tally` counts
        // them): all or nothing, the others it took down have none.
        let enforced_refusal = decisions.iter().any(|(index, decision)| {
            decision.retry_after_seconds() > 0 && !shadow.is_shadow(index)
        });
        let counts = |index| !enforced_refusal || !shadow.is_shadow(index);
        let route = route_limit
            .and(decisions.route.as_ref())
            .filter(|_| counts(ROUTE));
        bound(
            tier,
            plan.filter(|_| counts(PLAN)),
            route.map(|decision| (&**route_name, decision)),
        )
    });
    let mut headers = headers_of(&|index| shadow.sends_headers(index));
    if decisions.iter().all(|(_, decision)| decision.is_allowed()) {
        return Judged::Allowed(Allowed {
            headers,
            tier,
            shadow,
        });
    }
    reloadable.decisions.record(false, tier, route_name);
    count_top(asked, who.key(), route_limit, true, tier, route_name);
    let refusal = Refusal::tally(
        decisions,
        &Refusing {
            key: who.key(),
            tier,
            route: asked.route,
            route_name,
            route_limit,
            shadow: &shadow,
            reloadable,
        },
    );
    if !refusal.enforced {
        return Judged::Shadow { headers, tier };
    }
    outcome.admission = Admission::Refused;
    if refusal.in_shadow {
        // A refusal's headers describe the enforced limits, which refused
        // it (its `Retry-After` is theirs), never a shadow one's longer wait.
        headers = headers_of(&|index| !shadow.is_shadow(index));
    }
    tracing::debug!(key = %Redacted(who.key().unwrap_or(KEYLESS)), route = %route_name, retry_after = refusal.retry_after, "rate limited");
    Judged::Refused(refusal.response(headers))
}

impl Allowed<'_> {
    /// The request admitted, holding `slot`: counted (in the decision
    /// counters and the top keys), noted allowed in `outcome`, and, on a
    /// route charged by usage, carrying what its response's end settles
    /// (charged `limits.cost` by every limit).
    pub(super) fn admit(
        self,
        asked: &Asked<'_>,
        who: &Identified<'_>,
        limits: &Limits<'_>,
        slot: Option<SlotGuard>,
        outcome: &mut Outcome,
    ) -> Admitted {
        let Allowed {
            headers,
            tier,
            shadow,
        } = self;
        let route_name = who.route_name;
        let route_limit = limits.route_limit.as_ref();
        asked.reloadable.decisions.record(true, tier, route_name);
        count_top(asked, who.key(), route_limit, false, tier, route_name);
        outcome.admission = Admission::Allowed;
        let settlement = asked
            .route
            .and_then(|route| route.charge.clone())
            .map(|charge| {
                Box::new(Settlement {
                    store: Arc::clone(asked.stores.store),
                    plan: who.key().map(str::to_owned),
                    route: route_limit.map(|limit| (limit.key.clone(), limit.budget.prepared)),
                    cost: limits.cost,
                    charge,
                    route_name: Arc::clone(route_name),
                    // (`handle.rs` drops it for a request whose response cannot
                    // carry trailers: HEAD, HTTP/1.0.)
                    trailers: tollgate_tower::accepts_trailers(asked.headers)
                        .then(|| [shadow.sends_headers(PLAN), shadow.sends_headers(ROUTE)])
                        .filter(|described| described.contains(&true)),
                    header_set: asked.reloadable.rate_limit_headers,
                })
            });
        Admitted {
            headers,
            slot,
            settlement,
        }
    }
}

/// Counts a decided request for `/admin/top` (unless `[admin] top_keys` is
/// off): under its API key, or a keyless one under its route budget's key.
fn count_top(
    asked: &Asked<'_>,
    key: Option<&str>,
    route_limit: Option<&RouteLimit<'_>>,
    refused: bool,
    tier: &str,
    route: &Arc<str>,
) {
    if let Some(top_keys) = asked.stores.top_keys {
        top_keys.record(&Decided {
            key: key
                .or(route_limit.map(|limit| limit.key.as_str()))
                .unwrap_or(KEYLESS),
            keyless: key.is_none(),
            refused,
            tier,
            route,
        });
    }
}
