//! The checks that join a route with the limits that would hold its
//! requests: a request without a key must find a keyless budget (the
//! route's own keyed by IP or header, else `[host] ip`), and a route's
//! `cost` must fit every limit that applies to it.

use tollgate_core::{ApiKeyRequirement, LimiterConfig, UnknownKeys};

use super::{HostConfig, RouteConfig, ServeConfigError};

/// The limits a route's requests may meet, besides the route itself.
pub(super) struct AroundRoutes<'a> {
    pub(super) limits: &'a LimiterConfig,
    pub(super) host: &'a HostConfig,
    pub(super) unknown: UnknownKeys,
    /// Whether the limits live in Redis (`[store] url`), whose scripts
    /// compute a charge past a limit exactly only within 2^52.
    pub(super) on_redis: bool,
}

impl AroundRoutes<'_> {
    /// Checks every route; with no routes, the demo backend's requests.
    pub(super) fn validate(&self, routes: &[RouteConfig]) -> Result<(), ServeConfigError> {
        if routes.is_empty() && self.unknown == UnknownKeys::Anonymous && self.host.ip.is_none() {
            return Err(ServeConfigError::Invalid(
                "keys.unknown = \"anonymous\" limits a request with an unknown key per client \
                 IP: set [host] ip, the budget it is held to"
                    .into(),
            ));
        }
        routes
            .iter()
            .try_for_each(|route| self.validate_route(route))
    }

    fn validate_route(&self, route: &RouteConfig) -> Result<(), ServeConfigError> {
        let error = |reason: String| ServeConfigError::Route {
            route: route.label(),
            reason,
        };
        let has_keyless_budget = route.has_budget() && route.route_key().kind().serves_keyless()
            || self.host.ip.is_some();
        // An anonymous request is held to the route's own budget per client
        // IP, whatever it is keyed by, else to the host's per IP.
        let has_anonymous_budget = route.has_budget() || self.host.ip.is_some();
        if route.api_key != ApiKeyRequirement::Required && !has_keyless_budget {
            return Err(error(format!(
                "api_key = \"{}\" lets a request without a key through unlimited: give the \
                 route rpm keyed by \"ip\" or \"header:NAME\", or set [host] ip",
                route.api_key.name()
            )));
        }
        if self.unknown == UnknownKeys::Anonymous && !has_anonymous_budget {
            return Err(error(
                "keys.unknown = \"anonymous\" holds a request with an unknown key to the \
                 route's budget per client IP, and it has none: give it rpm, or set [host] ip"
                    .into(),
            ));
        }
        self.validate_cost(route).map_err(&error)?;
        self.validate_charge(route).map_err(error)
    }

    /// A route charged by usage (`charge`) settles every limit of its
    /// requests past its limit by up to `charge.max`: none may count
    /// refused hits (`count_refused`, which is charged whatever it has
    /// already), and on Redis each must stay within what its scripts
    /// compute exactly.
    fn validate_charge(&self, route: &RouteConfig) -> Result<(), String> {
        let Some(charge) = &route.charge else {
            return Ok(());
        };
        let mut limits: Vec<(String, tollgate_core::Policy)> = Vec::new();
        match route.budget().ok().flatten() {
            Some(budget) => limits.push(("the route's budget".to_owned(), budget.policy())),
            None => {
                for (name, budget) in [("host.ip", self.host.ip), ("host.tenant", self.host.tenant)]
                {
                    if let Some(budget) = budget {
                        limits.push((name.to_owned(), budget.policy()));
                    }
                }
            }
        }
        if route.api_key.reads_keys() {
            limits.push(("the default policy".to_owned(), self.limits.default_policy));
            for (tier, policy) in &self.limits.tiers {
                limits.push((format!("the policy of tier {tier}"), *policy));
            }
            for (plan, list) in &self.limits.policy_lists {
                for further in &list.further {
                    limits.push((
                        format!("the policy {} of {plan}", further.name),
                        further.policy,
                    ));
                }
            }
        }
        for (name, policy) in limits {
            if policy.counts_refused() {
                return Err(format!(
                    "charge settles usage past a limit, and {name} counts refused hits \
                     (count_refused): the two are not combined"
                ));
            }
            if self.on_redis && !tollgate_redis::overdraw_is_exact(&policy, charge.max) {
                return Err(format!(
                    "charge.max = {} on {name} goes past what the Redis store computes exactly \
                     (limit + max, or for a token bucket (burst + max) x window in \
                     microseconds, below 2^52): lower max",
                    charge.max
                ));
            }
        }
        Ok(())
    }

    /// A cost above a limit's capacity could never pass: the route's own
    /// burst (else the host's), and, where keys are read, every policy of
    /// every plan.
    fn validate_cost(&self, route: &RouteConfig) -> Result<(), String> {
        if route.cost == 1 {
            return Ok(());
        }
        let too_much = |what: &str, capacity: u64| {
            format!(
                "cost = {} is more than {what} allows at once ({capacity}): no request \
                 could pass",
                route.cost
            )
        };
        match route.budget().ok().flatten() {
            Some(budget) if budget.burst() < route.cost => {
                return Err(too_much("the route's burst", budget.burst()));
            }
            Some(_) => {}
            None => {
                for (name, budget) in [("host.ip", self.host.ip), ("host.tenant", self.host.tenant)]
                {
                    if let Some(budget) = budget.filter(|budget| budget.burst() < route.cost) {
                        return Err(too_much(&format!("{name}'s burst"), budget.burst()));
                    }
                }
            }
        }
        if !route.api_key.reads_keys() {
            return Ok(());
        }
        let plans = std::iter::once(("the default policy".to_owned(), &self.limits.default_policy))
            .chain(
                self.limits
                    .tiers
                    .iter()
                    .map(|(tier, policy)| (format!("the policy of tier {tier}"), policy)),
            );
        for (name, policy) in plans {
            if policy.capacity() < route.cost {
                return Err(too_much(&name, policy.capacity()));
            }
        }
        for (plan, list) in &self.limits.policy_lists {
            for further in &list.further {
                if further.policy.capacity() < route.cost {
                    return Err(too_much(
                        &format!("the policy {} of {plan}", further.name),
                        further.policy.capacity(),
                    ));
                }
            }
        }
        Ok(())
    }
}
