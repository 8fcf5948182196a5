//! Helpers for driving a route layer with `tower::ServiceExt`.

#![allow(dead_code, unreachable_pub, missing_docs)]

use std::convert::Infallible;
use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use bytes::Bytes;
use http::{Request, Response, StatusCode};
use http_body_util::{BodyExt, Full};
use tollgate_tower::{PeerAddr, Principal, RouteLimitLayer, Tenant};
use tower::{Layer, Service, ServiceExt};

pub type Body = http_body_util::Either<tollgate_tower::UsageBody<Full<Bytes>>, Full<Bytes>>;

/// The inner service: answers 200 "ok" and counts the requests it served (in
/// its future, where a service does its work: a refused request's future is
/// dropped unpolled).
#[derive(Clone, Default)]
pub struct Backend {
    pub calls: Arc<AtomicUsize>,
}

impl Backend {
    pub fn calls(&self) -> usize {
        self.calls.load(Ordering::SeqCst)
    }

    pub fn wrapped(
        &self,
        layer: &RouteLimitLayer,
    ) -> impl Service<Request<()>, Response = Response<Body>, Error = Infallible, Future: Send>
    + Clone
    + Send
    + 'static {
        layer.layer(self.service())
    }

    /// The bare service, to wrap in several layers.
    pub fn service(
        &self,
    ) -> impl Service<
        Request<()>,
        Response = Response<Full<Bytes>>,
        Error = Infallible,
        Future: Send,
    > + Clone
    + Send
    + 'static {
        let calls = Arc::clone(&self.calls);
        tower::service_fn(move |_request: Request<()>| {
            let calls = Arc::clone(&calls);
            async move {
                calls.fetch_add(1, Ordering::SeqCst);
                Ok::<_, Infallible>(Response::new(Full::new(Bytes::from_static(b"ok"))))
            }
        })
    }
}

/// A request from `peer` (`"192.0.2.7:5000"`).
pub fn from(peer: &str) -> Request<()> {
    let mut request = Request::new(());
    request
        .extensions_mut()
        .insert(PeerAddr(peer.parse::<SocketAddr>().unwrap()));
    request
}

pub fn with_tenant(mut request: Request<()>, tenant: &str) -> Request<()> {
    request.extensions_mut().insert(Tenant(tenant.to_owned()));
    request
}

pub fn with_principal(mut request: Request<()>, principal: &str) -> Request<()> {
    request
        .extensions_mut()
        .insert(Principal(principal.to_owned()));
    request
}

pub fn with_header(mut request: Request<()>, name: &'static str, value: &str) -> Request<()> {
    request.headers_mut().append(name, value.parse().unwrap());
    request
}

pub async fn send<S>(service: &S, request: Request<()>) -> Response<Body>
where
    S: Service<Request<()>, Response = Response<Body>, Error = Infallible> + Clone,
{
    service.clone().oneshot(request).await.unwrap()
}

pub async fn status<S>(service: &S, request: Request<()>) -> StatusCode
where
    S: Service<Request<()>, Response = Response<Body>, Error = Infallible> + Clone,
{
    send(service, request).await.status()
}

pub fn header<'a>(response: &'a Response<Body>, name: &str) -> Option<&'a str> {
    response
        .headers()
        .get(name)
        .map(|value| value.to_str().unwrap())
}

pub async fn json(response: Response<Body>) -> serde_json::Value {
    let bytes = response.into_body().collect().await.unwrap().to_bytes();
    serde_json::from_slice(&bytes).unwrap()
}
