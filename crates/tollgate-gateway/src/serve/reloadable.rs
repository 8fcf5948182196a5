//! [`Reloadable`]: the snapshot a configuration reload replaces at once: the
//! routes, the host default budgets, the tenants, the client-IP rules, the
//! upstream timeouts, the refusal statuses and shadow mode, the rate-limit
//! header set and the decision endpoint.

use std::collections::HashMap;
use std::sync::Arc;

use tollgate_core::{ApiKey, KEYLESS, KnownKeys, Store, UnknownKeys};
use tollgate_tower::ClientIpResolver;

use crate::config::{
    RateLimitHeaderSet, RefusalConfig, ServeConfig, ServeConfigError, UpstreamConfig,
};
use crate::observe::metrics::DecisionCounters;
use crate::proxy::demo::DEMO_ROUTE;
use crate::proxy::upstream_tls;
use crate::request::forward_auth_endpoint::ForwardAuth;
use crate::request::in_flight_limit::InFlightDefaults;
use crate::request::routes::{RouteBudget, RouteTable};
use tollgate_core::DEFAULT_TIER;
use tollgate_core::FailurePolicy;

/// The reloadable part of the gateway, built from a configuration.
#[derive(Debug)]
pub(crate) struct Reloadable {
    pub(crate) routes: RouteTable,
    /// The host's default budget per tenant, for routes without their own.
    pub(crate) host_tenant: Option<RouteBudget>,
    /// The host's default budget per client IP, for routes without their own.
    pub(crate) host_ip: Option<RouteBudget>,
    /// API key → tenant.
    pub(crate) tenants: HashMap<String, Arc<str>>,
    pub(crate) client_ip: ClientIpResolver,
    pub(crate) upstream: UpstreamConfig,
    /// What a request gets when the store cannot decide.
    pub(crate) failure: FailurePolicy,
    /// The route name of requests without a route (the demo backend).
    pub(crate) demo_route: Arc<str>,
    /// The decision endpoint, when `[forward_auth] path` is set.
    pub(crate) forward_auth: Option<ForwardAuth>,
    /// The statuses of refusals.
    pub(crate) refusal: RefusalConfig,
    /// Which rate-limit headers responses carry.
    pub(crate) rate_limit_headers: RateLimitHeaderSet,
    pub(crate) decisions: DecisionCounters,
    /// The keys that exist (`[keys] known`), when a list is kept.
    pub(crate) known_keys: Option<Arc<KnownKeys>>,
    /// What a key not among them gets.
    pub(crate) unknown_keys: UnknownKeys,
    /// The tier of keyless requests in the access log: [`KEYLESS`].
    pub(crate) keyless_tier: Arc<str>,
    /// Whether any plan lets its requests wait (`[limits.tier_defaults]`
    /// `delay`): a request with a key, on a route without a delay of its
    /// own, then waits up to its tier's.
    pub(crate) tier_delays: bool,
    /// The concurrency limits of routes without one of their own.
    pub(crate) in_flight: InFlightDefaults,
}

impl Reloadable {
    /// The snapshot of `config` for `store`, with `known_keys` read from
    /// the file `[keys] known` names (the caller reads it: a reload that
    /// cannot keeps the list in force).
    pub(crate) fn build(
        config: &ServeConfig,
        store: &dyn Store,
        known_keys: Option<Arc<KnownKeys>>,
    ) -> Result<Self, ServeConfigError> {
        let budget = |budget| RouteBudget::new(budget, store);
        let mut tenants = HashMap::new();
        for (tenant, keys) in &config.tenants {
            let tenant: Arc<str> = Arc::from(tenant.as_str());
            for key in keys.iter().filter_map(|key| ApiKey::parse(key)) {
                tenants.insert(key.as_str().to_owned(), Arc::clone(&tenant));
            }
        }
        let upstream_tls = upstream_tls::client_config(&config.routes, &config.upstream_tls)?;
        let routes = RouteTable::new(&config.routes, store, upstream_tls.as_ref())?;
        let demo_route: Arc<str> = Arc::from(DEMO_ROUTE);
        let tiers: Vec<Arc<str>> = config
            .limits
            .tiers
            .keys()
            .map(|tier| Arc::from(tier.as_str()))
            .chain([DEFAULT_TIER, "exempt", KEYLESS].map(Arc::from))
            .collect();
        // The demo backend answers only when no route is configured.
        let demo = routes.is_empty().then_some(&demo_route);
        let decisions = DecisionCounters::new(routes.names().chain(demo), &tiers);
        Ok(Reloadable {
            routes,
            host_tenant: config.host.tenant.map(budget).transpose()?,
            host_ip: config.host.ip.map(budget).transpose()?,
            tenants,
            client_ip: config.client_ip.resolver(),
            upstream: config.upstream,
            failure: config.store.failure,
            demo_route,
            forward_auth: ForwardAuth::from_config(&config.forward_auth),
            refusal: config.refusal.clone(),
            rate_limit_headers: config.responses.rate_limit_headers,
            decisions,
            known_keys,
            unknown_keys: config.keys.unknown,
            keyless_tier: Arc::from(KEYLESS),
            tier_delays: config.limits.any_tier_delay(),
            in_flight: InFlightDefaults::new(&config.limits, config.host.max_in_flight),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tollgate_core::{ManualClock, MemoryStore};

    fn decision_routes(toml: &str) -> Vec<String> {
        let config = ServeConfig::from_toml_str(toml).unwrap();
        let store = MemoryStore::new(&config.limits, Arc::new(ManualClock::new(0))).unwrap();
        let reloadable = Reloadable::build(&config, &store, None).unwrap();
        let mut routes: Vec<String> = reloadable
            .decisions
            .routes()
            .into_iter()
            .map(str::to_owned)
            .collect();
        routes.sort();
        routes
    }

    #[test]
    fn the_demo_route_is_counted_only_without_routes() {
        assert_eq!(decision_routes(""), ["demo"]);
        assert_eq!(
            decision_routes(
                "[[routes]]\nname = \"orders\"\nprefix = \"/orders\"\nupstream = \"http://127.0.0.1:1\"\n\
                 [[routes]]\nname = \"users\"\nprefix = \"/users\"\nupstream = \"http://127.0.0.1:1\"\n"
            ),
            ["orders", "users"]
        );
    }
}
