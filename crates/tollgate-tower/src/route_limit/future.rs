//! [`ResponseFuture`]: the inner service's response with the RateLimit
//! fields added, or tollgate's own response.

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::task::{Context, Poll, ready};

use bytes::Bytes;
use http::Response;
use http_body_util::{Either, Full};
use pin_project_lite::pin_project;

use super::charge::Settlement;
use super::decide::Outcome;
use crate::header_fields::RateLimitHeaders;
use crate::problem::Problem;
use crate::usage_body::UsageBody;

/// The store's decision still to come.
type Deciding = Pin<Box<dyn Future<Output = Outcome> + Send>>;

pin_project! {
    /// The response future of [`RouteLimit`](super::RouteLimit): the inner
    /// service's future, polled only once every limit allowed the request
    /// (and dropped unpolled otherwise).
    pub struct ResponseFuture<F> {
        #[pin]
        inner: Option<F>,
        stage: Stage,
        // What an allowed request's response settles as it ends, on a
        // route charged by usage (boxed: few routes are, and the future
        // stays small, so cheap to move, on the common path).
        settlement: Option<Box<Settlement>>,
        // Set when the decision charged the limits (the deciding layer's).
        charged: Option<Arc<AtomicBool>>,
    }
}

enum Stage {
    /// Waiting for a store that does not answer at once (Redis).
    Deciding(Deciding),
    /// Allowed: the inner response, with these fields added.
    Allowed(Option<RateLimitHeaders>),
    /// Refused: this response (taken once; boxed, so the future stays small
    /// on the common path).
    Refused(Option<Box<Response<Full<Bytes>>>>),
}

impl<F> ResponseFuture<F> {
    /// The inner future's response, untouched (no limit, or the limit of a
    /// layer that another one decides for).
    pub(super) fn pass(future: F) -> Self {
        ResponseFuture {
            inner: Some(future),
            stage: Stage::Allowed(None),
            settlement: None,
            charged: None,
        }
    }

    /// The same, settling `settlement` (if any) when an allowed request's
    /// response ends: a layer further in that joined the limits an outer one
    /// decides.
    pub(super) fn settling(future: F, settlement: Option<Settlement>) -> Self {
        ResponseFuture {
            inner: Some(future),
            stage: Stage::Allowed(None),
            settlement: settlement.map(Box::new),
            charged: None,
        }
    }

    /// `response` without calling the inner service.
    pub(super) fn refused(response: Box<Response<Full<Bytes>>>) -> Self {
        ResponseFuture {
            inner: None,
            stage: Stage::Refused(Some(response)),
            settlement: None,
            charged: None,
        }
    }

    /// The inner future held to `decision`, built in place (a future moved
    /// is copied whole): once allowed, `charged` (if a settlement asked for
    /// one) is set when the decision charged the limits (allowed with
    /// fields: not a store failing open),
    /// and `settlement` (if any) settles when the response ends. Refused at
    /// once, the inner future and the settlement are dropped.
    pub(super) fn held(
        future: F,
        decision: Decision,
        settlement: Option<Settlement>,
        charged: Option<Arc<AtomicBool>>,
    ) -> Self {
        let stage = match decision {
            Decision::Now(Outcome::Allowed(headers)) => Stage::Allowed(headers),
            Decision::Now(Outcome::Refused(response)) => return ResponseFuture::refused(response),
            Decision::Later(deciding) => Stage::Deciding(deciding),
        };
        ResponseFuture {
            inner: Some(future),
            stage,
            settlement: settlement.map(Box::new),
            charged,
        }
    }
}

/// A request's decision: made at once (a store in memory), or still to come.
pub(super) enum Decision {
    /// Decided already.
    Now(Outcome),
    /// The store's answer (or the request's turn) still to come.
    Later(Deciding),
}

impl<F, Body, Error> Future for ResponseFuture<F>
where
    F: Future<Output = Result<Response<Body>, Error>>,
{
    type Output = Result<Response<Either<UsageBody<Body>, Full<Bytes>>>, Error>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let mut this = self.project();
        loop {
            match this.stage {
                Stage::Deciding(decision) => match ready!(decision.as_mut().poll(cx)) {
                    Outcome::Allowed(headers) => *this.stage = Stage::Allowed(headers),
                    Outcome::Refused(response) => {
                        // Refused: the inner future is never polled.
                        this.inner.set(None);
                        *this.stage = Stage::Refused(Some(response));
                    }
                },
                Stage::Allowed(headers) => {
                    if let (Some(_), Some(charged)) = (headers.as_ref(), this.charged.take()) {
                        charged.store(true, Ordering::Release);
                    }
                    let Some(inner) = this.inner.as_mut().as_pin_mut() else {
                        let response = Problem::internal("response already taken".to_owned());
                        return Poll::Ready(Ok(response.map(Either::Right)));
                    };
                    let mut response = ready!(inner.poll(cx))?;
                    this.inner.set(None);
                    if let Some(headers) = headers.take() {
                        headers.add_to(response.headers_mut());
                    }
                    let (mut parts, body) = response.into_parts();
                    let body = match this.settlement.take() {
                        Some(settlement) => settlement.wrap(parts.status, &mut parts.headers, body),
                        None => UsageBody::plain(body),
                    };
                    return Poll::Ready(Ok(Response::from_parts(parts, Either::Left(body))));
                }
                Stage::Refused(response) => {
                    let response = response.take().map_or_else(
                        || Problem::internal("response already taken".to_owned()),
                        |response| *response,
                    );
                    return Poll::Ready(Ok(response.map(Either::Right)));
                }
            }
        }
    }
}
