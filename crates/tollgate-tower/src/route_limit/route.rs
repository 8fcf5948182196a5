//! One route's budgets, and which of them (with which key) a request is held
//! to.

use std::sync::Arc;

use bytes::Bytes;
use http::Response;
use http_body_util::Full;
use tollgate_core::{
    ApiKeyRequirement, Caller, KEYLESS, Keyless, Limit, LimitUnits, PolicyError, PreparedPolicy,
    RouteBudgetChoice, RouteBudgets, RouteKeyKind, Store,
};

use crate::budget::Budget;
use crate::header_fields::{HeaderTemplate, advertised_quota};
use crate::host_limits::Shared;
use crate::key::{self, KeySelector, LimitKey, MissingKey, RequestParts};
use crate::problem::Problem;

/// A budget prepared for the store, with the route's RateLimit fields for it.
#[derive(Clone, Debug)]
pub(crate) struct PreparedBudget {
    budget: Budget,
    pub(crate) prepared: PreparedPolicy,
    pub(crate) headers: HeaderTemplate,
}

impl PreparedBudget {
    pub(crate) fn new(store: &dyn Store, route: &str, budget: Budget) -> Result<Self, PolicyError> {
        let prepared = store.prepare(budget.policy())?;
        let (quota, window_s) = advertised_quota(&budget.policy());
        Ok(PreparedBudget {
            budget,
            prepared,
            headers: HeaderTemplate::new(route, quota, window_s),
        })
    }

    /// The same budget, its fields named after `route`.
    pub(crate) fn for_route(&self, route: &str) -> Self {
        let (quota, window_s) = advertised_quota(&self.budget.policy());
        PreparedBudget {
            headers: HeaderTemplate::new(route, quota, window_s),
            ..self.clone()
        }
    }

    /// The budget it was prepared from.
    pub(crate) fn budget(&self) -> Budget {
        self.budget
    }

    /// The quota and window (seconds) advertised in `RateLimit-Policy`.
    pub(crate) fn quota(&self) -> (u64, u64) {
        advertised_quota(&self.budget.policy())
    }
}

/// A route's limits.
#[derive(Clone, Debug)]
pub(crate) struct Route {
    pub(crate) name: Arc<str>,
    pub(crate) shared: Arc<Shared>,
    /// The route's own budget, which overrides the host defaults.
    pub(crate) own: Option<PreparedBudget>,
    /// What the route's own budget is keyed by.
    pub(crate) selector: KeySelector,
    /// The host's per-tenant default, for this route.
    pub(crate) host_tenant: Option<PreparedBudget>,
    /// The host's per-IP default, for this route.
    pub(crate) host_ip: Option<PreparedBudget>,
    /// The units each request uses of every budget it is held to (1 to
    /// 2^32).
    pub(crate) cost: u64,
    /// How long a request its budgets would refuse may wait for its turn
    /// instead (see [`RouteLimitLayer::delay`](super::RouteLimitLayer::delay));
    /// zero: refused at once.
    pub(crate) max_wait: std::time::Duration,
    /// The most requests of one key waiting at once (see
    /// [`RouteLimitLayer::max_waiting`](super::RouteLimitLayer::max_waiting)).
    pub(crate) max_waiting: u64,
    /// How its requests are charged by usage when their responses end.
    pub(crate) charge: Option<super::charge::Charge>,
}

/// Which of a route's budgets.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Which {
    Own,
    HostTenant,
    HostIp,
}

/// One budget a request is held to: the route, which budget, and the key.
#[derive(Debug)]
pub(crate) struct PendingLimit {
    pub(crate) route: Arc<Route>,
    which: Which,
    pub(crate) key: LimitKey,
    /// Whether the request's principal is unknown and anonymous: its
    /// refusals are counted under [`KEYLESS`], as the gateway counts them.
    anonymous: bool,
}

impl PendingLimit {
    pub(crate) fn budget(&self) -> &PreparedBudget {
        let budget = match self.which {
            Which::Own => self.route.own.as_ref(),
            Which::HostTenant => self.route.host_tenant.as_ref(),
            Which::HostIp => self.route.host_ip.as_ref(),
        };
        budget.expect("a pending limit names a budget its route has")
    }

    /// What an admitted request settles at the end of its response, on a
    /// route charged by usage.
    /// `charged`: the flag the deciding layer sets once it charged the
    /// limits, asked for only on such a route (most routes need none).
    /// `trailers`: whether its client accepts trailers (`TE: trailers`), so
    /// the response ends with the RateLimit fields after the settlement;
    /// asked only on such a route too.
    pub(crate) fn settlement(
        &self,
        charged: impl FnOnce() -> Arc<std::sync::atomic::AtomicBool>,
        trailers: impl FnOnce() -> bool,
    ) -> Option<super::charge::Settlement> {
        let charge = self.route.charge.clone()?;
        let charged = charged();
        let trailers = trailers();
        Some(super::charge::Settlement {
            trailers: trailers.then(|| self.budget().headers.clone()),
            store: Arc::clone(&self.route.shared.store),
            key: self.key.text.clone(),
            policy: self.budget().prepared,
            cost: self.route.cost,
            charge,
            route: Arc::clone(&self.route.name),
            charged,
        })
    }

    /// The limit for [`Store::acquire_units`], charged the route's cost.
    pub(crate) fn limit(&self) -> LimitUnits<'_> {
        LimitUnits {
            limit: Limit::Policy {
                key: &self.key.text,
                policy: &self.budget().prepared,
            },
            units: self.route.cost,
        }
    }

    /// The `key_kind` label of its refusals: its key's kind, or
    /// [`KEYLESS`] for an anonymous request.
    pub(crate) fn kind_label(&self) -> &'static str {
        if self.anonymous {
            KEYLESS
        } else {
            self.key.kind.label()
        }
    }
}

/// What a request is held to on a route.
#[derive(Debug)]
pub(crate) enum Check {
    /// No budget applies: call the service, add nothing, keep no state.
    PassThrough,
    /// This budget and key.
    Limit(PendingLimit),
    /// Refused before any budget is used (401, 500); boxed, so the common
    /// path moves little.
    Refused(Box<Response<Full<Bytes>>>),
}

impl Route {
    /// The budget and key `request` is held to on this route. With a list
    /// of known keys ([`HostLimitsBuilder::known_keys`]), a principal not
    /// on it is refused (401) or anonymous, as core's
    /// [`KeyRules::identify`](tollgate_core::KeyRules::identify) says: an
    /// anonymous request is keyed as if it had no principal (per client
    /// IP), never by its principal or tenant.
    ///
    /// [`HostLimitsBuilder::known_keys`]: crate::HostLimitsBuilder::known_keys
    pub(crate) fn check(self: &Arc<Self>, request: &RequestParts<'_>) -> Check {
        let budgets = RouteBudgets {
            own: self.own.as_ref().map(|budget| (budget, &self.selector)),
            host_tenant: self.host_tenant.as_ref(),
            host_ip: self.host_ip.as_ref(),
        };
        let anonymous = match (self.shared.key_rules(), key::principal(request.extensions)) {
            (Some(rules), Some(principal)) => {
                match rules.identify(ApiKeyRequirement::Optional, Some(principal), |_| false) {
                    Ok(Caller::Key(_)) => false,
                    Ok(Caller::Keyless(_)) => true,
                    Err(_) => {
                        return Check::Refused(Box::new(Problem::unauthorized(
                            "this principal is not known",
                        )));
                    }
                }
            }
            _ => false,
        };
        let choice = if anonymous {
            // Per client IP only: the route's own budget, else the host's.
            budgets.choose_keyless(Keyless::Unknown, |_| RouteKeyKind::Ip)
        } else {
            budgets.choose(|| key::tenant(request.extensions).is_some())
        };
        let (which, selector) = match choice {
            None => return Check::PassThrough,
            Some(RouteBudgetChoice::OwnPerIp { .. }) => (Which::Own, &KeySelector::Ip),
            Some(RouteBudgetChoice::Own { selector, .. }) => (Which::Own, selector),
            Some(RouteBudgetChoice::Host {
                kind: RouteKeyKind::Tenant,
                ..
            }) => (Which::HostTenant, &KeySelector::Tenant),
            Some(RouteBudgetChoice::Host { .. }) => (Which::HostIp, &KeySelector::Ip),
        };
        match selector.key(request, &self.shared.client_ip, &self.name) {
            Ok(key) => Check::Limit(PendingLimit {
                route: Arc::clone(self),
                which,
                key,
                anonymous,
            }),
            Err(MissingKey::Identity(kind)) => {
                Check::Refused(Box::new(Problem::unauthorized(format!(
                    "{} is rate limited per {}, and the request has none",
                    self.name,
                    kind.noun()
                ))))
            }
            Err(MissingKey::PeerAddress) => Check::Refused(Box::new(Problem::internal(format!(
                "{} is rate limited per client IP, and the server does not record peer \
                 addresses (serve with ConnectInfo, or insert PeerAddr)",
                self.name
            )))),
        }
    }
}
