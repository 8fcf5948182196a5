//! The admin API's calls on route budgets: `POST /admin/inspect` and
//! `POST /admin/reset` with a `route` and the value its budget is kept per
//! (`key`, `tenant`, `ip` or `header`), instead of an API key's plan.
//!
//! The budget named is the one a request on that route would be held to for
//! that value: the route's own when it has one (then the value must be of its
//! kind: `key` for `key = "principal"`, `tenant`, `ip`, or `header` for
//! `key = "header:NAME"`), else the `[host]` default per tenant or per client
//! IP. An inspection is a look (0 units) and uses nothing; a reset gives every
//! unit back, so the budget is whole again (the same as a fresh key).

use serde::Deserialize;
use tollgate_core::{
    ApiKey, Limit, LimitDecision, LimitUnits, RouteBudgetChoice, RouteBudgets, RouteKeyKind, Store,
};
use tollgate_core::{Redacted, route_store_key};

use crate::request::routes::RouteBudget;
use crate::serve::reloadable::Reloadable;

/// The body of an inspect or reset call: an API key alone for its plan, or a
/// route with exactly one value.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct Target {
    /// An API key: the plan's, or the value of a route budget kept per
    /// principal.
    pub(crate) key: Option<String>,
    /// A route's name: the call is about one of its budgets.
    pub(crate) route: Option<String>,
    /// A tenant (with `route`).
    pub(crate) tenant: Option<String>,
    /// A client IP (with `route`), grouped as requests are (`ipv6_prefix`).
    pub(crate) ip: Option<String>,
    /// The value of the route's key header (with `route`).
    pub(crate) header: Option<String>,
}

/// A route budget found for a [`Target`].
pub(crate) struct RouteBudgetKey<'a> {
    /// The budget.
    pub(crate) budget: &'a RouteBudget,
    /// What it is kept per.
    pub(crate) kind: RouteKeyKind,
    /// Its store key (`route/kind:value`).
    pub(crate) store_key: String,
}

impl Target {
    /// The route budget this target names; `Ok(None)` for a plan (no
    /// `route`). `Err` says why the body is invalid.
    pub(crate) fn route_budget<'a>(
        &self,
        reloadable: &'a Reloadable,
    ) -> Result<Option<RouteBudgetKey<'a>>, String> {
        let Some(route_name) = &self.route else {
            if self.tenant.is_some() || self.ip.is_some() || self.header.is_some() {
                return Err("tenant, ip and header name a route budget: give its route too".into());
            }
            return Ok(None);
        };
        let route = reloadable
            .routes
            .by_name(route_name)
            .ok_or_else(|| format!("no route is named {route_name}"))?;
        let (kind, value) = match (&self.key, &self.tenant, &self.ip, &self.header) {
            (Some(key), None, None, None) => (
                RouteKeyKind::Principal,
                ApiKey::parse(key)
                    .ok_or("key must be a non-empty API key")?
                    .as_str()
                    .to_owned(),
            ),
            (None, Some(tenant), None, None) => (RouteKeyKind::Tenant, tenant.clone()),
            (None, None, Some(ip), None) => {
                let ip: std::net::IpAddr = ip
                    .parse()
                    .map_err(|_| "ip must be an IPv4 or IPv6 address".to_owned())?;
                let key = reloadable
                    .client_ip
                    .client_key_of(ip, &http::HeaderMap::new());
                (RouteKeyKind::Ip, key)
            }
            (None, None, None, Some(header)) => (RouteKeyKind::Custom, header.trim().to_owned()),
            _ => {
                return Err(
                    "a route budget is named by its route and exactly one of key, tenant, ip \
                     and header"
                        .into(),
                );
            }
        };
        // The budget a request with this value would be held to, by the one
        // rule of the request path (core's `RouteBudgets::choose`).
        let budgets = RouteBudgets {
            own: route.budget.as_ref().map(|(budget, key)| (budget, key)),
            host_tenant: reloadable.host_tenant.as_ref(),
            host_ip: reloadable.host_ip.as_ref(),
        };
        let budget = match budgets.choose(|| kind == RouteKeyKind::Tenant) {
            Some(RouteBudgetChoice::Own { budget, selector }) if selector.kind() == kind => budget,
            Some(RouteBudgetChoice::Own { selector, .. }) => {
                let own = selector.kind();
                return Err(format!(
                    "route {route_name} keeps its budget per {}: give {}",
                    own.noun(),
                    field_of(own)
                ));
            }
            Some(RouteBudgetChoice::Host { budget, kind: host }) if host == kind => budget,
            _ => {
                return Err(format!(
                    "route {route_name} has no budget per {} (neither its own nor [host]'s)",
                    kind.noun()
                ));
            }
        };
        Ok(Some(RouteBudgetKey {
            budget,
            kind,
            store_key: route_store_key(route_name, kind, &value),
        }))
    }
}

impl RouteBudgetKey<'_> {
    /// The budget now, using none of it.
    pub(crate) async fn look(
        &self,
        store: &dyn Store,
    ) -> Result<LimitDecision, tollgate_core::StoreError> {
        self.call(store, 0, false).await
    }

    /// Gives every unit back: the budget is whole again.
    pub(crate) async fn reset(
        &self,
        store: &dyn Store,
    ) -> Result<LimitDecision, tollgate_core::StoreError> {
        tracing::info!(store_key = %Redacted(&self.store_key), "route budget reset");
        self.call(store, u64::MAX, true).await
    }

    async fn call(
        &self,
        store: &dyn Store,
        units: u64,
        give_back: bool,
    ) -> Result<LimitDecision, tollgate_core::StoreError> {
        let limits = [LimitUnits {
            limit: Limit::Policy {
                key: &self.store_key,
                policy: &self.budget.prepared,
            },
            units,
        }];
        let decisions = if give_back {
            store.give_back_units(&limits).await?
        } else {
            store.acquire_units(&limits).await?
        };
        decisions.into_iter().next().ok_or_else(|| {
            tollgate_core::StoreError::Unavailable("the store answered no decision".into())
        })
    }
}

/// The body field that names a value of `kind`.
fn field_of(kind: RouteKeyKind) -> &'static str {
    match kind {
        RouteKeyKind::Principal => "key",
        RouteKeyKind::Tenant => "tenant",
        RouteKeyKind::Ip => "ip",
        RouteKeyKind::Custom => "header",
    }
}
