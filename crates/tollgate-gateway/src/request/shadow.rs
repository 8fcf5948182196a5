//! Shadow mode (a dry run, as nginx's `limit_req_dry_run` and Envoy's
//! `shadow_mode`): which of a request's limits are on trial. A limit in
//! shadow mode is decided exactly as when enforced (its state, and the
//! others', evolve as if it were: a request it refuses uses no budget), and
//! only the answer differs: its refusal is counted
//! (`tollgate_shadow_denials_total`) and lets the request through, unless an
//! enforced limit refuses it too. Set by `[refusal] shadow` (every limit),
//! `[refusal] shadow_tiers` (plans) and a route's `shadow` (its own budget).

use crate::config::RefusalConfig;
use crate::request::routes::Route;

/// Which limits of one request are in shadow mode: its plan (limit 0) and
/// its route budget (limit 1, the route's own or the host default).
#[derive(Clone, Copy, Debug)]
pub(crate) struct ShadowLimits {
    plan: bool,
    route_budget: bool,
    /// Whether the rate-limit headers of shadow limits are sent.
    headers: bool,
}

impl ShadowLimits {
    /// The shadow limits of a request whose plan is `tier`'s, held to the
    /// own budget of `route` (`None`: to a host budget, or none).
    pub(crate) fn of(refusal: &RefusalConfig, tier: &str, route: Option<&Route>) -> Self {
        let own_budget_shadow = route.is_some_and(|route| route.budget.is_some() && route.shadow);
        ShadowLimits {
            plan: refusal.is_shadow_tier(tier),
            route_budget: refusal.shadow || own_budget_shadow,
            headers: refusal.shadow_headers,
        }
    }

    /// Whether the limit at `index` (0 the plan, 1 the route budget) is in
    /// shadow mode: its refusal is counted and lets the request through.
    pub(crate) fn is_shadow(&self, index: usize) -> bool {
        if index == 0 {
            self.plan
        } else {
            self.route_budget
        }
    }

    /// Whether the rate-limit headers of the limit at `index` are sent: an
    /// enforced limit's always, a shadow limit's with `shadow_headers`.
    pub(crate) fn sends_headers(&self, index: usize) -> bool {
        self.headers || !self.is_shadow(index)
    }
}
