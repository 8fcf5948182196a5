//! Charging by usage (a route's `charge`): a request admitted with the
//! route's `cost` carries a [`Settlement`], which, when its response ends
//! (the body sent, or dropped when the client leaves: tower's
//! [`UsageBody`]), charges each of its limits the units the upstream
//! reported in place of `cost`, by core's rule ([`settle_usage`]): the
//! difference given back or charged past the limit into a debt of at most
//! `max`. Missing, bad and clamped reports are counted.

use std::sync::Arc;

use axum::body::Body;
use axum::response::Response;
use http::{HeaderMap, HeaderValue};
use tollgate_core::{
    Limit, LimitDecision, PreparedPolicy, Redacted, Settlement as Settle, Store, UsageReport,
    apply_settlement, settle_usage,
};
use tollgate_tower::{SettledTrailers, UsageBody, read_usage, settle_in_background};

use crate::config::{ChargeConfig, RateLimitHeaderSet};
use crate::observe::metrics;
use crate::request::rate_limit_headers::limit_headers;

/// What an admitted request on a route charged by usage settles when its
/// response ends: its limits (owned), the `cost` they were charged, and
/// the route's charge.
pub(crate) struct Settlement {
    pub(crate) store: Arc<dyn Store>,
    /// The API key whose plan was charged; `None` for a keyless request.
    pub(crate) plan: Option<String>,
    /// The route budget's store key and policy, when one was charged.
    pub(crate) route: Option<(String, PreparedPolicy)>,
    pub(crate) cost: u64,
    pub(crate) charge: ChargeConfig,
    pub(crate) route_name: Arc<str>,
    /// Whether the response sends the rate-limit fields again as trailers
    /// once settled (its client accepts them: `TE: trailers`), and which of
    /// its limits they describe (by `PLAN` and `ROUTE`, as its headers).
    pub(crate) trailers: Option<[bool; 2]>,
    /// Which rate-limit fields the trailers carry (`[responses]
    /// rate_limit_headers`), as the headers.
    pub(crate) header_set: RateLimitHeaderSet,
}

impl Settlement {
    /// The settlement of `report`, its store call run when the body polls
    /// it (when `sending_trailers`) or in a task of its own: nothing when
    /// the usage is the cost and no trailers are sent. Its output: the
    /// rate-limit fields after it, as trailers.
    fn settle(mut self, report: Option<UsageReport>, sending_trailers: bool) -> SettledTrailers {
        if !sending_trailers {
            self.trailers = None;
        }
        let settled = settle_usage(self.cost, self.charge.max, report);
        if settled.missing {
            metrics::record_charge_missing(&self.route_name);
        }
        if settled.clamped {
            metrics::record_charge_clamped(&self.route_name);
        }
        let settlement = match self.trailers {
            Some(_) => settled.settlement.or_look(self.charge.max),
            None => settled.settlement,
        };
        if settlement == Settle::Keep {
            return Box::pin(std::future::ready(None));
        }
        Box::pin(async move {
            let route = self.route.as_ref().map(|(key, policy)| Limit::Policy {
                key: key.as_str(),
                policy,
            });
            let limits: Vec<Limit<'_>> = self
                .plan
                .as_deref()
                .map(Limit::Plan)
                .into_iter()
                .chain(route)
                .collect();
            match apply_settlement(self.store.as_ref(), &limits, settlement).await {
                Ok(decisions) => self
                    .trailers
                    .map(|described| self.fields(&decisions, described)),
                Err(error) => {
                    tracing::warn!(
                        key = %Redacted(self.plan.as_deref().unwrap_or("")),
                        route = %self.route_name,
                        %error,
                        "a request's usage could not be settled: it keeps the cost its admission \
                         took"
                    );
                    None
                }
            }
        })
    }

    /// The rate-limit fields of `decisions` (the plan's, then the route
    /// budget's, as the limits were given to the store), those `described`.
    fn fields(&self, decisions: &[LimitDecision], described: [bool; 2]) -> HeaderMap {
        let mut decisions = decisions.iter();
        let plan = self.plan.as_ref().and_then(|_| decisions.next());
        let route = self
            .route
            .as_ref()
            .zip(decisions.next())
            .map(|((_, policy), decision)| (&*self.route_name, policy.policy(), decision));
        let tier = plan
            .and_then(|plan| plan.tier.as_deref())
            .unwrap_or(tollgate_core::DEFAULT_TIER);
        let mut fields = HeaderMap::new();
        limit_headers(
            tier,
            plan,
            route,
            &|index| described[index],
            self.header_set,
        )
        .insert_into(&mut fields);
        fields
    }
}

/// `response` settling `settlement` when it ends: its usage read from its
/// headers now, or from its trailers as they pass. A response whose client
/// accepts trailers sends the rate-limit fields after the settlement as
/// trailers, announced in `Trailer`, its length then not given in advance
/// (chunked in HTTP/1.1).
pub(crate) fn settle_when_done(mut response: Response, settlement: Option<Settlement>) -> Response {
    let Some(mut settlement) = settlement else {
        return response;
    };
    let header = settlement.charge.header.clone();
    let report = read_usage(response.headers(), &header);
    if response.status() == http::StatusCode::SWITCHING_PROTOCOLS {
        // A tunnel has no trailers to wait for.
        settle_in_background(settlement.settle(report, false));
        return response;
    }
    if !tollgate_tower::status_has_body(response.status()) {
        settlement.trailers = None;
    }
    let announced = trailer_fields(settlement.header_set);
    if announced.is_none() {
        settlement.trailers = None;
    }
    let trailers = settlement.trailers.is_some();
    if let Some(fields) = announced.filter(|_| trailers) {
        let headers = response.headers_mut();
        headers.remove(http::header::CONTENT_LENGTH);
        headers.append(http::header::TRAILER, HeaderValue::from_static(fields));
    }
    let settle: tollgate_tower::Settle =
        Box::new(move |report, sending_trailers| settlement.settle(report, sending_trailers));
    response.map(|body| {
        let body = UsageBody::settling(body, header, report, settle);
        Body::new(if trailers { body.with_trailers() } else { body })
    })
}

/// The `Trailer` field of a response sending the rate-limit fields of `set`
/// after its settlement (RFC 9110 §6.6.2): their names; `None` when `set`
/// sends none, and then no trailers are sent.
fn trailer_fields(set: RateLimitHeaderSet) -> Option<&'static str> {
    match set {
        RateLimitHeaderSet::All => Some(
            "ratelimit-policy, ratelimit, x-ratelimit-limit, x-ratelimit-remaining, \
             x-ratelimit-reset",
        ),
        RateLimitHeaderSet::Ietf => Some("ratelimit-policy, ratelimit"),
        RateLimitHeaderSet::XRateLimit => {
            Some("x-ratelimit-limit, x-ratelimit-remaining, x-ratelimit-reset")
        }
        RateLimitHeaderSet::None => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use bytes::Bytes;
    use http::{HeaderMap, HeaderName};
    use http_body::Frame;
    use http_body_util::BodyExt;
    use tollgate_core::{LimitUnits, LimiterConfig, ManualClock, MemoryStore, Policy};

    /// A response whose body ends with `trailers`, on a route charging
    /// `x-usage` up to 40, of a request admitted with 1 unit of 100.
    async fn settled_by_trailers(
        headers: &[(&'static str, &str)],
        trailers: &[(&'static str, &str)],
    ) -> u64 {
        let store = Arc::new(
            MemoryStore::new(
                &LimiterConfig::default(),
                Arc::new(ManualClock::new(120_000_000_000)),
            )
            .unwrap(),
        );
        store
            .configure(Policy::fixed_window(100, 60).unwrap())
            .await
            .unwrap();
        let admitted = store
            .acquire_units(&[LimitUnits {
                limit: Limit::Plan("sk_a"),
                units: 1,
            }])
            .await
            .unwrap();
        assert_eq!(admitted[0].decision.remaining, Some(99));
        let settlement = Settlement {
            store: Arc::clone(&store) as Arc<dyn Store>,
            plan: Some("sk_a".to_owned()),
            route: None,
            cost: 1,
            charge: ChargeConfig {
                header: HeaderName::from_static("x-usage"),
                max: 40,
            },
            route_name: Arc::from("trailers"),
            trailers: None,
            header_set: RateLimitHeaderSet::All,
        };
        let mut trailer_map = HeaderMap::new();
        for (name, value) in trailers {
            trailer_map.append(HeaderName::from_static(name), value.parse().unwrap());
        }
        let frames: Vec<Result<Frame<Bytes>, std::convert::Infallible>> = vec![
            Ok(Frame::data(Bytes::from_static(b"tokens"))),
            Ok(Frame::trailers(trailer_map)),
        ];
        let body = Body::new(http_body_util::StreamBody::new(futures_util::stream::iter(
            frames,
        )));
        let mut response = Response::new(body);
        for (name, value) in headers {
            response
                .headers_mut()
                .append(HeaderName::from_static(name), value.parse().unwrap());
        }
        let response = settle_when_done(response, Some(settlement));
        response.into_body().collect().await.unwrap();
        // The settlement runs in a task of its own.
        for _ in 0..100 {
            let report = store.inspect("sk_a").await.unwrap();
            let remaining = report.state.and_then(|state| state.remaining).unwrap();
            if remaining != 99 {
                return remaining;
            }
            tokio::task::yield_now().await;
        }
        99
    }

    #[tokio::test]
    async fn a_trailer_reports_the_usage_and_both_is_bad() {
        // 30 in a trailer: 100 - 30.
        assert_eq!(settled_by_trailers(&[], &[("x-usage", "30")]).await, 70);
        // In the header and a trailer: which is meant is not known: the
        // cost stays.
        assert_eq!(
            settled_by_trailers(&[("x-usage", "5")], &[("x-usage", "30")]).await,
            99
        );
        // A header alone, trailers of other names.
        assert_eq!(
            settled_by_trailers(&[("x-usage", "5")], &[("x-other", "30")]).await,
            95
        );
    }
}
