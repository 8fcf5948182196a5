//! A refused request's limits judged ([`Refusal::tally`]): the enforced
//! ones answer (the longest wait names the status and the limit), those in
//! shadow mode are only counted.

use axum::response::Response;
use http::StatusCode;
use tollgate_core::{KEYLESS, Redacted};
use tollgate_tower::{Problem, record_denial, record_shadow_denial};

use super::fields::plan_refused_by;
use super::route_limit::RouteLimit;
use super::{Decisions, PLAN_KEY_KIND, Refused};
use crate::request::problem::respond;
use crate::request::rate_limit_headers::PLAN;
use crate::request::rate_limit_headers::RateLimitHeaders;
use crate::request::routes::Route;
use crate::request::shadow::ShadowLimits;
use crate::serve::reloadable::Reloadable;

/// What a refused request's limits are judged with.
pub(super) struct Refusing<'a> {
    /// The API key; `None` for a keyless request.
    pub(super) key: Option<&'a str>,
    pub(super) tier: &'a str,
    pub(super) route: Option<&'a Route>,
    pub(super) route_name: &'a std::sync::Arc<str>,
    pub(super) route_limit: Option<&'a RouteLimit<'a>>,
    pub(super) shadow: &'a ShadowLimits,
    pub(super) reloadable: &'a Reloadable,
}

/// The limits that refused a request (the others report rejected with no
/// wait): the enforced ones answer, those in shadow mode are only counted.
pub(super) struct Refusal<'a> {
    /// An enforced limit refused.
    pub(super) enforced: bool,
    /// A limit in shadow mode refused.
    pub(super) in_shadow: bool,
    /// The longest wait of the enforced limits, in whole seconds.
    pub(super) retry_after: u64,
    /// The name the problem body gives the limit with that wait.
    refused_by: std::borrow::Cow<'a, str>,
    /// The status that limit answers with.
    status: u16,
}

impl<'a> Refusal<'a> {
    /// Counts each refusing limit of `decisions` (a denial, or a shadow
    /// denial) and keeps the enforced one with the longest wait.
    pub(super) fn tally(decisions: &Decisions, request: &Refusing<'a>) -> Refusal<'a> {
        let reloadable = request.reloadable;
        let mut refusal = Refusal {
            enforced: false,
            in_shadow: false,
            retry_after: 0,
            refused_by: std::borrow::Cow::Borrowed(request.tier),
            status: reloadable.refusal.for_tier(request.tier),
        };
        for (index, limit) in decisions.iter() {
            // The longest wait of the limit's policies (a plan may list several).
            let limit_retry_after = limit.retry_after_seconds();
            if limit_retry_after == 0 {
                continue;
            }
            let kind = match (index, request.route_limit, request.key) {
                // Keyless requests are counted apart, whatever keyed them.
                (_, _, None) => KEYLESS,
                (PLAN, _, _) | (_, None, _) => PLAN_KEY_KIND,
                (_, Some(route_limit), _) => route_limit.kind.label(),
            };
            if request.shadow.is_shadow(index) {
                refusal.in_shadow = true;
                record_shadow_denial(request.route_name, kind);
                tracing::debug!(
                    key = %Redacted(request.key.unwrap_or(KEYLESS)),
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
                (refusal.refused_by, refusal.status) = if index == PLAN {
                    (
                        plan_refused_by(request.tier, limit),
                        reloadable.refusal.for_tier(request.tier),
                    )
                } else {
                    let own = request
                        .route
                        .filter(|_| request.route_limit.is_some_and(|limit| limit.own))
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
    pub(super) fn response(self, headers: RateLimitHeaders) -> Response {
        let status = StatusCode::from_u16(self.status).unwrap_or(StatusCode::TOO_MANY_REQUESTS);
        let mut response = respond(Problem::refused(status, &self.refused_by, self.retry_after));
        headers.insert_into(response.headers_mut());
        response.extensions_mut().insert(Refused);
        response
    }
}
