//! tollgate's own answers (401, 404, 429, 502, 503, ...) as the gateway's
//! response type: problem+json bodies (RFC 9457) made by
//! [`tollgate_tower::Problem`], converted here and nowhere else.

use axum::body::Body;
use axum::response::Response;
use bytes::Bytes;
use http::StatusCode;
use http_body_util::Full;
use tollgate_tower::Problem;

use crate::observe::access_log::OwnAnswer;

/// A problem+json answer of `status` explained by `detail`.
pub(crate) fn problem(status: StatusCode, detail: impl Into<String>) -> Response {
    respond(Problem::new(status, detail).into_response())
}

/// One of [`Problem`]'s ready-made responses (`unauthorized`,
/// `too_many_requests`, ...) as the gateway's response type.
pub(crate) fn respond(response: http::Response<Full<Bytes>>) -> Response {
    let mut response = response.map(Body::new);
    response.extensions_mut().insert(OwnAnswer);
    response
}
