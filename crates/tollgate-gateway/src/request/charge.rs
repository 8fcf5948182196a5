//! Charging by usage (a route's `charge`): a request admitted with the
//! route's `cost` carries a [`Settlement`], which, when its response ends
//! (the body sent, or dropped when the client leaves), charges each of its
//! limits the units the upstream reported in place of `cost`: the
//! difference given back (core's `give_back_units`) or charged past the
//! limit into a debt of at most `max` (core's `overdraw_units`). The report
//! is read from the response's header, or else from its trailers; a
//! missing or bad one (not a decimal integer, given twice) leaves `cost`
//! charged and is counted, as is a report above `max`, charged as `max`.

use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};

use axum::body::Body;
use axum::response::Response;
use bytes::Bytes;
use http::{HeaderMap, HeaderName};
use http_body::{Frame, SizeHint};
use tollgate_core::{Limit, LimitUnits, PreparedPolicy, Redacted, Store};

use crate::config::ChargeConfig;
use crate::observe::metrics;

/// What the upstream reported of a request's usage.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Usage {
    /// A decimal integer of units.
    Reported(u64),
    /// Not a decimal integer from 0 to 2^64-1, or given twice.
    Bad,
}

/// The usage `headers` report under `name`: `None` when they carry none.
pub(crate) fn read_usage(headers: &HeaderMap, name: &HeaderName) -> Option<Usage> {
    let mut values = headers.get_all(name).iter();
    let first = values.next()?;
    if values.next().is_some() {
        return Some(Usage::Bad);
    }
    let text = first.as_bytes();
    let digits = !text.is_empty() && text.len() <= 20 && text.iter().all(u8::is_ascii_digit);
    let parsed = digits
        .then(|| std::str::from_utf8(text).ok()?.parse::<u64>().ok())
        .flatten();
    Some(parsed.map_or(Usage::Bad, Usage::Reported))
}

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
    /// The units the request is charged for `usage` (`None`: none
    /// reported): the report, at most `max`; `cost` for none or a bad one.
    /// Missing, bad and clamped reports are counted.
    fn charged(&self, usage: Option<Usage>) -> u64 {
        match usage {
            Some(Usage::Reported(units)) if units > self.charge.max => {
                metrics::record_charge_clamped(&self.route_name);
                self.charge.max
            }
            Some(Usage::Reported(units)) => units,
            Some(Usage::Bad) | None => {
                metrics::record_charge_missing(&self.route_name);
                self.cost
            }
        }
    }

    /// Settles `usage` in a task of its own (a response's end cannot wait
    /// for the store): nothing when it is `cost`.
    fn settle(self, usage: Option<Usage>) {
        let charged = self.charged(usage);
        if charged == self.cost {
            return;
        }
        let Ok(runtime) = tokio::runtime::Handle::try_current() else {
            return;
        };
        runtime.spawn(async move {
            let (more, units) = if charged > self.cost {
                (true, charged - self.cost)
            } else {
                (false, self.cost - charged)
            };
            let route = self.route.as_ref().map(|(key, policy)| Limit::Policy {
                key: key.as_str(),
                policy,
            });
            let limits: Vec<LimitUnits<'_>> = self
                .plan
                .as_deref()
                .map(Limit::Plan)
                .into_iter()
                .chain(route)
                .map(|limit| LimitUnits { limit, units })
                .collect();
            let settled = if more {
                self.store.overdraw_units(&limits, self.charge.max).await
            } else {
                self.store.give_back_units(&limits).await
            };
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
    let usage = read_usage(response.headers(), &settlement.charge.header);
    if response.status() == http::StatusCode::SWITCHING_PROTOCOLS {
        // A tunnel has no trailers to wait for.
        settlement.settle(usage);
        return response;
    }
    response.map(|body| {
        Body::new(SettlingBody {
            body,
            settlement: Some(settlement),
            usage,
        })
    })
}

pin_project_lite::pin_project! {
    /// A response body that settles its request's usage when it ends or is
    /// dropped, reading a report from its trailers.
    struct SettlingBody {
        #[pin]
        body: Body,
        settlement: Option<Settlement>,
        usage: Option<Usage>,
    }

    impl PinnedDrop for SettlingBody {
        fn drop(this: Pin<&mut Self>) {
            let this = this.project();
            if let Some(settlement) = this.settlement.take() {
                settlement.settle(*this.usage);
            }
        }
    }
}

impl http_body::Body for SettlingBody {
    type Data = Bytes;
    type Error = axum::Error;

    fn poll_frame(
        self: Pin<&mut Self>,
        context: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, axum::Error>>> {
        let this = self.project();
        let polled = this.body.poll_frame(context);
        match &polled {
            Poll::Ready(Some(Ok(frame))) => {
                if let (Some(trailers), Some(settlement)) = (frame.trailers_ref(), &this.settlement)
                    && let Some(reported) = read_usage(trailers, &settlement.charge.header)
                {
                    // Reported in both the header and a trailer: which is
                    // meant is not known.
                    *this.usage = Some(match this.usage {
                        Some(_) => Usage::Bad,
                        None => reported,
                    });
                }
            }
            Poll::Ready(None | Some(Err(_))) => {
                if let Some(settlement) = this.settlement.take() {
                    settlement.settle(*this.usage);
                }
            }
            Poll::Pending => {}
        }
        polled
    }

    fn is_end_stream(&self) -> bool {
        self.body.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        self.body.size_hint()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use http_body_util::BodyExt;
    use tollgate_core::{LimiterConfig, ManualClock, MemoryStore, Policy};

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

    #[test]
    fn only_one_decimal_integer_is_a_report() {
        let name = HeaderName::from_static("x-usage");
        let usage = |values: &[&str]| {
            let mut headers = HeaderMap::new();
            for value in values {
                headers.append(&name, value.parse().unwrap());
            }
            read_usage(&headers, &name)
        };
        assert_eq!(usage(&[]), None);
        assert_eq!(usage(&["0"]), Some(Usage::Reported(0)));
        assert_eq!(usage(&["1234"]), Some(Usage::Reported(1234)));
        assert_eq!(
            usage(&["18446744073709551615"]),
            Some(Usage::Reported(u64::MAX))
        );
        for bad in [
            "-5",
            "2.5",
            "18446744073709551616",
            "1e3",
            " 7",
            "7 ",
            "",
            "0x10",
            "+3",
        ] {
            assert_eq!(usage(&[bad]), Some(Usage::Bad), "{bad:?}");
        }
        assert_eq!(usage(&["3", "3"]), Some(Usage::Bad));
    }
}
