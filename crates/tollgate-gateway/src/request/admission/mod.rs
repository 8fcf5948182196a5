//! The limits of one proxied request: who it is (its API key, or keyless:
//! core's [`KeyRules::identify`](tollgate_core::KeyRules::identify)), then
//! its key's plan and its route's budget (or the host default), decided
//! together, all or nothing, each charged the route's `cost`.
//!
//! [`admit`] answers at once whatever needs no waiting: a request refused
//! before its limits, an exempt key, and a lone limit of one unit decided
//! by a store that answers at once (the in-memory one), which is most
//! requests. The rest it hands on as [`Admitting`], whose
//! [`finish`](Admitting::finish) awaits them: a concurrency slot, a turn,
//! a store across the network, and two limits or more than one unit
//! (decided together through the store's future). So the common case
//! builds no future, and moves none of the states the others need.

mod decide;
mod fields;
mod identify;
mod judge;
mod refusal;
mod route_limit;
#[cfg(test)]
mod tests;

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use axum::response::Response;
use http::HeaderMap;
use tollgate_core::{KEYLESS, MaxWait, SlotStore, Stopwatch, Store};
use tollgate_tower::Problem;

use crate::config::RouteKey;
use crate::observe::access_log::{Admission, Outcome};
use crate::observe::metrics;
use crate::observe::top_keys::TopKeys;
use crate::request::charge::Settlement;
use crate::request::delay::{Place, WaitingRoom, reserve};
use crate::request::in_flight::{SlotGuard, TierSlot, acquire_slot};
use crate::request::in_flight_limit::InFlightLimit;
use crate::request::problem::respond;
use crate::request::rate_limit_headers::RateLimitHeaders;
use crate::request::routes::Route;
use crate::serve::reloadable::Reloadable;
use decide::{Decisions, decide, decide_now, reserved, store_failed};
use identify::{Identified, Identity, identify};
use judge::{Judged, judge};
use route_limit::{RouteLimit, route_limit};

/// The `key_kind` label of a refusal by the API key's plan (route budgets
/// use [`RouteKeyKind::label`](tollgate_core::RouteKeyKind::label), and
/// every limit of a keyless request [`KEYLESS`]).
const PLAN_KEY_KIND: &str = "api_key";

/// What an admitted request carries on: the headers to add to its
/// response, and the concurrency slot it holds until that response ends.
pub(crate) struct Admitted {
    pub(crate) headers: RateLimitHeaders,
    pub(crate) slot: Option<SlotGuard>,
    /// On a route charged by usage, what its response's end settles
    /// (boxed: few routes are, and the rest move less).
    pub(crate) settlement: Option<Box<Settlement>>,
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
#[derive(Clone, Copy)]
pub(crate) struct Stores<'a> {
    pub(crate) store: &'a Arc<dyn Store>,
    pub(crate) slots: Option<&'a Arc<dyn SlotStore>>,
    pub(crate) waiting: &'a Arc<WaitingRoom>,
    /// Counts the keys most active and most refused, unless turned off.
    pub(crate) top_keys: Option<&'a TopKeys>,
}

/// What a request is admitted with: its stores, the configuration in force,
/// its route (`None`: the demo backend), its headers and its client.
#[derive(Clone, Copy)]
struct Asked<'a> {
    stores: Stores<'a>,
    reloadable: &'a Reloadable,
    route: Option<&'a Route>,
    headers: &'a HeaderMap,
    peer: SocketAddr,
}

/// What [`admit`] answers.
#[must_use = "an admission handed on decides nothing until finished"]
pub(crate) enum Answer<'a> {
    /// Answered without waiting: `Ok` holds what the forwarded response
    /// carries, `Err` the response to send instead.
    Now(Result<Admitted, Response>),
    /// Still to be decided: [`Admitting::finish`] answers.
    Later(Admitting<'a>),
}

/// A request whose admission must wait, from where [`admit`] left it
/// (holding its place among the waiting requests and its concurrency slot,
/// if any, given up when dropped).
#[must_use = "an admission handed on decides nothing until finished"]
pub(crate) struct Admitting<'a> {
    asked: Asked<'a>,
    who: Identified<'a>,
    step: Step<'a>,
}

/// Where an [`Admitting`] goes on from.
enum Step<'a> {
    /// Taking its route's (or the host's) concurrency slot, before its
    /// rates.
    Slot,
    /// Deciding its rates.
    Decide(Undecided<'a>),
}

/// A request's limits, found, and what it holds while they are decided.
struct Undecided<'a> {
    /// Its route's (or the host's) concurrency slot.
    slot: Option<SlotGuard>,
    limits: Limits<'a>,
}

/// A request's rate limits, found: what is decided, and how.
struct Limits<'a> {
    /// Its route budget (the route's own, or the host default), if any.
    route_limit: Option<RouteLimit<'a>>,
    /// The units each limit is charged: its route's `cost`.
    cost: u64,
    /// Its place among its key's requests waiting for their turn, on a
    /// route with a delay.
    place: Option<Place>,
    /// How long it may wait for its turn, and whether a slot of its tier's
    /// concurrency limit is taken after its rates (so its units are
    /// reserved, to be given back exactly should that refuse it): its limits
    /// are reserved (`Store::reserve_units`). `None`: decided, with no turn
    /// and no slot after (at once when the store can, else through its
    /// future).
    max_wait: Option<(MaxWait, bool)>,
}

/// Checks a request against its limits: its concurrency limit when
/// `slots` is given (the decision endpoint passes none: it cannot know when
/// the request it decides ends), before its rates when it is the route's
/// or the host's, after them when it is its tier's; and its rates.
/// `outcome` is given the decision and the plan's tier, for the access log.
///
/// Answers [`Answer::Now`] when nothing needs waiting for, else
/// [`Answer::Later`] (see the module's documentation); either comes to
/// what the forwarded response carries (`Ok`), or the response to send
/// instead (`Err`: 400, 401, 503, or a refusal by a limit, 429 unless
/// `[refusal]` or the route sets another status).
pub(crate) fn admit<'a>(
    stores: Stores<'a>,
    reloadable: &'a Reloadable,
    route: Option<&'a Route>,
    headers: &'a HeaderMap,
    peer: SocketAddr,
    outcome: &mut Outcome,
) -> Answer<'a> {
    let asked = Asked {
        stores,
        reloadable,
        route,
        headers,
        peer,
    };
    let who = match identify(&asked, outcome) {
        Identity::Limited(who) => who,
        Identity::Exempt => return Answer::Now(Ok(RateLimitHeaders::default().into())),
        Identity::Refused(response) => return Answer::Now(Err(response)),
    };
    let step = if slot_first(&asked, &who).is_some() {
        Step::Slot
    } else {
        match decide_at_once(&asked, &who, None, outcome) {
            AtOnce::Answered(answer) => return Answer::Now(answer),
            AtOnce::Undecided(undecided) => Step::Decide(undecided),
        }
    };
    Answer::Later(Admitting { asked, who, step })
}

impl Admitting<'_> {
    /// The admission [`admit`] could not answer at once: `Ok` holds what
    /// the forwarded response carries, `Err` the response to send instead.
    pub(crate) async fn finish(self, outcome: &mut Outcome) -> Result<Admitted, Response> {
        let Admitting { asked, who, step } = self;
        let undecided = match step {
            Step::Decide(undecided) => undecided,
            Step::Slot => {
                let slot = first_slot(&asked, &who, outcome).await?;
                match decide_at_once(&asked, &who, slot, outcome) {
                    AtOnce::Answered(answer) => return answer,
                    AtOnce::Undecided(undecided) => undecided,
                }
            }
        };
        decide_later(&asked, &who, undecided, outcome).await
    }
}

/// A concurrency limit as [`acquire_slot`] takes it: the route, the most
/// requests in flight at once, and what they are counted per.
type ConcurrencyLimit<'a> = (&'a Route, u64, &'a RouteKey);

/// The concurrency limit taken before the rates (its route's or the
/// host's), when `who` has one and its slots are kept (not for the
/// decision endpoint): where its slots are, and the route, the most in
/// flight and what they are counted per.
fn slot_first<'a>(
    asked: &Asked<'a>,
    who: &'a Identified<'a>,
) -> Option<(&'a Arc<dyn SlotStore>, ConcurrencyLimit<'a>)> {
    match (asked.stores.slots, asked.route, &who.in_flight) {
        (Some(slots), Some(route), InFlightLimit::Now(max, counted_per)) => {
            Some((slots, (route, *max, counted_per)))
        }
        _ => None,
    }
}

/// The slot of the concurrency limit taken before the rates
/// ([`slot_first`]), as [`acquire_slot`] answers: `None` when there is
/// none to take (or the slots' store failed open), `Err` the refusal.
async fn first_slot(
    asked: &Asked<'_>,
    who: &Identified<'_>,
    outcome: &mut Outcome,
) -> Result<Option<SlotGuard>, Response> {
    let Some((slots, limit)) = slot_first(asked, who) else {
        return Ok(None);
    };
    let at = (asked.headers, asked.peer);
    acquire_slot(slots, asked.reloadable, limit, who.caller, at, outcome).await
}

/// What [`decide_at_once`] came to.
enum AtOnce<'a> {
    /// The request's answer: `Ok` holds what the forwarded response
    /// carries, `Err` the response to send instead.
    Answered(Result<Admitted, Response>),
    /// Its limits must wait: what [`decide_later`] goes on from.
    Undecided(Undecided<'a>),
}

/// The request's limits found ([`limits_of`]: refused `401` when its
/// route budget has no key; a route with a delay gives it a place among its
/// key's waiting requests) and, when they are neither reserved nor held to
/// a slot after them and its store answers at once ([`decide_now`]: a lone
/// limit of one unit, in memory), decided and judged. `slot` is the slot
/// taken before the rates, if any.
fn decide_at_once<'a>(
    asked: &Asked<'a>,
    who: &Identified<'a>,
    slot: Option<SlotGuard>,
    outcome: &mut Outcome,
) -> AtOnce<'a> {
    let limits = match limits_of(asked, who) {
        Ok(limits) => limits,
        Err(reason) => return AtOnce::Answered(Err(respond(Problem::unauthorized(reason)))),
    };
    if limits.max_wait.is_some() {
        return AtOnce::Undecided(Undecided { slot, limits });
    }
    let stopwatch = Stopwatch::start();
    let store = asked.stores.store.as_ref();
    let Some(decisions) = decide_now(store, who.key(), limits.route_limit.as_ref(), limits.cost)
    else {
        return AtOnce::Undecided(Undecided { slot, limits });
    };
    asked.reloadable.decisions.record_time(stopwatch.elapsed());
    // Not reserved: no turn to wait for, and no tier slot to take (a slot
    // after the rates reserves them, `limits_of` says), so nothing waits.
    debug_assert!(!slot_after(asked, who));
    AtOnce::Answered(match judge(asked, who, &limits, &decisions, outcome) {
        Judged::Allowed(allowed) => Ok(allowed.admit(asked, who, &limits, slot, outcome)),
        Judged::Shadow { headers, .. } => Ok(let_through_in_shadow(headers, slot, outcome)),
        Judged::Refused(response) => Err(response),
    })
}

/// Whether `who` may take a slot of its tier's concurrency limit after its
/// rates (its limit is its tier's, and slots are kept; the tier, or
/// `[host]`, may yet set none): its rates are then reserved.
fn slot_after(asked: &Asked<'_>, who: &Identified<'_>) -> bool {
    who.in_flight == InFlightLimit::ByTier && asked.stores.slots.is_some()
}

/// A request only limits in shadow mode refused, let through holding
/// `slot`, noted as such in `outcome`.
fn let_through_in_shadow(
    headers: RateLimitHeaders,
    slot: Option<SlotGuard>,
    outcome: &mut Outcome,
) -> Admitted {
    outcome.admission = Admission::Shadow;
    Admitted {
        headers,
        slot,
        settlement: None,
    }
}

/// The limits of the request `asked` about, identified as `who`: its route
/// budget, its cost, and whether it may wait for its turn (taking a place
/// among its key's waiting requests). `Err`: why the request is refused
/// `401 Unauthorized` (no key for its route budget).
fn limits_of<'a>(asked: &Asked<'a>, who: &Identified<'a>) -> Result<Limits<'a>, String> {
    let Asked {
        stores,
        reloadable,
        route,
        headers,
        peer,
    } = *asked;
    let key = who.key();
    let route_name = who.route_name;
    let route_limit = route_limit(reloadable, route, route_name, who.caller, headers, peer)?;
    if key.is_none() && route_limit.is_none() {
        // The configuration gives every keyless request a budget; refuse
        // rather than let one through unlimited should that ever fail.
        return Err("no budget applies to a request without a known API key".to_owned());
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
    // (So a request not reserved takes no slot after: `decide_at_once`
    // counts on it.)
    let slot_after = slot_after(asked, who);
    let max_wait = max_wait.or(slot_after.then_some(MaxWait::UpTo(Duration::ZERO)));
    Ok(Limits {
        route_limit,
        cost,
        place,
        max_wait: max_wait.map(|max_wait| (max_wait, slot_after)),
    })
}

/// Decides `undecided`'s limits through the store's future (or books their
/// turn), then judges them, taking the slot of the request's tier's
/// concurrency limit and waiting for its turn as they say. When the store
/// cannot decide, the failure policy answers: let through without its
/// rates (`fail_open`, holding the slot taken first, or else the default
/// plan's tier slot), or `503`.
async fn decide_later<'a>(
    asked: &Asked<'a>,
    who: &Identified<'a>,
    undecided: Undecided<'a>,
    outcome: &mut Outcome,
) -> Result<Admitted, Response> {
    let Asked {
        stores,
        reloadable,
        route,
        headers,
        peer,
    } = *asked;
    let Undecided { slot, mut limits } = undecided;
    let key = who.key();
    let route_limit = limits.route_limit.as_ref();
    let cost = limits.cost;
    // A request its rates refuse drops `slot` on the way out: it holds none.
    let stopwatch = Stopwatch::start();
    let decided = match limits.max_wait {
        Some(max_wait) => {
            let reserved = reserved(key, route_limit, cost);
            let count = usize::from(key.is_some()) + usize::from(route_limit.is_some());
            let place = limits.place.take();
            match reserve((stores.store, stores.waiting), reserved, max_wait, place).await {
                Ok(booked) => Decisions::answered(key.is_some(), booked.decisions, count)
                    .map(|decisions| (decisions, booked.turn)),
                Err(error) => Err(error),
            }
        }
        None => decide(stores.store.as_ref(), key, route_limit, cost)
            .await
            .map(|decisions| (decisions, None)),
    };
    let tier_slot = |tier| TierSlot {
        slots: stores.slots,
        route,
        limit: &who.in_flight,
        tier,
        caller: who.caller,
        at: (headers, peer),
    };
    // A turn booked ahead (`waiting`) is given back when this request is
    // not served: refused by a limit that does not wait, or let through at
    // once by shadow mode.
    let (decisions, waiting) = match decided {
        Ok(decided) => decided,
        Err(error) => {
            return match store_failed(reloadable, who.route_name, &error, outcome) {
                None => {
                    // Let through without its rates (fail_open): its tier
                    // unknown, it holds a slot of the default plan's limit
                    // (else the host's), not none.
                    let tier_slot = tier_slot(tollgate_core::DEFAULT_TIER);
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
    match judge(asked, who, &limits, &decisions, outcome) {
        Judged::Allowed(allowed) => {
            // Refused for a slot: no rate budget used (`waiting`, held for a
            // request reserved at once too, gives its units back as it drops).
            let tier = allowed.tier;
            let slot = tier_slot(tier).take(reloadable, outcome).await?.or(slot);
            let admitted = allowed.admit(asked, who, &limits, slot, outcome);
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
                    metrics::record_delayed(who.route_name, tier);
                }
            }
            Ok(admitted)
        }
        Judged::Shadow { headers, tier } => {
            // Let through by shadow mode, it holds a slot as any request let
            // through does.
            let slot = tier_slot(tier).take(reloadable, outcome).await?.or(slot);
            Ok(let_through_in_shadow(headers, slot, outcome))
        }
        Judged::Refused(response) => Err(response),
    }
}

/// Marks a response as a refusal by a limit (whatever its status), for the
/// decision endpoint, which answers refusals with a status of its own.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Refused;
