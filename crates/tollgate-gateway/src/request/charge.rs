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
use tollgate_core::{
    Limit, PreparedPolicy, Redacted, Settlement as Settle, Store, UsageReport, apply_settlement,
    settle_usage,
};
use tollgate_tower::{UsageBody, read_usage};

use crate::config::ChargeConfig;
use crate::observe::metrics;

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
}

impl Settlement {
    /// Settles `report` in a task of its own (a response's end cannot wait
    /// for the store): nothing when the usage is the cost.
    fn settle(self, report: Option<UsageReport>) {
        let settled = settle_usage(self.cost, self.charge.max, report);
        if settled.missing {
            metrics::record_charge_missing(&self.route_name);
        }
        if settled.clamped {
            metrics::record_charge_clamped(&self.route_name);
        }
        if settled.settlement == Settle::Keep {
            return;
        }
        let Ok(runtime) = tokio::runtime::Handle::try_current() else {
            return;
        };
        runtime.spawn(async move {
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
            let settled = apply_settlement(self.store.as_ref(), &limits, settled.settlement).await;
            if let Err(error) = settled {
                tracing::warn!(
                    key = %Redacted(self.plan.as_deref().unwrap_or("")),
                    route = %self.route_name,
                    %error,
                    "a request's usage could not be settled: it keeps the cost its admission took"
                );
            }
        });
    }
}

/// `response` settling `settlement` when it ends: its usage read from its
/// headers now, or from its trailers as they pass.
pub(crate) fn settle_when_done(response: Response, settlement: Option<Settlement>) -> Response {
    let Some(settlement) = settlement else {
        return response;
    };
    let header = settlement.charge.header.clone();
    let report = read_usage(response.headers(), &header);
    if response.status() == http::StatusCode::SWITCHING_PROTOCOLS {
        // A tunnel has no trailers to wait for.
        settlement.settle(report);
        return response;
    }
    let settle = Box::new(move |report| settlement.settle(report));
    response.map(|body| Body::new(UsageBody::settling(body, header, report, settle)))
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
