//! [`RouteLimit`]: the service that holds each request to its route's budget
//! before the inner one runs.

use std::sync::Arc;
use std::task::{Context, Poll};

use http::{Request, Response};
use tower_service::Service;

use super::decide;
use super::future::{Decision, ResponseFuture};
use super::pending::PendingLimits;
use super::route::{Check, Route};
use crate::key::RequestParts;

/// A service rate-limited by its route's budget; made by
/// [`RouteLimitLayer`](super::RouteLimitLayer).
///
/// Its responses carry a body that is either the inner service's or a
/// tollgate problem+json body (`http_body_util::Either`).
///
/// In [`Service::call`] it calls the inner service at once (its future is
/// lazy) so that route layers further in add their limits to the request's:
/// the outermost decides them all in one store call and polls the inner
/// future only when every one allows. See the crate documentation, "Stacked
/// layers", for what that asks of the services in between.
#[derive(Clone, Debug)]
pub struct RouteLimit<S> {
    inner: S,
    route: Arc<Route>,
}

impl<S> RouteLimit<S> {
    pub(crate) fn new(inner: S, route: Arc<Route>) -> Self {
        RouteLimit { inner, route }
    }
}

impl<S, RequestBody, ResponseBody> Service<Request<RequestBody>> for RouteLimit<S>
where
    S: Service<Request<RequestBody>, Response = Response<ResponseBody>>,
{
    type Response = Response<
        http_body_util::Either<crate::UsageBody<ResponseBody>, http_body_util::Full<bytes::Bytes>>,
    >;
    type Error = S::Error;
    type Future = ResponseFuture<S::Future>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, mut request: Request<RequestBody>) -> Self::Future {
        let parts = RequestParts {
            method: request.method(),
            uri: request.uri(),
            headers: request.headers(),
            extensions: request.extensions(),
        };
        let limit = match self.route.check(&parts) {
            Check::PassThrough => return ResponseFuture::pass(self.inner.call(request)),
            Check::Refused(response) => {
                if let Some(pending) = request.extensions().get::<PendingLimits>() {
                    pending.refuse();
                }
                return ResponseFuture::refused(response);
            }
            Check::Limit(limit) => limit,
        };
        let shared = &self.route.shared;
        let store = shared.store_id();
        // A layer further out gathers limits for this request: join it.
        let limit = match request.extensions().get::<PendingLimits>() {
            Some(pending) => {
                // On a route charged by usage, what its response settles,
                // once the layer deciding for it has charged it.
                let settlement =
                    limit.settlement(|| pending.charged(), || can_send_trailers(&request));
                match pending.join(store, limit) {
                    Ok(()) => {
                        return ResponseFuture::settling(self.inner.call(request), settlement);
                    }
                    Err(limit) => limit,
                }
            }
            None => limit,
        };
        // The outermost (or one that must decide alone): gather the limits of
        // the layers further in while calling them, then decide them all.
        // The flag its settlement checks, made only for a route charged by
        // usage (a layer further in may ask for one too).
        let mut charged = None;
        let settlement = limit.settlement(
            || Arc::clone(charged.insert(Arc::new(std::sync::atomic::AtomicBool::new(false)))),
            || can_send_trailers(&request),
        );
        let pending = PendingLimits::open(store, limit, charged);
        request.extensions_mut().insert(pending.clone());
        let future = self.inner.call(request);
        let Some(gathered) = pending.seal() else {
            return ResponseFuture::pass(future);
        };
        if gathered.refused {
            return ResponseFuture::pass(future);
        }
        let gathered_charged = gathered.charged;
        // A request waits for its turn only when every layer it is held to
        // lets it, up to the shortest delay.
        let max_wait = std::iter::once(&gathered.first)
            .chain(&gathered.more)
            .map(|limit| limit.route.max_wait)
            .min()
            .unwrap_or_default();
        let decision = if !max_wait.is_zero() {
            Decision::Later(Box::pin(super::turn::reserve(
                gathered.first,
                gathered.more,
                max_wait,
            )))
        } else if shared.immediate {
            Decision::Now(decide::decide_now(&gathered.first, &gathered.more))
        } else {
            Decision::Later(Box::pin(decide::decide(gathered.first, gathered.more)))
        };
        ResponseFuture::held(future, decision, settlement, gathered_charged)
    }
}

/// Whether `request`'s response can carry trailers
/// ([`crate::usage_body::can_send_trailers`]).
fn can_send_trailers<B>(request: &http::Request<B>) -> bool {
    crate::usage_body::can_send_trailers(request.method(), request.version(), request.headers())
}
