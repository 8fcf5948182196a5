//! Each gRPC call held in flight on its connection ([`InFlight`])
//! from its headers until its response's last byte: a tower layer around
//! every service of the gRPC listener (rate limit, health), so that no call,
//! a quiet `Health/Watch` stream included, is cut as idle or shed. The
//! connection's activity comes from tonic's connection information
//! ([`Connection`]).

use std::pin::Pin;
use std::task::{Context, Poll};

use crate::{Activity, InFlight, InFlightBody};
use tower_layer::Layer;
use tower_service::Service;

use super::counted_stream::Connection;

/// Wraps a service in [`CountInFlight`].
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct InFlightLayer;

impl<Inner> Layer<Inner> for InFlightLayer {
    type Service = CountInFlight<Inner>;

    fn layer(&self, inner: Inner) -> CountInFlight<Inner> {
        CountInFlight { inner }
    }
}

/// A service whose every call is in flight until its response body ends.
#[derive(Clone, Debug)]
pub(crate) struct CountInFlight<Inner> {
    inner: Inner,
}

/// The future of a call: the inner service's, its response's body wrapped.
type CallFuture<Response, Error> =
    Pin<Box<dyn Future<Output = Result<Response, Error>> + Send + 'static>>;

impl<Inner, RequestBody, ResponseBody> Service<http::Request<RequestBody>> for CountInFlight<Inner>
where
    Inner: Service<http::Request<RequestBody>, Response = http::Response<ResponseBody>>,
    Inner::Future: Send + 'static,
    ResponseBody: 'static,
{
    type Response = http::Response<InFlightBody<ResponseBody>>;
    type Error = Inner::Error;
    type Future = CallFuture<Self::Response, Self::Error>;

    fn poll_ready(&mut self, context: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        self.inner.poll_ready(context)
    }

    fn call(&mut self, request: http::Request<RequestBody>) -> Self::Future {
        let in_flight = match request.extensions().get::<Connection>() {
            Some(connection) => InFlight::start(&connection.activity),
            // Not served through a worker's connection: counted nowhere.
            None => InFlight::start(&Activity::new()),
        };
        let call = self.inner.call(request);
        Box::pin(async move {
            let response = call.await?;
            Ok(response.map(|body| InFlightBody::new(body, in_flight)))
        })
    }
}
