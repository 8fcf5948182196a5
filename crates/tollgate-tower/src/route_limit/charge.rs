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
}

impl Settlement {
    /// The settlement of `report` (run by the body in a task of its own):
    /// nothing when the usage is the cost. It adds no trailers.
    fn settle(self, report: Option<UsageReport>) -> SettledTrailers {
        if !self.charged.load(Ordering::Acquire) {
            return Box::pin(std::future::ready(None));
        }
        let settlement = settle_usage(self.cost, self.charge.max, report).settlement;
        if settlement == Settle::Keep {
            return Box::pin(std::future::ready(None));
        }
        Box::pin(async move {
            let limit = Limit::Policy {
                key: &self.key,
                policy: &self.policy,
            };
            let settled = apply_settlement(self.store.as_ref(), &[limit], settlement).await;
            if settled.is_err() {
                // Counted as a store failure whose outcome is the cost kept.
                crate::metrics::record_store_failure(&self.route, "settle");
            }
            None
        })
    }

    /// `body` of a response with `headers`, settling this when it ends.
    pub(crate) fn wrap<B>(self, headers: &http::HeaderMap, body: B) -> UsageBody<B> {
        let header = self.charge.header.clone();
        let report = read_usage(headers, &header);
        let settle: SettleCallback = Box::new(move |report| self.settle(report));
        UsageBody::settling(body, header, report, settle)
    }
}
