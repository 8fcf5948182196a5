//! The limits of one proxied request: its API key's plan and its route's
//! budget (or the host default), decided together, all or nothing.

use std::net::SocketAddr;

use axum::response::Response;
use http::{HeaderMap, StatusCode};
use tollgate_core::{
    Decision, Limit, LimitDecision, Policy, Redacted, RouteBudgetChoice, RouteBudgets,
    RouteKeyKind, Stopwatch, Store, route_store_key,
};
use tollgate_tower::{
    Problem, RateLimitField, advertised_quota, record_denial, record_shadow_denial,
};

use crate::config::RouteKey;
use crate::observe::access_log::{Admission, Outcome};
use crate::observe::metrics;
use crate::request::api_key::{KeyError, MAX_KEY_LENGTH, api_key};
use crate::request::problem::{problem, respond};
use crate::request::rate_limit_headers::{
    RateLimitHeaders, rate_limit_headers, rate_limit_headers_listed,
};
use crate::request::routes::{Route, RouteBudget};
use crate::request::shadow::ShadowLimits;
use crate::serve::reloadable::Reloadable;
use tollgate_core::{FailurePolicy, StoreError};

/// The `key_kind` label of a refusal by the API key's plan (route budgets
/// use [`RouteKeyKind::label`]).
const PLAN_KEY_KIND: &str = "api_key";

/// The route budget that applies to a request, with its key.
struct RouteLimit<'a> {
    budget: &'a RouteBudget,
    kind: RouteKeyKind,
    key: String,
}

/// Checks a request against its limits. `Ok` holds the headers to add to the
/// forwarded response; `Err` the response to send instead (401, 429, 503).
/// `outcome` is given the decision and the plan's tier, for the access log.
pub(crate) async fn admit(
    store: &dyn Store,
    reloadable: &Reloadable,
    route: Option<&Route>,
    headers: &HeaderMap,
    peer: SocketAddr,
    outcome: &mut Outcome,
) -> Result<RateLimitHeaders, Response> {
    let key = api_key(headers).map_err(|error| match error {
        KeyError::Missing(reason) => respond(Problem::unauthorized(reason)),
        KeyError::Ambiguous(reason) => problem(StatusCode::BAD_REQUEST, reason),
    })?;
    let route_name = route.map_or(&reloadable.demo_route, |route| &route.name);
    if store.is_exempt(key) {
        reloadable.decisions.record(true, "exempt", route_name);
        outcome.admission = Admission::Exempt;
        return Ok(RateLimitHeaders::default());
    }
    let route_limit = route_limit(reloadable, route, route_name, key, headers, peer)
        .map_err(|reason| respond(Problem::unauthorized(reason)))?;
    let stopwatch = Stopwatch::start();
    let decisions = match decide(store, key, route_limit.as_ref()).await {
        Ok(decisions) => decisions,
        Err(error) => {
            return match store_failed(reloadable, route_name, &error, outcome) {
                None => Ok(RateLimitHeaders::default()),
                Some(refusal) => Err(refusal),
            };
        }
    };
    reloadable.decisions.record_time(stopwatch.elapsed());
    let plan = &decisions.plan;
    let tier = plan.tier.as_deref().unwrap_or(tollgate_core::DEFAULT_TIER);
    outcome.set_tier(plan.tier.as_ref());
    let shadow = ShadowLimits::of(&reloadable.refusal, tier, route);
    // The headers of the limits `described` says (0 the plan, 1 the route
    // budget).
    let headers_of = |described: &dyn Fn(usize) -> bool| {
        let route_field = route_limit
            .as_ref()
            .zip(decisions.route.as_ref())
            .map(|(limit, decision)| route_field(route_name, limit, decision))
            .filter(|_| described(1));
        if plan.further.is_empty() || !described(0) {
            let plan_field = plan_field(tier, plan).filter(|_| described(0));
            match (plan_field, route_field) {
                (Some(plan), Some(route)) => rate_limit_headers(&[plan, route]),
                (Some(only), None) | (None, Some(only)) => rate_limit_headers(&[only]),
                (None, None) => RateLimitHeaders::default(),
            }
        } else {
            plan_list_headers(plan, route_field)
        }
    };
    let mut headers = headers_of(&|index| shadow.sends_headers(index));
    let allowed = decisions.iter().all(LimitDecision::is_allowed);
    reloadable.decisions.record(allowed, tier, route_name);
    if allowed {
        outcome.admission = Admission::Allowed;
        return Ok(headers);
    }
    let refusal = Refusal::tally(
        &decisions,
        &Refusing {
            key,
            tier,
            route,
            route_name,
            route_limit: route_limit.as_ref(),
            shadow: &shadow,
            reloadable,
        },
    );
    if !refusal.enforced {
        outcome.admission = Admission::Shadow;
        return Ok(headers);
    }
    outcome.admission = Admission::Refused;
    if refusal.in_shadow {
        // A refusal's headers describe the enforced limits, which refused
        // it (its `Retry-After` is theirs), never a shadow one's longer wait.
        headers = headers_of(&|index| !shadow.is_shadow(index));
    }
    tracing::debug!(key = %Redacted(key), route = %route_name, retry_after = refusal.retry_after, "rate limited");
    Err(refusal.response(headers))
}

/// The plan of `key`, and the route budget `route_limit` if any, decided
/// together by `store`. A lone plan on a store that answers at once (the
/// in-memory one) is decided without a future or a `Vec`.
async fn decide(
    store: &dyn Store,
    key: &str,
    route_limit: Option<&RouteLimit<'_>>,
) -> Result<Decisions, StoreError> {
    let plan_limit = Limit::Plan(key);
    match route_limit {
        None => match store.acquire_one_now(&plan_limit) {
            Some(plan) => Ok(Decisions { plan, route: None }),
            None => acquire(store, &[plan_limit]).await,
        },
        Some(route_limit) => {
            let route = Limit::Policy {
                key: &route_limit.key,
                policy: &route_limit.budget.prepared,
            };
            acquire(store, &[plan_limit, route]).await
        }
    }
}

/// What a request gets when the store could not decide, by its failure
/// policy: `None`, it goes through (`fail_open`), or the 503 answering it
/// (`fail_closed`); counted and noted in `outcome`.
fn store_failed(
    reloadable: &Reloadable,
    route_name: &std::sync::Arc<str>,
    error: &StoreError,
    outcome: &mut Outcome,
) -> Option<Response> {
    metrics::record_store_failure(route_name, reloadable.failure, error);
    outcome.admission = Admission::Unavailable;
    match reloadable.failure {
        FailurePolicy::FailOpen => None,
        FailurePolicy::FailClosed => Some(respond(Problem::unavailable())),
    }
}

/// What a refused request's limits are judged with.
struct Refusing<'a> {
    key: &'a str,
    tier: &'a str,
    route: Option<&'a Route>,
    route_name: &'a std::sync::Arc<str>,
    route_limit: Option<&'a RouteLimit<'a>>,
    shadow: &'a ShadowLimits,
    reloadable: &'a Reloadable,
}

/// The limits that refused a request (the others report rejected with no
/// wait): the enforced ones answer, those in shadow mode are only counted.
struct Refusal<'a> {
    /// An enforced limit refused.
    enforced: bool,
    /// A limit in shadow mode refused.
    in_shadow: bool,
    /// The longest wait of the enforced limits, in whole seconds.
    retry_after: u64,
    /// The name the problem body gives the limit with that wait.
    refused_by: std::borrow::Cow<'a, str>,
    /// The status that limit answers with.
    status: u16,
}

impl<'a> Refusal<'a> {
    /// Counts each refusing limit of `decisions` (a denial, or a shadow
    /// denial) and keeps the enforced one with the longest wait.
    fn tally(decisions: &Decisions, request: &Refusing<'a>) -> Refusal<'a> {
        let reloadable = request.reloadable;
        let mut refusal = Refusal {
            enforced: false,
            in_shadow: false,
            retry_after: 0,
            refused_by: std::borrow::Cow::Borrowed(request.tier),
            status: reloadable.refusal.for_tier(request.tier),
        };
        for (index, limit) in decisions.iter().enumerate() {
            // The longest wait of the limit's policies (a plan may list several).
            let limit_retry_after = limit.retry_after_seconds();
            if limit_retry_after == 0 {
                continue;
            }
            let kind = match (index, request.route_limit) {
                (0, _) | (_, None) => PLAN_KEY_KIND,
                (_, Some(route_limit)) => route_limit.kind.label(),
            };
            if request.shadow.is_shadow(index) {
                refusal.in_shadow = true;
                record_shadow_denial(request.route_name, kind);
                tracing::debug!(
                    key = %Redacted(request.key),
                    route = %request.route_name,
                    key_kind = kind,
                    "over a limit in shadow mode"
                );
                continue;
            }
            refusal.enforced = true;
            record_denial(request.route_name, kind);
            if limit_retry_after > refusal.retry_after {
                refusal.retry_after = limit_retry_after;
                (refusal.refused_by, refusal.status) = if index == 0 {
                    (
                        plan_refused_by(request.tier, limit),
                        reloadable.refusal.for_tier(request.tier),
                    )
                } else {
                    let own = request
                        .route
                        .filter(|route| route.budget.is_some())
                        .and_then(|route| route.refused_status);
                    (
                        std::borrow::Cow::Borrowed(&**request.route_name),
                        own.unwrap_or_else(|| reloadable.refusal.default_status()),
                    )
                };
            }
        }
        refusal
    }

    /// The refusal's answer: its status, a problem+json body naming the
    /// limit, `Retry-After`, and `headers`; marked [`Refused`].
    fn response(self, headers: RateLimitHeaders) -> Response {
        let status = StatusCode::from_u16(self.status).unwrap_or(StatusCode::TOO_MANY_REQUESTS);
        let mut response = respond(Problem::refused(status, &self.refused_by, self.retry_after));
        headers.insert_into(response.headers_mut());
        response.extensions_mut().insert(Refused);
        response
    }
}

/// Marks a response as a refusal by a limit (whatever its status), for the
/// decision endpoint, which answers refusals with a status of its own.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Refused;

/// What the limits of a request decided: its plan's, and its route
/// budget's when it has one.
struct Decisions {
    plan: LimitDecision,
    route: Option<LimitDecision>,
}

impl Decisions {
    /// The decisions in the order of the limits: the plan's first.
    fn iter(&self) -> impl Iterator<Item = &LimitDecision> {
        std::iter::once(&self.plan).chain(self.route.as_ref())
    }
}

/// `limits` (the plan, then the route budget if any) decided together by
/// `store`. A store answers one decision per limit; a short answer is a
/// store failure, not a panic.
async fn acquire(store: &dyn Store, limits: &[Limit<'_>]) -> Result<Decisions, StoreError> {
    let decisions = store.acquire(limits).await?;
    if decisions.len() != limits.len() {
        return Err(StoreError::Unavailable(format!(
            "the store answered {} decisions for {} limits",
            decisions.len(),
            limits.len()
        )));
    }
    let mut decisions = decisions.into_iter();
    match (decisions.next(), decisions.next()) {
        (Some(plan), route) => Ok(Decisions { plan, route }),
        (None, _) => Err(StoreError::Unavailable(
            "the store answered no decision".to_owned(),
        )),
    }
}

/// The plan's RateLimit field (listed first); none for a key whose plan has
/// no policy.
fn plan_field<'a>(tier: &'a str, plan: &'a LimitDecision) -> Option<RateLimitField<'a>> {
    let (quota, window_s) = advertised_quota(&plan.policy?);
    Some(RateLimitField {
        name: tier,
        quota,
        window_s,
        decision: &plan.decision,
    })
}

/// The headers of a request whose plan lists several policies: every policy
/// (by its name), then the route budget's, in `RateLimit-Policy`; the plan's
/// binding policy ([`Decision::binding`]), then the route budget's, in
/// `RateLimit`.
fn plan_list_headers(
    plan: &LimitDecision,
    route_field: Option<RateLimitField<'_>>,
) -> RateLimitHeaders {
    let Some(first_policy) = plan.policy else {
        return RateLimitHeaders::default();
    };
    let first_name = plan.name.as_deref().unwrap_or(tollgate_core::DEFAULT_TIER);
    let field = |name, policy: &Policy, decision| {
        let (quota, window_s) = advertised_quota(policy);
        RateLimitField {
            name,
            quota,
            window_s,
            decision,
        }
    };
    let mut listed: Vec<RateLimitField<'_>> =
        std::iter::once(field(first_name, &first_policy, &plan.decision))
            .chain(
                plan.further
                    .iter()
                    .map(|further| field(&further.name, &further.policy, &further.decision)),
            )
            .collect();
    let binding = Decision::binding(listed.iter().map(|field| field.decision)).unwrap_or(0);
    let mut stated: Vec<RateLimitField<'_>> = listed.get(binding).cloned().into_iter().collect();
    if let Some(route) = route_field {
        stated.push(route.clone());
        listed.push(route);
    }
    rate_limit_headers_listed(&listed, &stated)
}

/// What refused a request by its plan, named in the problem's detail: the
/// tier, and for a plan written as a list the policy with the longest wait
/// (the one `Retry-After` gives), as `team (day)`.
fn plan_refused_by<'a>(tier: &'a str, plan: &LimitDecision) -> std::borrow::Cow<'a, str> {
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

/// The route budget's RateLimit field (listed after the plan's).
fn route_field<'a>(
    route_name: &'a str,
    limit: &RouteLimit<'_>,
    decision: &'a LimitDecision,
) -> RateLimitField<'a> {
    let (quota, window_s) = advertised_quota(&limit.budget.budget.policy());
    RateLimitField {
        name: route_name,
        quota,
        window_s,
        decision: &decision.decision,
    }
}

/// The route budget of a request, as core's [`RouteBudgets::choose`] picks
/// it: the route's own, else the host default per tenant (for keys with a
/// tenant), else per IP; `None` when none applies. `Err` holds why the
/// request is refused (401) when the route's key is missing: a tenant for a
/// key without one, a header the request lacks.
fn route_limit<'a>(
    reloadable: &'a Reloadable,
    route: Option<&'a Route>,
    route_name: &str,
    key: &str,
    headers: &HeaderMap,
    peer: SocketAddr,
) -> Result<Option<RouteLimit<'a>>, String> {
    let tenant = reloadable.tenants.get(key);
    let budgets = RouteBudgets {
        own: route
            .and_then(|route| route.budget.as_ref())
            .map(|(budget, key)| (budget, key)),
        host_tenant: reloadable.host_tenant.as_ref(),
        host_ip: reloadable.host_ip.as_ref(),
    };
    let (budget, key_of) = match budgets.choose(|| tenant.is_some()) {
        None => return Ok(None),
        Some(RouteBudgetChoice::Own { budget, selector }) => (budget, selector),
        Some(RouteBudgetChoice::Host { budget, kind }) => match kind {
            RouteKeyKind::Tenant => (budget, &RouteKey::Tenant),
            _ => (budget, &RouteKey::Ip),
        },
    };
    let value = match key_of {
        RouteKey::Principal => key.to_owned(),
        RouteKey::Tenant => tenant
            .ok_or_else(|| {
                format!("{route_name} is rate limited per tenant, and this API key has no tenant")
            })?
            .to_string(),
        RouteKey::Ip => reloadable.client_ip.client_key_of(peer.ip(), headers),
        RouteKey::Header(name) => header_key(headers, name)
            .ok_or_else(|| {
                format!(
                    "{route_name} is rate limited per {name} header, and this request has no \
                     usable one (exactly one, of 1 to {MAX_KEY_LENGTH} visible ASCII characters)"
                )
            })?
            .to_owned(),
    };
    let kind = key_of.kind();
    Ok(Some(RouteLimit {
        budget,
        kind,
        key: route_store_key(route_name, kind, &value),
    }))
}

/// The value of header `name` as a route key: the header sent once (a second
/// one, as from a client beside a proxy that appends, is refused rather than
/// either trusted), trimmed, 1 to [`MAX_KEY_LENGTH`] bytes of visible ASCII
/// (no spaces).
fn header_key<'a>(headers: &'a HeaderMap, name: &http::HeaderName) -> Option<&'a str> {
    let mut values = headers.get_all(name).iter();
    let value = values.next()?;
    if values.next().is_some() {
        return None;
    }
    let value = value.to_str().ok()?.trim();
    let usable = (1..=MAX_KEY_LENGTH).contains(&value.len())
        && value.bytes().all(|byte| byte.is_ascii_graphic());
    usable.then_some(value)
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
