//! The route budget a request is held to ([`route_limit`]), as core's
//! [`RouteBudgets`] chooses it, and its key in the store.

use std::net::SocketAddr;

use http::HeaderMap;
use tollgate_core::{Keyless, RouteBudgetChoice, RouteBudgets, RouteKeyKind, route_store_key};

use crate::config::RouteKey;
use crate::request::api_key::MAX_KEY_LENGTH;
use crate::request::header_key::header_key;
use crate::request::routes::{Route, RouteBudget};
use crate::serve::reloadable::Reloadable;

/// The route budget that applies to a request, with its key.
pub(super) struct RouteLimit<'a> {
    pub(super) budget: &'a RouteBudget,
    /// Whether it is the route's own (its shadow mode and `refused_status`
    /// apply), not the host's.
    pub(super) own: bool,
    pub(super) kind: RouteKeyKind,
    pub(super) key: String,
}

/// The route budget of a request with API key `key` (`Err(reason)`: a
/// keyless request, and why), as core's [`RouteBudgets::choose`] picks it
/// for a key (the route's own, else the host default per tenant for keys
/// with a tenant, else per IP) and [`RouteBudgets::choose_keyless`] without
/// one; `None` when none applies. `Err` holds why the request is refused (401) when the
/// route's key is missing: a tenant for a key without one, a header the
/// request lacks.
pub(super) fn route_limit<'a>(
    reloadable: &'a Reloadable,
    route: Option<&'a Route>,
    route_name: &str,
    key: Result<&str, Keyless>,
    headers: &HeaderMap,
    peer: SocketAddr,
) -> Result<Option<RouteLimit<'a>>, String> {
    let tenant = key.ok().and_then(|key| reloadable.tenants.get(key));
    let budgets = RouteBudgets {
        own: route
            .and_then(|route| route.budget.as_ref())
            .map(|(budget, key)| (budget, key)),
        host_tenant: reloadable.host_tenant.as_ref(),
        host_ip: reloadable.host_ip.as_ref(),
    };
    let choice = match key {
        Ok(_) => budgets.choose(|| tenant.is_some()),
        Err(reason) => budgets.choose_keyless(reason, RouteKey::kind),
    };
    let (budget, key_of, own) = match choice {
        None => return Ok(None),
        Some(RouteBudgetChoice::Own { budget, selector }) => (budget, selector, true),
        Some(RouteBudgetChoice::OwnPerIp { budget }) => (budget, &RouteKey::Ip, true),
        Some(RouteBudgetChoice::Host { budget, kind }) => match kind {
            RouteKeyKind::Tenant => (budget, &RouteKey::Tenant, false),
            _ => (budget, &RouteKey::Ip, false),
        },
    };
    let value = match (key_of, key) {
        (RouteKey::Principal, Ok(key)) => key.to_owned(),
        (RouteKey::Tenant, _) => tenant
            .ok_or_else(|| {
                format!("{route_name} is rate limited per tenant, and this API key has no tenant")
            })?
            .to_string(),
        (RouteKey::Ip, _) => reloadable.client_ip.client_key_of(peer.ip(), headers),
        (RouteKey::Header(name), _) => header_key(headers, name)
            .ok_or_else(|| {
                format!(
                    "{route_name} is rate limited per {name} header, and this request has no \
                     usable one (exactly one, of 1 to {MAX_KEY_LENGTH} visible ASCII characters)"
                )
            })?
            .to_owned(),
        // `choose_keyless` never picks a budget keyed by the API key.
        (RouteKey::Principal, Err(_)) => {
            return Err(format!("{route_name} is rate limited per API key"));
        }
    };
    let kind = key_of.kind();
    Ok(Some(RouteLimit {
        budget,
        own,
        kind,
        key: route_store_key(route_name, kind, &value),
    }))
}

impl RouteKey {
    /// The kind of key: a header is a custom key, as `tollgate-tower` labels
    /// one.
    pub(crate) fn kind(&self) -> RouteKeyKind {
        match self {
            RouteKey::Principal => RouteKeyKind::Principal,
            RouteKey::Tenant => RouteKeyKind::Tenant,
            RouteKey::Ip => RouteKeyKind::Ip,
            RouteKey::Header(_) => RouteKeyKind::Custom,
        }
    }
}
