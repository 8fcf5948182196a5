//! One configuration replaying requests ([`Replayer`]): its plans in core's
//! `Limiter` (the gateway's in-memory engine, on a nanosecond clock set to
//! each request's time), its routes' budgets and the host's, chosen by
//! core's `RouteBudgets` as the gateway chooses them, and each request's
//! limits decided all or nothing, as the gateway decides them (reserved
//! when a route's or a tier's delay lets it wait).

use std::collections::{HashMap, HashSet};
use std::time::Duration;

use tollgate_core::{
    ApiKeyRequirement, DEFAULT_TIER, Fingerprinter, KEYLESS, Keyless, Limit, LimitUnits, Limiter,
    PreparedPolicy, Resolution, RouteBudgetChoice, RouteBudgets, RouteKeyKind, route_store_key,
};
use tollgate_gateway::config::{RouteConfig, RouteKey, ServeConfig};

use crate::line::{LogLine, Logged};

/// The name of the route of a gateway without routes.
const DEMO_ROUTE: &str = "demo";

/// A configuration that cannot be replayed.
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub struct SetupError(String);

/// One route as the replay decides it.
struct ReplayRoute {
    name: String,
    prefix: String,
    api_key: ApiKeyRequirement,
    budget: Option<(PreparedPolicy, RouteKey)>,
    cost: u64,
    delay: Duration,
    shadow: bool,
}

/// What a request came to. Its `Debug` never shows the key.
#[derive(Clone, PartialEq, Eq)]
pub enum Replayed {
    /// Decided: allowed or refused, on its tier and route, under `key`
    /// (the API key, or a keyless request's route budget key).
    Decided {
        /// Whether every limit allowed it.
        allowed: bool,
        /// Its plan's tier (`keyless` without a key).
        tier: String,
        /// Its route.
        route: String,
        /// Its key, and whether it is a route budget's (keyless).
        key: Option<(String, bool)>,
    },
    /// An exempt key: no limit.
    Exempt,
    /// Not replayed, and why.
    Skipped(Skip),
}

/// Why a line is not replayed.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum Skip {
    /// Its request reached no rate (logged `none`, `in_flight_refused` or
    /// `unavailable`).
    Undecided,
    /// No route matches its path, or its route is not configured.
    NoRoute,
    /// No API key on a route that requires one (the gateway answered 401).
    NoKey,
    /// A route budget keyed by a header, which no log holds.
    HeaderBudget,
    /// The route budget's key (a client address, a tenant) is not in the line.
    BudgetKeyMissing,
    /// A request without a key that no budget applies to.
    NoBudget,
}

impl Skip {
    /// Its name in the JSON report (`skipped`).
    pub fn code(self) -> &'static str {
        match self {
            Skip::Undecided => "undecided",
            Skip::NoRoute => "no_route",
            Skip::NoKey => "no_key",
            Skip::HeaderBudget => "header_budget",
            Skip::BudgetKeyMissing => "budget_key_missing",
            Skip::NoBudget => "no_budget",
        }
    }

    /// In words, for the table.
    pub fn describe(code: &str) -> &'static str {
        match code {
            "undecided" => "no rate was decided (logged none, in_flight_refused or unavailable)",
            "no_route" => "no route matches",
            "no_key" => "no API key on a route that requires one",
            "header_budget" => "a route budget keyed by a header the log does not hold",
            "budget_key_missing" => "the route budget's key is not in the log",
            "no_budget" => "no budget applies to a request without a known API key",
            _ => "another reason",
        }
    }
}

impl std::fmt::Debug for Replayed {
    fn fmt(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Replayed::Decided {
                allowed,
                tier,
                route,
                key,
            } => formatter
                .debug_struct("Decided")
                .field("allowed", allowed)
                .field("tier", tier)
                .field("route", route)
                .field(
                    "key",
                    &key.as_ref().map(|(_, keyless)| ("(a key)", keyless)),
                )
                .finish(),
            Replayed::Exempt => formatter.write_str("Exempt"),
            Replayed::Skipped(reason) => formatter.debug_tuple("Skipped").field(reason).finish(),
        }
    }
}

/// One configuration's engine and routes.
pub struct Replayer {
    limiter: Limiter,
    /// Exempt keys, as given and as fingerprints.
    exempt: HashSet<String>,
    /// Each key's tenant, by the key as given and by its fingerprint.
    tenants: HashMap<String, String>,
    routes: Vec<ReplayRoute>,
    host_tenant: Option<PreparedPolicy>,
    host_ip: Option<PreparedPolicy>,
    tier_delays: bool,
}

impl Replayer {
    /// The replayer of `config`; fingerprints made under `fingerprints`.
    ///
    /// # Errors
    ///
    /// [`SetupError`] when a policy or a budget cannot be compiled.
    pub fn new(config: &ServeConfig, fingerprints: &Fingerprinter) -> Result<Self, SetupError> {
        let failed = |error: &dyn std::fmt::Display| SetupError(error.to_string());
        let limiter = Limiter::new(&config.limits, Resolution::Nanoseconds)
            .map_err(|error| failed(&error))?;
        let prepare = |budget: &tollgate_tower::Budget| {
            limiter
                .prepare(budget.policy())
                .map_err(|error| failed(&error))
        };
        let mut routes = Vec::new();
        for route in &config.routes {
            routes.push(replay_route(route, &prepare)?);
        }
        let both = |key: &str| [key.to_owned(), fingerprints.of(key).to_string()];
        let exempt = config
            .limits
            .exempt_keys
            .iter()
            .flat_map(|key| both(key))
            .collect();
        let mut tenants = HashMap::new();
        for (tenant, keys) in &config.tenants {
            for key in keys {
                for form in both(key) {
                    tenants.insert(form, tenant.clone());
                }
            }
        }
        Ok(Replayer {
            host_tenant: config.host.tenant.as_ref().map(prepare).transpose()?,
            host_ip: config.host.ip.as_ref().map(prepare).transpose()?,
            limiter,
            exempt,
            tenants,
            routes,
            tier_delays: config.limits.any_tier_delay(),
        })
    }

    /// Decides `line` at its time.
    pub fn replay(&self, line: &LogLine) -> Replayed {
        if line.logged == Some(Logged::Undecided) {
            return Replayed::Skipped(Skip::Undecided);
        }
        let demo = ReplayRoute {
            name: DEMO_ROUTE.to_owned(),
            prefix: "/".to_owned(),
            api_key: ApiKeyRequirement::Required,
            budget: None,
            cost: 1,
            delay: Duration::ZERO,
            shadow: false,
        };
        let route = match self.find(line) {
            Some(route) => route,
            None if self.routes.is_empty() => &demo,
            None => return Replayed::Skipped(Skip::NoRoute),
        };
        let key = if route.api_key.reads_keys() {
            line.key.as_deref()
        } else {
            None
        };
        let keyless = match (key, route.api_key) {
            (Some(_), _) => None,
            (None, ApiKeyRequirement::None) => Some(Keyless::NotRead),
            (None, ApiKeyRequirement::Optional) => Some(Keyless::NoKey),
            // A keyless line of a route that requires a key: an anonymous
            // key's, when tollgate logged its decision; else a 401.
            (None, ApiKeyRequirement::Required) if line.logged.is_some() => Some(Keyless::Unknown),
            (None, ApiKeyRequirement::Required) => {
                return Replayed::Skipped(Skip::NoKey);
            }
        };
        if key.is_some_and(|key| self.exempt.contains(key)) {
            return Replayed::Exempt;
        }
        if let (Some(key), Some(tier)) = (key, line.tier.as_deref())
            && tier != KEYLESS
            && self.limiter.tier_of(key) != tier
        {
            // A tier this configuration lacks: the key stays on its plan.
            let _ = self.limiter.assign_tier(key, tier);
        }
        let tenant = key.and_then(|key| self.tenants.get(key));
        let budgets = RouteBudgets {
            own: route
                .budget
                .as_ref()
                .map(|(budget, selector)| (budget, selector)),
            host_tenant: self.host_tenant.as_ref(),
            host_ip: self.host_ip.as_ref(),
        };
        let choice = match keyless {
            None => budgets.choose(|| tenant.is_some()),
            Some(reason) => budgets.choose_keyless(reason, kind_of),
        };
        let budget = match choice {
            None => None,
            Some(choice) => {
                let (budget, kind) = match choice {
                    RouteBudgetChoice::Own { budget, selector } => (budget, kind_of(selector)),
                    RouteBudgetChoice::OwnPerIp { budget } => (budget, RouteKeyKind::Ip),
                    RouteBudgetChoice::Host { budget, kind } => (budget, kind),
                };
                let value = match kind {
                    RouteKeyKind::Principal => key.map(str::to_owned),
                    RouteKeyKind::Tenant => tenant.cloned(),
                    RouteKeyKind::Ip => line.client.clone(),
                    RouteKeyKind::Custom => {
                        return Replayed::Skipped(Skip::HeaderBudget);
                    }
                };
                let Some(value) = value else {
                    return Replayed::Skipped(Skip::BudgetKeyMissing);
                };
                Some((budget, route_store_key(&route.name, kind, &value)))
            }
        };
        if key.is_none() && budget.is_none() {
            return Replayed::Skipped(Skip::NoBudget);
        }
        let mut limits = Vec::with_capacity(2);
        if let Some(key) = key {
            limits.push(LimitUnits {
                limit: Limit::Plan(key),
                units: route.cost,
            });
        }
        if let Some((policy, budget_key)) = &budget {
            limits.push(LimitUnits {
                limit: Limit::Policy {
                    key: budget_key,
                    policy,
                },
                units: route.cost,
            });
        }
        let now = line.time;
        let (allowed, decisions) = if !route.delay.is_zero() {
            let ticks = u64::try_from(route.delay.as_nanos()).unwrap_or(u64::MAX);
            let reservation = self.limiter.reserve_units(&limits, now, ticks);
            (reservation.is_admitted(), reservation.decisions)
        } else if self.tier_delays && key.is_some() && !route.shadow {
            let reservation = self.limiter.reserve_units_within(&limits, now, None);
            (reservation.is_admitted(), reservation.decisions)
        } else {
            let decisions = self.limiter.acquire_units(&limits, now);
            let allowed = decisions.iter().all(|decision| decision.is_allowed());
            (allowed, decisions)
        };
        let tier = match key {
            Some(_) => decisions
                .first()
                .and_then(|plan| plan.tier.as_deref())
                .unwrap_or(DEFAULT_TIER)
                .to_owned(),
            None => KEYLESS.to_owned(),
        };
        let counted = match (key, &budget) {
            (Some(key), _) => Some((key.to_owned(), false)),
            (None, Some((_, budget_key))) => Some((budget_key.clone(), true)),
            (None, None) => None,
        };
        Replayed::Decided {
            allowed,
            tier,
            route: route.name.clone(),
            key: counted,
        }
    }

    /// The route of `line`: the one it names, else the longest prefix of
    /// its path (segment by segment, as the gateway matches).
    fn find(&self, line: &LogLine) -> Option<&ReplayRoute> {
        if let Some(name) = &line.route {
            return self.routes.iter().find(|route| route.name == *name);
        }
        let path = line.path.as_deref()?;
        self.routes
            .iter()
            .filter(|route| prefix_matches(&route.prefix, path))
            .max_by_key(|route| route.prefix.len())
    }
}

/// Whether `prefix` holds `path`: equal, or `path` goes on past it at a
/// segment boundary (`/api` holds `/api/x`, not `/apix`).
fn prefix_matches(prefix: &str, path: &str) -> bool {
    let trimmed = prefix.trim_end_matches('/');
    trimmed.is_empty()
        || path == trimmed
        || path
            .strip_prefix(trimmed)
            .is_some_and(|rest| rest.starts_with('/'))
}

fn kind_of(selector: &RouteKey) -> RouteKeyKind {
    match selector {
        RouteKey::Principal => RouteKeyKind::Principal,
        RouteKey::Tenant => RouteKeyKind::Tenant,
        RouteKey::Ip => RouteKeyKind::Ip,
        RouteKey::Header(_) => RouteKeyKind::Custom,
    }
}

fn replay_route(
    route: &RouteConfig,
    prepare: &dyn Fn(&tollgate_tower::Budget) -> Result<PreparedPolicy, SetupError>,
) -> Result<ReplayRoute, SetupError> {
    let budget = route
        .budget()
        .map_err(|error| SetupError(error.to_string()))?
        .map(|budget| prepare(&budget).map(|policy| (policy, route.route_key())))
        .transpose()?;
    Ok(ReplayRoute {
        name: route.name().to_owned(),
        prefix: route.prefix.clone(),
        api_key: route.api_key,
        budget,
        cost: route.cost,
        delay: route.delay,
        shadow: route.shadow,
    })
}
