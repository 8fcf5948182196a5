//! [`RateLimit`]: the service that checks each request before the inner one.

use std::sync::Arc;
use std::task::{Context, Poll};

use http::{Request, Response};
use tower_service::Service;

use super::future::ResponseFuture;
use super::route::{Check, Route};
use crate::key::RequestParts;

/// A service rate-limited by its route's budget.
///
/// Its responses carry a body that is either the inner service's or a tollgate
/// problem+json body (`http_body_util::Either`).
#[derive(Clone, Debug)]
pub struct RateLimit<S> {
    inner: S,
    route: Arc<Route>,
}

impl<S> RateLimit<S> {
    pub(crate) fn new(inner: S, route: Arc<Route>) -> Self {
        RateLimit { inner, route }
    }
}

impl<S, RequestBody, ResponseBody> Service<Request<RequestBody>> for RateLimit<S>
where
    S: Service<Request<RequestBody>, Response = Response<ResponseBody>>,
{
    type Response =
        Response<http_body_util::Either<ResponseBody, http_body_util::Full<bytes::Bytes>>>;
    type Error = S::Error;
    type Future = ResponseFuture<S::Future>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, request: Request<RequestBody>) -> Self::Future {
        let parts = RequestParts {
            method: request.method(),
            uri: request.uri(),
            headers: request.headers(),
            extensions: request.extensions(),
        };
        match self.route.check(&parts) {
            Check::PassThrough => ResponseFuture::called(self.inner.call(request), None),
            Check::Allowed(headers) => {
                ResponseFuture::called(self.inner.call(request), Some(headers))
            }
            Check::Denied(response) => ResponseFuture::denied(response),
        }
    }
}
