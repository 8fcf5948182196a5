//! Charging a route's requests by usage ([`RouteLimitLayer::charge`]): the
//! layer's setting ([`Charge`]), and the [`Settlement`] an admitted request
//! carries to the end of its response, where it settles its limit by core's
//! rule ([`settle_usage`]).
//!
//! [`RouteLimitLayer::charge`]: super::RouteLimitLayer::charge

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use http::HeaderName;
use tollgate_core::{
    Limit, PreparedPolicy, Settlement as Settle, Store, UsageReport, apply_settlement, settle_usage,
};

use crate::header_fields::{HeaderTemplate, RATELIMIT, RATELIMIT_POLICY};
use crate::usage_body::{Settle as SettleCallback, SettledTrailers, UsageBody, read_usage};

/// How a route's requests are charged by usage: the response header (or
/// trailer) reporting the units used, and the most one request is charged.
#[derive(Clone, Debug)]
pub(crate) struct Charge {
    pub(crate) header: HeaderName,
    pub(crate) max: u64,
}

/// What a request admitted on a route charged by usage settles when its
/// response ends: its limit (owned) and the cost it was charged.
pub(crate) struct Settlement {
    pub(crate) store: Arc<dyn Store>,
    pub(crate) key: String,
    pub(crate) policy: PreparedPolicy,
    pub(crate) cost: u64,
    pub(crate) charge: Charge,
    /// The route's name, for the metric of a settlement that failed.
    pub(crate) route: Arc<str>,
    /// Set when the decision charged the limit its cost: a request let
    /// through without it (the store failed open) settles nothing.
    pub(crate) charged: Arc<AtomicBool>,
    /// The limit's RateLimit fields, when its client accepts trailers: sent
    /// as trailers after the settlement.
    pub(crate) trailers: Option<HeaderTemplate>,
}

/// The `Trailer` field of a response ending with the RateLimit fields
/// (RFC 9110 §6.6.2).
const TRAILER_FIELDS: &str = "ratelimit-policy, ratelimit";

impl Settlement {
    /// The settlement of `report` (run by the body in a task of its own,
    /// or awaited before the trailers when `sending_trailers`): nothing
    /// when the usage is the cost and no trailers are sent. Its output: the
    /// RateLimit fields after it, when trailers are sent.
    fn settle(mut self, report: Option<UsageReport>, sending_trailers: bool) -> SettledTrailers {
        if !self.charged.load(Ordering::Acquire) {
            return Box::pin(std::future::ready(None));
        }
        if !sending_trailers {
            self.trailers = None;
        }
        let settlement = settle_usage(self.cost, self.charge.max, report).settlement;
        let settlement = match self.trailers {
            Some(_) => settlement.or_look(self.charge.max),
            None => settlement,
        };
        if settlement == Settle::Keep {
            return Box::pin(std::future::ready(None));
        }
        Box::pin(async move {
            let limit = Limit::Policy {
                key: &self.key,
                policy: &self.policy,
            };
            match apply_settlement(self.store.as_ref(), &[limit], settlement).await {
                Ok(decisions) => {
                    let (template, decision) = self.trailers.as_ref().zip(decisions.first())?;
                    let mut fields = http::HeaderMap::with_capacity(2);
                    fields.insert(RATELIMIT_POLICY, template.policy().clone());
                    fields.insert(RATELIMIT, template.state(&decision.decision));
                    Some(fields)
                }
                Err(_) => {
                    // Counted as a store failure whose outcome is the cost kept.
                    crate::metrics::record_store_failure(&self.route, "settle");
                    None
                }
            }
        })
    }

    /// `body` of a response with `headers`, settling this when it ends; a
    /// response whose client accepts trailers announces the RateLimit
    /// trailers in `headers` and loses its `Content-Length` (chunked in
    /// HTTP/1.1).
    pub(crate) fn wrap<B>(
        mut self,
        status: http::StatusCode,
        headers: &mut http::HeaderMap,
        body: B,
    ) -> UsageBody<B> {
        let header = self.charge.header.clone();
        let report = read_usage(headers, &header);
        if !crate::usage_body::status_has_body(status) {
            self.trailers = None;
        }
        let trailers = self.trailers.is_some();
        if trailers {
            headers.remove(http::header::CONTENT_LENGTH);
            // Once, though stacked layers each send these fields.
            let announced = headers
                .get_all(http::header::TRAILER)
                .iter()
                .any(|value| value == TRAILER_FIELDS);
            if !announced {
                headers.append(
                    http::header::TRAILER,
                    http::HeaderValue::from_static(TRAILER_FIELDS),
                );
            }
        }
        let settle: SettleCallback =
            Box::new(move |report, sending_trailers| self.settle(report, sending_trailers));
        let body = UsageBody::settling(body, header, report, settle);
        if trailers { body.with_trailers() } else { body }
    }
}
