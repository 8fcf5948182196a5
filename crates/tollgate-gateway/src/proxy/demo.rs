//! The built-in demo backend: with no `[[routes]]` configured, every admitted
//! request is answered here, so that `tollgate serve` can be tried without a
//! backend of one's own.

use axum::body::Body;
use axum::response::Response;
use http::header::CONTENT_TYPE;
use http::{HeaderValue, Request};

/// The route name of requests answered by the demo backend (in metrics and
/// the RateLimit fields).
pub(crate) const DEMO_ROUTE: &str = "demo";

/// A 200 with a short JSON note and the request's method and path.
pub(crate) fn respond(request: &Request<Body>) -> Response {
    let body = serde_json::json!({
        "message": "tollgate's demo backend: add [[routes]] to the config to proxy to your API",
        "method": request.method().as_str(),
        "path": request.uri().path(),
    });
    let mut response = Response::new(Body::from(format!("{body}\n")));
    response
        .headers_mut()
        .insert(CONTENT_TYPE, HeaderValue::from_static("application/json"));
    response
}
