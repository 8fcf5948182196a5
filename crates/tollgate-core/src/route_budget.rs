//! A route's budget, the one place that says which budget applies to a
//! request, what kinds of key a budget is keyed by, and the key its state has
//! in a [`Store`](crate::Store). The tower layer (`tollgate-tower`) and the
//! gateway server (`tollgate serve`) both choose through here.
//!
//! ```
//! use tollgate_core::{RouteBudgetChoice, RouteBudgets, RouteKeyKind, route_store_key};
//!
//! // Budgets are any type: here (rpm, burst) pairs, and the route's own
//! // budget is keyed by a selector of the caller's own type (a `&str` here).
//! let own = (60, 5);
//! let host_ip = (30, 3);
//! let budgets = RouteBudgets { own: None::<(&_, &&str)>, host_tenant: None, host_ip: Some(&host_ip) };
//! let choice = budgets.choose(|| false).unwrap();
//! assert_eq!(choice, RouteBudgetChoice::Host { budget: &host_ip, kind: RouteKeyKind::Ip });
//! let budgets = RouteBudgets { own: Some((&own, &"tenant")), host_tenant: None, host_ip: Some(&host_ip) };
//! assert_eq!(budgets.choose(|| true).unwrap().budget(), &own);
//! assert_eq!(route_store_key("orders", RouteKeyKind::Ip, "192.0.2.7"), "orders/ip:192.0.2.7");
//! ```

use crate::caller::Keyless;

/// What a route budget's key is. Its [`label`](RouteKeyKind::label) is both
/// the `key_kind` label of the denial counter and the namespace of the key in
/// the store, so a tenant's bucket and an IP's with the same text never meet.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum RouteKeyKind {
    /// The authenticated principal (the tower layer's `Principal`, the
    /// gateway's API key).
    Principal,
    /// The request's tenant.
    Tenant,
    /// The client IP (or IPv6 prefix).
    Ip,
    /// Anything else the route chooses: a function of the request (tower), a
    /// request header (gateway).
    Custom,
}

impl RouteKeyKind {
    /// Whether a request without an API key can be keyed so: by its client
    /// IP or a custom key (a header), not by the key nor the key's tenant.
    pub fn serves_keyless(self) -> bool {
        matches!(self, RouteKeyKind::Ip | RouteKeyKind::Custom)
    }

    /// Every kind, in declaration order.
    pub const ALL: [RouteKeyKind; 4] = [
        RouteKeyKind::Principal,
        RouteKeyKind::Tenant,
        RouteKeyKind::Ip,
        RouteKeyKind::Custom,
    ];

    /// `principal`, `tenant`, `ip` or `custom`: the metric label and the
    /// store key's namespace.
    pub fn label(self) -> &'static str {
        match self {
            RouteKeyKind::Principal => "principal",
            RouteKeyKind::Tenant => "tenant",
            RouteKeyKind::Ip => "ip",
            RouteKeyKind::Custom => "custom",
        }
    }

    /// The kind in words, for messages such as "orders is rate limited per
    /// tenant": `principal`, `tenant`, `client IP` or `custom key`.
    pub fn noun(self) -> &'static str {
        match self {
            RouteKeyKind::Principal => "principal",
            RouteKeyKind::Tenant => "tenant",
            RouteKeyKind::Ip => "client IP",
            RouteKeyKind::Custom => "custom key",
        }
    }
}

/// The budgets one route may hold a request to. `B` is the caller's budget
/// type (a prepared policy with its headers, say) and `S` what the route's own
/// budget is keyed by (the caller's selector type); both are only borrowed.
#[derive(Debug)]
pub struct RouteBudgets<'a, B, S> {
    /// The route's own budget and its key selector; it overrides the host's.
    pub own: Option<(&'a B, &'a S)>,
    /// The host's default budget per tenant, for routes without their own.
    pub host_tenant: Option<&'a B>,
    /// The host's default budget per client IP, for routes without their own.
    pub host_ip: Option<&'a B>,
}

/// The budget a request is held to on its route, and how it is keyed.
#[derive(Debug, PartialEq, Eq)]
pub enum RouteBudgetChoice<'a, B, S> {
    /// The route's own budget, keyed as its selector says (which may find no
    /// key: the caller answers that, with a 401 for instance).
    Own {
        /// The budget.
        budget: &'a B,
        /// Its key selector.
        selector: &'a S,
    },
    /// The route's own budget, keyed per client IP whatever its selector
    /// says: an anonymous request's ([`Keyless::Unknown`]).
    OwnPerIp {
        /// The budget.
        budget: &'a B,
    },
    /// A host default: per [`RouteKeyKind::Tenant`] or per
    /// [`RouteKeyKind::Ip`].
    Host {
        /// The budget.
        budget: &'a B,
        /// [`RouteKeyKind::Tenant`] or [`RouteKeyKind::Ip`].
        kind: RouteKeyKind,
    },
}

impl<'a, B, S> RouteBudgetChoice<'a, B, S> {
    /// The chosen budget.
    pub fn budget(&self) -> &'a B {
        match self {
            RouteBudgetChoice::Own { budget, .. }
            | RouteBudgetChoice::OwnPerIp { budget }
            | RouteBudgetChoice::Host { budget, .. } => budget,
        }
    }
}

impl<'a, B, S> RouteBudgets<'a, B, S> {
    /// The budget that applies: the route's own; else the host's per tenant
    /// when `has_tenant()` (called only then: the request's tenant is looked
    /// up only when it matters); else the host's per IP; else none (the
    /// request is not limited by its route, and no state is kept).
    pub fn choose(self, has_tenant: impl FnOnce() -> bool) -> Option<RouteBudgetChoice<'a, B, S>> {
        if let Some((budget, selector)) = self.own {
            return Some(RouteBudgetChoice::Own { budget, selector });
        }
        if let Some(budget) = self.host_tenant
            && has_tenant()
        {
            return Some(RouteBudgetChoice::Host {
                budget,
                kind: RouteKeyKind::Tenant,
            });
        }
        self.host_ip.map(|budget| RouteBudgetChoice::Host {
            budget,
            kind: RouteKeyKind::Ip,
        })
    }
}

impl<'a, B, S> RouteBudgets<'a, B, S> {
    /// The budget of a request without an API key (see
    /// [`Caller::Keyless`](crate::Caller)), by why it has none:
    ///
    /// - without a key, or on a route that reads none
    ///   ([`Keyless::NoKey`], [`Keyless::NotRead`]): the route's own when
    ///   its key needs none (`kind_of(selector)` is a
    ///   [`RouteKeyKind::serves_keyless`] kind: per client IP or per header),
    ///   else the host's per IP;
    /// - with an unknown key made anonymous ([`Keyless::Unknown`]): the
    ///   route's own, per client IP whatever it is keyed by (a header the
    ///   client sets would let it pick a fresh budget as an invented key
    ///   would), else the host's per IP.
    ///
    /// Never the host's per tenant (a tenant is known by its keys). `None`:
    /// no budget applies.
    pub fn choose_keyless(
        self,
        reason: Keyless,
        kind_of: impl FnOnce(&S) -> RouteKeyKind,
    ) -> Option<RouteBudgetChoice<'a, B, S>> {
        if let Some((budget, selector)) = self.own {
            if reason == Keyless::Unknown {
                return Some(RouteBudgetChoice::OwnPerIp { budget });
            }
            if kind_of(selector).serves_keyless() {
                return Some(RouteBudgetChoice::Own { budget, selector });
            }
        }
        self.host_ip.map(|budget| RouteBudgetChoice::Host {
            budget,
            kind: RouteKeyKind::Ip,
        })
    }
}

/// The most units a route may charge each request (its `cost`): 2^32.
pub const MAX_COST: u64 = 1 << 32;

/// The store key of `value` of `kind` under route `route`:
/// `{route}/{kind}:{value}`, such as `orders/tenant:acme`, for
/// [`Limit::Policy`](crate::Limit). Routes and kinds never share a key.
pub fn route_store_key(route: &str, kind: RouteKeyKind, value: &str) -> String {
    let mut key = route_store_key_prefix(route, kind, value.len());
    key.push_str(value);
    key
}

/// `{route}/{kind}:`, the start of [`route_store_key`], in a string with room
/// for `value_capacity` more bytes: for callers that write the value in place
/// (a client IP, say) without a second allocation.
pub fn route_store_key_prefix(route: &str, kind: RouteKeyKind, value_capacity: usize) -> String {
    // The kind with its separators, one copy (this is per request).
    let between = match kind {
        RouteKeyKind::Principal => "/principal:",
        RouteKeyKind::Tenant => "/tenant:",
        RouteKeyKind::Ip => "/ip:",
        RouteKeyKind::Custom => "/custom:",
    };
    let mut key = String::with_capacity(route.len() + between.len() + value_capacity);
    key.push_str(route);
    key.push_str(between);
    key
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The budgets of a route: 1 its own (keyed by selector 'k'), 2 the
    /// host's per tenant, 3 the host's per IP, each present or not.
    fn budgets<'a>(
        own: Option<&'a u8>,
        tenant: Option<&'a u8>,
        ip: Option<&'a u8>,
    ) -> RouteBudgets<'a, u8, char> {
        RouteBudgets {
            own: own.map(|budget| (budget, &'k')),
            host_tenant: tenant,
            host_ip: ip,
        }
    }

    #[test]
    fn the_route_s_own_budget_comes_first_without_asking_for_a_tenant() {
        let (own, tenant, ip) = (1, 2, 3);
        for has_tenant in [false, true] {
            let choice = budgets(Some(&own), Some(&tenant), Some(&ip))
                .choose(|| panic!("the tenant is not needed: asked {has_tenant}"));
            assert_eq!(
                choice,
                Some(RouteBudgetChoice::Own {
                    budget: &1,
                    selector: &'k'
                })
            );
        }
    }

    #[test]
    fn host_defaults_go_per_tenant_for_a_request_with_one_else_per_ip() {
        let (tenant, ip) = (2, 3);
        let host = |has_tenant: bool, tenant: Option<&u8>, ip: Option<&u8>| {
            budgets(None, tenant, ip)
                .choose(|| has_tenant)
                .map(|choice| match choice {
                    RouteBudgetChoice::Host { budget, kind } => (*budget, kind),
                    RouteBudgetChoice::Own { .. } | RouteBudgetChoice::OwnPerIp { .. } => {
                        panic!("no own budget")
                    }
                })
        };
        use RouteKeyKind::{Ip, Tenant};
        assert_eq!(host(true, Some(&tenant), Some(&ip)), Some((2, Tenant)));
        assert_eq!(host(false, Some(&tenant), Some(&ip)), Some((3, Ip)));
        assert_eq!(host(true, None, Some(&ip)), Some((3, Ip)));
        assert_eq!(host(true, Some(&tenant), None), Some((2, Tenant)));
        assert_eq!(host(false, Some(&tenant), None), None);
        assert_eq!(host(true, None, None), None);
        assert_eq!(host(false, None, None), None);
    }

    #[test]
    fn the_tenant_is_looked_up_only_when_a_tenant_default_exists() {
        let ip = 3;
        let choice = budgets(None, None, Some(&ip)).choose(|| panic!("no tenant default"));
        assert_eq!(choice.map(|choice| *choice.budget()), Some(3));
    }

    #[test]
    fn keyless_requests_get_a_keyless_own_budget_else_the_host_s_per_ip() {
        let (own, tenant, ip) = (1, 2, 3);
        let keyless = |reason, own: Option<&u8>, ip: Option<&u8>, kind| {
            budgets(own, Some(&tenant), ip)
                .choose_keyless(reason, |selector| {
                    assert_eq!(*selector, 'k');
                    kind
                })
                .map(|choice| match choice {
                    RouteBudgetChoice::Own { budget, .. } => ("own", *budget),
                    RouteBudgetChoice::OwnPerIp { budget } => ("own per IP", *budget),
                    RouteBudgetChoice::Host { budget, kind } => {
                        assert_eq!(kind, RouteKeyKind::Ip);
                        ("host", *budget)
                    }
                })
        };
        use Keyless::{NoKey, NotRead, Unknown};
        use RouteKeyKind::{Custom, Ip, Principal, Tenant};
        for reason in [NoKey, NotRead] {
            assert_eq!(keyless(reason, Some(&own), Some(&ip), Ip), Some(("own", 1)));
            assert_eq!(
                keyless(reason, Some(&own), Some(&ip), Custom),
                Some(("own", 1))
            );
            assert_eq!(
                keyless(reason, Some(&own), Some(&ip), Principal),
                Some(("host", 3))
            );
            assert_eq!(keyless(reason, Some(&own), None, Tenant), None);
            assert_eq!(keyless(reason, None, Some(&ip), Ip), Some(("host", 3)));
            assert_eq!(keyless(reason, None, None, Ip), None);
        }
        // An anonymous request never picks its budget by a header it sends.
        for kind in [Ip, Custom, Principal, Tenant] {
            assert_eq!(
                keyless(Unknown, Some(&own), None, kind),
                Some(("own per IP", 1))
            );
        }
        assert_eq!(keyless(Unknown, None, Some(&ip), Custom), Some(("host", 3)));
        assert_eq!(keyless(Unknown, None, None, Custom), None);
    }

    #[test]
    fn only_ip_and_custom_keys_serve_keyless_requests() {
        let serving: Vec<_> = RouteKeyKind::ALL
            .iter()
            .filter(|kind| kind.serves_keyless())
            .map(|kind| kind.label())
            .collect();
        assert_eq!(serving, ["ip", "custom"]);
    }

    #[test]
    fn kinds_have_their_labels_and_nouns() {
        let labels: Vec<_> = RouteKeyKind::ALL.iter().map(|kind| kind.label()).collect();
        assert_eq!(labels, ["principal", "tenant", "ip", "custom"]);
        let nouns: Vec<_> = RouteKeyKind::ALL.iter().map(|kind| kind.noun()).collect();
        assert_eq!(nouns, ["principal", "tenant", "client IP", "custom key"]);
    }

    #[test]
    fn store_keys_namespace_route_and_kind() {
        assert_eq!(
            route_store_key("orders", RouteKeyKind::Tenant, "acme"),
            "orders/tenant:acme"
        );
        assert_eq!(
            route_store_key("orders", RouteKeyKind::Principal, "acme"),
            "orders/principal:acme"
        );
        assert_eq!(
            route_store_key("search", RouteKeyKind::Custom, "a:b/c"),
            "search/custom:a:b/c"
        );
        let mut key = route_store_key_prefix("search", RouteKeyKind::Ip, 39);
        assert_eq!(key, "search/ip:");
        assert!(key.capacity() >= "search/ip:".len() + 39);
        key.push_str("2001:db8:1:2::/64");
        assert_eq!(key, "search/ip:2001:db8:1:2::/64");
    }
}
