//! Who a request is ([`identify`]): its API key, as core's
//! [`KeyRules::identify`] rules, or keyless, and whether its key is exempt.

use std::sync::Arc;

use http::StatusCode;
use tollgate_core::{ApiKeyRequirement, Caller, CallerRefusal, KeyRules, Keyless};
use tollgate_tower::Problem;

use super::Asked;
use crate::observe::access_log::{Admission, Outcome};
use crate::request::api_key::{KeyError, api_key};
use crate::request::in_flight_limit::InFlightLimit;
use crate::request::problem::{problem, respond};

/// A request identified and not exempt: what its limits are found by.
pub(super) struct Identified<'a> {
    /// Its API key, or why it has none.
    pub(super) caller: Result<&'a str, Keyless>,
    /// The name its decisions are counted under: its route's, or the demo
    /// route's.
    pub(super) route_name: &'a Arc<str>,
    /// Its concurrency limit.
    pub(super) in_flight: InFlightLimit,
}

impl<'a> Identified<'a> {
    /// Its API key; `None` for a keyless request.
    pub(super) fn key(&self) -> Option<&'a str> {
        self.caller.ok()
    }
}

/// What [`identify`] found.
pub(super) enum Identity<'a> {
    /// Refused before its limits: this response (`400`, `401`).
    Refused(axum::response::Response),
    /// An exempt key: admitted without limits or rate-limit headers
    /// (counted and noted already).
    Exempt,
    /// Any other request, held to its limits.
    Limited(Identified<'a>),
}

/// Who `asked`'s request is: its API key, read as its route requires
/// (refused `400` for an ambiguous one, `401` for a missing or unknown one
/// the route needs), noted in `outcome` with its client; an exempt key
/// counted and noted exempt.
pub(super) fn identify<'a>(asked: &Asked<'a>, outcome: &mut Outcome) -> Identity<'a> {
    let Asked {
        stores,
        reloadable,
        route,
        headers,
        peer,
    } = *asked;
    let store = stores.store.as_ref();
    let requirement = route.map_or(ApiKeyRequirement::Required, |route| route.api_key);
    let mut missing = "";
    let presented = if requirement.reads_keys() {
        match api_key(headers) {
            Ok(key) => Some(key),
            Err(KeyError::Ambiguous(reason)) => {
                return Identity::Refused(problem(StatusCode::BAD_REQUEST, reason));
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
        Err(CallerRefusal::NoKey) => {
            return Identity::Refused(respond(Problem::unauthorized(missing)));
        }
        Err(CallerRefusal::UnknownKey) => {
            return Identity::Refused(respond(Problem::unauthorized(
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
        return Identity::Exempt;
    }
    Identity::Limited(Identified {
        caller,
        route_name,
        in_flight: reloadable.in_flight.limit_of(route, key.is_some()),
    })
}
