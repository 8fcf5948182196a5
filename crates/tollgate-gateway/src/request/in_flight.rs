//! A request's concurrency limit (`max_in_flight`): which one holds it
//! (`in_flight_limit.rs`: its route's own, else its key's tier's, else
//! `[host]`'s), the slot it takes ([`acquire_slot`]: before its rates are
//! decided when the limit is known then, after them for a tier's, through
//! [`TierSlot`]), held by a [`SlotGuard`] until its response ends
//! ([`hold_until_done`]: the body sent or dropped, the client gone, an
//! upstream error; a WebSocket's tunnel closed), and given back then. A
//! request refused by a rate limit holds no slot; one refused for a slot
//! has used no rate budget (a slot taken after the rates: its units were
//! reserved, and are given back exactly).

use std::net::SocketAddr;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};

use axum::body::Body;
use axum::response::Response;
use bytes::Bytes;
use http::{HeaderMap, StatusCode};
use http_body::{Frame, SizeHint};
use tollgate_core::{
    FailurePolicy, Keyless, RouteKeyKind, SlotLease, SlotStore, in_flight_kind, route_store_key,
};
use tollgate_tower::Problem;

use crate::config::RouteKey;
use crate::observe::access_log::{Admission, Outcome};
use crate::observe::metrics;
use crate::proxy::upgrade::TunnelLog;
use crate::request::header_key::header_key;
use crate::request::in_flight_limit::InFlightLimit;
use crate::request::problem::respond;
use crate::request::routes::Route;
use crate::serve::reloadable::Reloadable;

/// A slot held; given back when dropped.
pub(crate) struct SlotGuard {
    slots: Arc<dyn SlotStore>,
    lease: Option<SlotLease>,
}

impl Drop for SlotGuard {
    fn drop(&mut self) {
        if let Some(lease) = self.lease.take() {
            self.slots.release(lease);
        }
    }
}

/// The slot of a request on `route` with API key `caller` (`Err`: keyless,
/// and why), held to at most `max` in flight at once counted per
/// `counted_per`: `Ok(None)` when the store failed open; `Err` the answer
/// instead (429 over the limit, 401 without the key it counts per, 503
/// failing closed).
pub(crate) async fn acquire_slot(
    slots: &Arc<dyn SlotStore>,
    reloadable: &Reloadable,
    (route, max, counted_per): (&Route, u64, &RouteKey),
    caller: Result<&str, Keyless>,
    (headers, peer): (&HeaderMap, SocketAddr),
    outcome: &mut Outcome,
) -> Result<Option<SlotGuard>, Response> {
    let kind = in_flight_kind(counted_per.kind(), caller.err());
    let value = match kind {
        RouteKeyKind::Principal => caller.ok().map(str::to_owned),
        RouteKeyKind::Tenant => caller
            .ok()
            .and_then(|key| reloadable.tenants.get(key))
            .map(ToString::to_string),
        RouteKeyKind::Ip => Some(reloadable.client_ip.client_key_of(peer.ip(), headers)),
        RouteKeyKind::Custom => match counted_per {
            RouteKey::Header(name) => header_key(headers, name).map(str::to_owned),
            _ => None,
        },
    };
    let Some(value) = value else {
        return Err(respond(Problem::unauthorized(format!(
            "{} limits the requests in flight per {}, and this request has none",
            route.name,
            kind.noun()
        ))));
    };
    let key = route_store_key(&route.name, kind, &value);
    match slots.acquire(&key, max).await {
        Ok(Some(lease)) => Ok(Some(SlotGuard {
            slots: Arc::clone(slots),
            lease: Some(lease),
        })),
        Ok(None) => {
            metrics::record_in_flight_refusal(&route.name);
            outcome.admission = Admission::InFlightRefused;
            let status = route
                .refused_status
                .and_then(|status| StatusCode::from_u16(status).ok())
                .or_else(|| StatusCode::from_u16(reloadable.refusal.default_status()).ok())
                .unwrap_or(StatusCode::TOO_MANY_REQUESTS);
            Err(respond(Problem::in_flight_refused(
                status,
                &route.name,
                max,
            )))
        }
        Err(error) => {
            metrics::record_store_failure(&route.name, reloadable.failure, &error);
            outcome.admission = Admission::Unavailable;
            match reloadable.failure {
                FailurePolicy::FailOpen => Ok(None),
                FailurePolicy::FailClosed => Err(respond(Problem::unavailable())),
            }
        }
    }
}

/// The slot of a request whose concurrency limit is its tier's
/// ([`InFlightLimit::ByTier`]), taken once its plan is decided and it is
/// let through.
pub(crate) struct TierSlot<'a> {
    pub(crate) slots: Option<&'a Arc<dyn SlotStore>>,
    pub(crate) route: Option<&'a Route>,
    pub(crate) limit: &'a InFlightLimit,
    /// The tier its plan was decided on.
    pub(crate) tier: &'a str,
    pub(crate) caller: Result<&'a str, Keyless>,
    pub(crate) at: (&'a HeaderMap, SocketAddr),
}

impl TierSlot<'_> {
    /// The slot, when the request's limit is its tier's and that tier (or
    /// `[host]`) has one: as [`acquire_slot`] answers.
    pub(crate) async fn take(
        &self,
        reloadable: &Reloadable,
        outcome: &mut Outcome,
    ) -> Result<Option<SlotGuard>, Response> {
        let (Some(slots), Some(route), InFlightLimit::ByTier) =
            (self.slots, self.route, self.limit)
        else {
            return Ok(None);
        };
        let Some(max) = reloadable.in_flight.of_tier(self.tier) else {
            return Ok(None);
        };
        let limit = (route, max, &RouteKey::Principal);
        acquire_slot(slots, reloadable, limit, self.caller, self.at, outcome).await
    }
}

/// `response` holding `guard` until it is done: a WebSocket's 101 until its
/// tunnel ends, any other response until its body has been sent or dropped.
pub(crate) fn hold_until_done(mut response: Response, guard: Option<SlotGuard>) -> Response {
    let Some(guard) = guard else {
        return response;
    };
    if let Some(tunnel) = response.extensions_mut().get_mut::<TunnelLog>() {
        tunnel.hold(Box::new(guard));
        return response;
    }
    response.map(|body| {
        Body::new(HeldBody {
            body,
            _guard: guard,
        })
    })
}

pin_project_lite::pin_project! {
    /// A response body holding a slot until it is dropped (hyper drops it
    /// once sent, or when the client goes).
    struct HeldBody {
        #[pin]
        body: Body,
        _guard: SlotGuard,
    }
}

impl http_body::Body for HeldBody {
    type Data = Bytes;
    type Error = axum::Error;

    fn poll_frame(
        self: Pin<&mut Self>,
        context: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, axum::Error>>> {
        self.project().body.poll_frame(context)
    }

    fn is_end_stream(&self) -> bool {
        self.body.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        self.body.size_hint()
    }
}
