//! The limits of one proxied request: who it is (its API key, or keyless:
//! core's [`KeyRules::identify`]), then its key's plan and its route's budget
//! (or the host default), decided together, all or nothing, each charged the
//! route's `cost`.

mod fields;
mod refusal;
mod route_limit;

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use axum::response::Response;
use http::{HeaderMap, StatusCode};
use tollgate_core::{
    ApiKeyRequirement, Caller, CallerRefusal, KEYLESS, KeyRules, Limit, LimitDecision, LimitUnits,
    MaxWait, Redacted, SlotStore, Stopwatch, Store,
};
use tollgate_tower::Problem;

use crate::observe::access_log::{Admission, Outcome};
use crate::observe::metrics;
use crate::observe::top_keys::{Decided, TopKeys};
use crate::request::api_key::{KeyError, api_key};
use crate::request::charge::Settlement;
use crate::request::delay::{Reserved, WaitingRoom, reserve};
use crate::request::in_flight::{SlotGuard, TierSlot, acquire_slot};
use crate::request::in_flight_limit::InFlightLimit;
use crate::request::problem::{problem, respond};
use crate::request::rate_limit_headers::{PLAN, ROUTE, RateLimitHeaders, limit_headers};
use crate::request::routes::Route;
use crate::request::shadow::ShadowLimits;
use crate::serve::reloadable::Reloadable;
use fields::bound;
use refusal::{Refusal, Refusing};
use route_limit::{RouteLimit, route_limit};
use tollgate_core::{FailurePolicy, StoreError};

/// The `key_kind` label of a refusal by the API key's plan (route budgets
/// use [`RouteKeyKind::label`](tollgate_core::RouteKeyKind::label), and
/// every limit of a keyless request [`KEYLESS`]).
const PLAN_KEY_KIND: &str = "api_key";

/// What an admitted request carries on: the headers to add to its
/// response, and the concurrency slot it holds until that response ends.
pub(crate) struct Admitted {
    pub(crate) headers: RateLimitHeaders,
    pub(crate) slot: Option<SlotGuard>,
    /// On a route charged by usage, what its response's end settles.
    pub(crate) settlement: Option<Settlement>,
}

impl From<RateLimitHeaders> for Admitted {
    fn from(headers: RateLimitHeaders) -> Self {
        Admitted {
            headers,
            slot: None,
            settlement: None,
        }
    }
}

/// Where a request's limits are kept: its rates, its concurrency slots
/// (none for the decision endpoint, which cannot know when the request it
/// decides ends), and the requests waiting for their turn.
pub(crate) struct Stores<'a> {
    pub(crate) store: &'a Arc<dyn Store>,
    pub(crate) slots: Option<&'a Arc<dyn SlotStore>>,
    pub(crate) waiting: &'a Arc<WaitingRoom>,
    /// Counts the keys most active and most refused, unless turned off.
    pub(crate) top_keys: Option<&'a TopKeys>,
}

/// Checks a request against its limits: its concurrency limit when
/// `slots` is given (the decision endpoint passes none: it cannot know when
/// the request it decides ends), before its rates when it is the route's
/// or the host's, after them when it is its tier's; and its rates. `Ok`
/// holds what the forwarded response carries; `Err` the response to send
/// instead (400, 401, 429, 503). `outcome` is given the decision and the
/// plan's tier, for the access log.
pub(crate) async fn admit(
    stores: Stores<'_>,
    reloadable: &Reloadable,
    route: Option<&Route>,
    headers: &HeaderMap,
    peer: SocketAddr,
    outcome: &mut Outcome,
) -> Result<Admitted, Response> {
    let store = stores.store.as_ref();
    let request_headers = headers;
    let requirement = route.map_or(ApiKeyRequirement::Required, |route| route.api_key);
    let mut missing = "";
    let presented = if requirement.reads_keys() {
        match api_key(headers) {
            Ok(key) => Some(key),
            Err(KeyError::Ambiguous(reason)) => {
                return Err(problem(StatusCode::BAD_REQUEST, reason));
            }
            Err(KeyError::Missing(reason)) => {
                missing = reason;
                None
            }
        }
    } else {
        None
    };
    let rules = KeyRules {
        known: reloadable.known_keys.as_deref(),
        unknown: reloadable.unknown_keys,
    };
    let caller = match rules.identify(requirement, presented, |key| store.is_exempt(key)) {
        Ok(Caller::Key(key)) => Ok(key),
        Ok(Caller::Keyless(reason)) => Err(reason),
        Err(CallerRefusal::NoKey) => return Err(respond(Problem::unauthorized(missing))),
        Err(CallerRefusal::UnknownKey) => {
            return Err(respond(Problem::unauthorized(
                "this API key is not known (keys.unknown = \"refuse\")",
            )));
        }
    };
    let key = caller.ok();
    outcome.set_client(|| reloadable.client_ip.client_key_of(peer.ip(), headers));
    if let Some(key) = key {
        outcome.set_key(key);
    }
    let route_name = route.map_or(&reloadable.demo_route, |route| &route.name);
    if key.is_some_and(|key| store.is_exempt(key)) {
        reloadable.decisions.record(true, "exempt", route_name);
        outcome.admission = Admission::Exempt;
        return Ok(RateLimitHeaders::default().into());
    }
    let in_flight = reloadable.in_flight.limit_of(route, key.is_some());
    let slot = match (stores.slots, route, &in_flight) {
        (Some(slots), Some(route), InFlightLimit::Now(max, counted_per)) => {
            let limit = (route, *max, counted_per);
            acquire_slot(slots, reloadable, limit, caller, (headers, peer), outcome).await?
        }
        _ => None,
    };
    let route_limit = route_limit(reloadable, route, route_name, caller, headers, peer)
        .map_err(|reason| respond(Problem::unauthorized(reason)))?;
    if key.is_none() && route_limit.is_none() {
        // The configuration gives every keyless request a budget; refuse
        // rather than let one through unlimited should that ever fail.
        return Err(respond(Problem::unauthorized(
            "no budget applies to a request without a known API key",
        )));
    }
    let cost = route.map_or(1, |route| route.cost);
    // A route with a delay: its requests may wait for their turn, each in a
    // place of its key's taken before its turn is booked (so a burst past
    // `max_waiting` books nothing). One without a place may not wait: a
    // turn ahead refuses it, told to come back when its turn would be.
    let delay = route.and_then(|route| match route.delay {
        Some(delay) => Some((MaxWait::UpTo(delay.max_wait), delay.max_waiting)),
        // A key's tier may let it wait: the store finds how long.
        None => route
            .tier_waiting
            .filter(|_| key.is_some() && reloadable.tier_delays)
            .map(|most| (MaxWait::TierDelay, most)),
    });
    let place = delay.and_then(|(_, most)| {
        let queue_key = key.or(route_limit.as_ref().map(|limit| limit.key.as_str()));
        stores
            .waiting
            .enter(route_name, queue_key.unwrap_or(KEYLESS), most)
    });
    let max_wait = delay.map(|(max_wait, _)| {
        if place.is_some() {
            max_wait
        } else {
            MaxWait::UpTo(Duration::ZERO)
        }
    });
    // A slot taken after the rates (the tier's concurrency limit) may yet
    // refuse the request: reserved, its units can be given back exactly.
    let slot_after = in_flight == InFlightLimit::ByTier && stores.slots.is_some();
    let max_wait = max_wait.or(slot_after.then_some(MaxWait::UpTo(Duration::ZERO)));
    // A request its rates refuse drops `slot` on the way out: it holds none.
    let stopwatch = Stopwatch::start();
    let decided = match max_wait {
        Some(max_wait) => {
            let reserved = reserved(key, route_limit.as_ref(), cost);
            let limits = usize::from(key.is_some()) + usize::from(route_limit.is_some());
            match reserve(
                (stores.store, stores.waiting),
                reserved,
                (max_wait, slot_after),
                place,
            )
            .await
            {
                Ok(booked) => Decisions::answered(key.is_some(), booked.decisions, limits)
                    .map(|decisions| (decisions, booked.turn)),
                Err(error) => Err(error),
            }
        }
        // Decided at once (one limit of one unit, in memory): no future.
        None => match decide_now(store, key, route_limit.as_ref(), cost) {
            Some(decisions) => Ok((decisions, None)),
            None => decide(store, key, route_limit.as_ref(), cost)
                .await
                .map(|decisions| (decisions, None)),
        },
    };
    // A turn booked ahead (`waiting`) is given back when this request is
    // not served: refused by a limit that does not wait, or let through at
    // once by shadow mode.
    let (decisions, waiting) = match decided {
        Ok(decided) => decided,
        Err(error) => {
            return match store_failed(reloadable, route_name, &error, outcome) {
                None => {
                    // Let through without its rates (fail_open): its tier
                    // unknown, it holds a slot of the default plan's limit
                    // (else the host's), not none.
                    let tier_slot = TierSlot {
                        slots: stores.slots,
                        route,
                        limit: in_flight,
                        tier: tollgate_core::DEFAULT_TIER,
                        caller,
                        at: (request_headers, peer),
                    };
                    let slot = tier_slot.take(reloadable, outcome).await?.or(slot);
                    Ok(Admitted {
                        headers: RateLimitHeaders::default(),
                        slot,
                        settlement: None,
                    })
                }
                Some(refusal) => Err(refusal),
            };
        }
    };
    reloadable.decisions.record_time(stopwatch.elapsed());
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
    let own_budget = route_limit.as_ref().is_some_and(|limit| limit.own);
    let shadow = ShadowLimits::of(&reloadable.refusal, tier, route.filter(|_| own_budget));
    // The headers of the limits `described` says (PLAN, ROUTE), those of
    // `[responses] rate_limit_headers`.
    let header_set = reloadable.rate_limit_headers;
    let headers_of = |described: &dyn Fn(usize) -> bool| {
        let route = route_limit
            .as_ref()
            .zip(decisions.route.as_ref())
            .map(|(limit, decision)| (&**route_name, limit.budget.budget.policy(), decision));
        limit_headers(tier, plan, route, described, header_set)
    };
    // A slot of the tier's concurrency limit, for a request let through.
    let tier_slot = TierSlot {
        slots: stores.slots,
        route,
        limit: in_flight,
        tier,
        caller,
        at: (request_headers, peer),
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
            .as_ref()
            .and(decisions.route.as_ref())
            .filter(|_| counts(ROUTE));
        bound(
            tier,
            plan.filter(|_| counts(PLAN)),
            route.map(|decision| (&**route_name, decision)),
        )
    });
    let mut headers = headers_of(&|index| shadow.sends_headers(index));
    let allowed = decisions.iter().all(|(_, decision)| decision.is_allowed());
    if allowed {
        // Refused for a slot: no rate budget used (`waiting`, held for a
        // request reserved at once too, gives its units back as it drops).
        let slot = tier_slot.take(reloadable, outcome).await?.or(slot);
        reloadable.decisions.record(true, tier, route_name);
        count_top(&stores, key, route_limit.as_ref(), false, tier, route_name);
        outcome.admission = Admission::Allowed;
        if let Some((wait, waiting)) = waiting {
            // Its turn is ahead: it waits, and gives its units back if its
            // client leaves first.
            let delayed = !wait.is_zero();
            if delayed {
                outcome.admission = Admission::Delayed;
                outcome.waited = wait;
            }
            waiting.until_turn(wait).await;
            // Counted once served: a client gone while it waits is not.
            if delayed {
                metrics::record_delayed(route_name, tier);
            }
        }
        // Charged `cost` by every limit: its usage is settled at the end.
        let settlement = route
            .and_then(|route| route.charge.clone())
            .map(|charge| Settlement {
                store: Arc::clone(stores.store),
                plan: key.map(str::to_owned),
                route: route_limit
                    .as_ref()
                    .map(|limit| (limit.key.clone(), limit.budget.prepared)),
                cost,
                charge,
                route_name: Arc::clone(route_name),
                // (`handle.rs` drops it for a request whose response cannot
                // carry trailers: HEAD, HTTP/1.0.)
                trailers: tollgate_tower::accepts_trailers(request_headers)
                    .then(|| [shadow.sends_headers(PLAN), shadow.sends_headers(ROUTE)])
                    .filter(|described| described.contains(&true)),
                header_set,
            });
        return Ok(Admitted {
            headers,
            slot,
            settlement,
        });
    }
    reloadable.decisions.record(false, tier, route_name);
    count_top(&stores, key, route_limit.as_ref(), true, tier, route_name);
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
        // Let through by shadow mode, it holds a slot as any request let
        // through does (its rates charged nothing: nothing to give back).
        let slot = tier_slot.take(reloadable, outcome).await?.or(slot);
        outcome.admission = Admission::Shadow;
        return Ok(Admitted {
            headers,
            slot,
            settlement: None,
        });
    }
    outcome.admission = Admission::Refused;
    if refusal.in_shadow {
        // A refusal's headers describe the enforced limits, which refused
        // it (its `Retry-After` is theirs), never a shadow one's longer wait.
        headers = headers_of(&|index| !shadow.is_shadow(index));
    }
    tracing::debug!(key = %Redacted(key.unwrap_or(KEYLESS)), route = %route_name, retry_after = refusal.retry_after, "rate limited");
    Err(refusal.response(headers))
}

/// The decisions of [`decide`] when `store` gives them at once: a lone
/// limit (the plan of `key` or the budget of `route_limit`) of one unit on a
/// store that answers at once (the in-memory one), decided without a future
/// or a `Vec`. `None` when [`decide`] must ask the store.
fn decide_now(
    store: &dyn Store,
    key: Option<&str>,
    route_limit: Option<&RouteLimit<'_>>,
    cost: u64,
) -> Option<Decisions> {
    if cost != 1 {
        return None;
    }
    let only = match (key, route_limit) {
        (Some(key), None) => Limit::Plan(key),
        (None, Some(route_limit)) => Limit::Policy {
            key: &route_limit.key,
            policy: &route_limit.budget.prepared,
        },
        _ => return None,
    };
    let decision = store.acquire_one_now(&only)?;
    Some(Decisions::of(key.is_some(), decision))
}

/// The plan of `key` (none for a keyless request), and the route budget
/// `route_limit` if any, each charged `cost` units, decided together by
/// `store`, which answers when it can (after [`decide_now`] found it
/// could not at once). (A route with a delay reserves instead:
/// [`reserve`].)
async fn decide(
    store: &dyn Store,
    key: Option<&str>,
    route_limit: Option<&RouteLimit<'_>>,
    cost: u64,
) -> Result<Decisions, StoreError> {
    let route = route_limit.map(|route_limit| Limit::Policy {
        key: &route_limit.key,
        policy: &route_limit.budget.prepared,
    });
    let plan = key.map(Limit::Plan);
    let limits: Vec<LimitUnits<'_>> = plan
        .into_iter()
        .chain(route)
        .map(|limit| LimitUnits { limit, units: cost })
        .collect();
    let answered = store.acquire_units(&limits).await?;
    Decisions::answered(plan.is_some(), answered, limits.len())
}

/// The limits a reservation charges, owned: the plan of `key`, the budget
/// of `route_limit`, `cost` units each (its `counted_at` set once booked).
fn reserved(key: Option<&str>, route_limit: Option<&RouteLimit<'_>>, cost: u64) -> Reserved {
    Reserved {
        plan: key.map(str::to_owned),
        route: route_limit.map(|limit| (limit.key.clone(), limit.budget.prepared)),
        units: cost,
        counted_at: 0,
    }
}

/// What a request gets when the store could not decide, by its failure
/// policy: `None`, it goes through (`fail_open`), or the 503 answering it
/// (`fail_closed`); counted and noted in `outcome`.
fn store_failed(
    reloadable: &Reloadable,
    route_name: &Arc<str>,
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

/// Marks a response as a refusal by a limit (whatever its status), for the
/// decision endpoint, which answers refusals with a status of its own.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Refused;

/// What the limits of a request decided: its plan's (none for a keyless
/// request), and its route budget's when it has one.
struct Decisions {
    plan: Option<LimitDecision>,
    route: Option<LimitDecision>,
}

impl Decisions {
    /// The decision of a lone limit: the plan's when `is_plan`, else the
    /// route budget's.
    fn of(is_plan: bool, decision: LimitDecision) -> Self {
        if is_plan {
            Decisions {
                plan: Some(decision),
                route: None,
            }
        } else {
            Decisions {
                plan: None,
                route: Some(decision),
            }
        }
    }

    /// The store's answer for a request of `limits` limits: its plan (when
    /// `has_plan`), then its route budget; an error when the store
    /// answered another number of decisions.
    fn answered(
        has_plan: bool,
        answered: Vec<LimitDecision>,
        limits: usize,
    ) -> Result<Self, StoreError> {
        if answered.len() != limits || limits == 0 {
            return Err(StoreError::Unavailable(format!(
                "the store answered {} decisions for {limits} limits",
                answered.len(),
            )));
        }
        let mut answered = answered.into_iter();
        Ok(match (has_plan, answered.next(), answered.next()) {
            (true, plan, route) => Decisions { plan, route },
            (false, route, _) => Decisions { plan: None, route },
        })
    }

    /// The decisions in the order of the limits, each with its index
    /// ([`PLAN`], [`ROUTE`]).
    fn iter(&self) -> impl Iterator<Item = (usize, &LimitDecision)> {
        let plan = self.plan.as_ref().map(|plan| (PLAN, plan));
        plan.into_iter()
            .chain(self.route.as_ref().map(|route| (ROUTE, route)))
    }
}

/// Counts a decided request for `/admin/top` (unless `[admin] top_keys` is
/// off): under its API key, or a keyless one under its route budget's key.
fn count_top(
    stores: &Stores<'_>,
    key: Option<&str>,
    route_limit: Option<&RouteLimit<'_>>,
    refused: bool,
    tier: &str,
    route: &Arc<str>,
) {
    if let Some(top_keys) = stores.top_keys {
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
