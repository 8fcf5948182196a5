//! [`InFlightLimit`]: the service that takes a slot before the inner one
//! runs.

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};

use bytes::Bytes;
use http::{Request, Response, StatusCode};
use http_body_util::{Either, Full};
use tollgate_core::{ApiKeyRequirement, Caller, FailurePolicy};
use tower_service::Service;

use super::InFlightLimitLayer;
use super::body::{InFlightBody, SlotGuard};
use crate::key::{self, KeySelector, MissingKey, RequestParts};
use crate::metrics::{record_denial, record_store_failure};
use crate::problem::Problem;

/// A service whose requests of one key are at most `max` in flight; made
/// by [`InFlightLimitLayer`]. Its responses carry the inner body (holding
/// the slot) or a problem+json body.
#[derive(Clone, Debug)]
pub struct InFlightLimit<S> {
    inner: S,
    limit: Arc<InFlightLimitLayer>,
}

impl<S> InFlightLimit<S> {
    pub(crate) fn new(inner: S, limit: Arc<InFlightLimitLayer>) -> Self {
        InFlightLimit { inner, limit }
    }
}

/// The response of an [`InFlightLimit`].
pub type InFlightResponse<B> = Response<Either<InFlightBody<B>, Full<Bytes>>>;

impl<S, RequestBody, ResponseBody> Service<Request<RequestBody>> for InFlightLimit<S>
where
    S: Service<Request<RequestBody>, Response = Response<ResponseBody>> + Clone + Send + 'static,
    S::Future: Send,
    RequestBody: Send + 'static,
{
    type Response = InFlightResponse<ResponseBody>;
    type Error = S::Error;
    type Future = Pin<Box<dyn Future<Output = Result<Self::Response, S::Error>> + Send>>;

    fn poll_ready(&mut self, context: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        self.inner.poll_ready(context)
    }

    fn call(&mut self, request: Request<RequestBody>) -> Self::Future {
        // The service made ready is the one called (tower's rule).
        let clone = self.inner.clone();
        let mut inner = std::mem::replace(&mut self.inner, clone);
        let limit = Arc::clone(&self.limit);
        let parts = RequestParts {
            method: request.method(),
            uri: request.uri(),
            headers: request.headers(),
            extensions: request.extensions(),
        };
        // Known principals, as the route layer reads them: an unknown one is
        // refused, or counted per client IP (anonymous).
        let mut selector = &limit.selector;
        if let (Some(rules), Some(principal)) =
            (limit.shared.key_rules(), key::principal(parts.extensions))
        {
            match rules.identify(ApiKeyRequirement::Optional, Some(principal), |_| false) {
                Ok(Caller::Key(_)) => {}
                Ok(Caller::Keyless(_)) => selector = &KeySelector::Ip,
                Err(_) => {
                    let problem = Problem::unauthorized("this principal is not known");
                    return Box::pin(async move { Ok(refused(problem)) });
                }
            }
        }
        let key = selector.key(&parts, &limit.shared.client_ip, &limit.name);
        Box::pin(async move {
            let key = match key {
                Ok(key) => key,
                Err(MissingKey::Identity(kind)) => {
                    return Ok(refused(Problem::unauthorized(format!(
                        "{} limits the requests in flight per {}, and the request has none",
                        limit.name,
                        kind.noun()
                    ))));
                }
                Err(MissingKey::PeerAddress) => {
                    return Ok(refused(Problem::internal(format!(
                        "{} limits the requests in flight per client IP, and the server does \
                         not record peer addresses",
                        limit.name
                    ))));
                }
            };
            let slots = &limit.shared.slots;
            let slot = match slots.acquire(&key.text, limit.max).await {
                Ok(Some(lease)) => Some(SlotGuard {
                    slots: Arc::clone(slots),
                    lease: Some(lease),
                }),
                Ok(None) => {
                    record_denial(&limit.name, key.kind.label());
                    return Ok(refused(Problem::in_flight_refused(
                        StatusCode::TOO_MANY_REQUESTS,
                        &limit.name,
                        limit.max,
                    )));
                }
                Err(_) => {
                    let failure = limit.shared.failure;
                    record_store_failure(&limit.name, failure.label());
                    if failure == FailurePolicy::FailClosed {
                        return Ok(refused(Problem::unavailable()));
                    }
                    None
                }
            };
            let response = inner.call(request).await?;
            Ok(response.map(|body| Either::Left(InFlightBody::new(body, slot))))
        })
    }
}

fn refused<B>(response: Response<Full<Bytes>>) -> InFlightResponse<B> {
    response.map(Either::Right)
}
