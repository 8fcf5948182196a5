//! Error responses as `application/problem+json` (RFC 9457).

use bytes::Bytes;
use http::header::{CONTENT_TYPE, RETRY_AFTER, WWW_AUTHENTICATE};
use http::{HeaderValue, Response, StatusCode};
use http_body_util::Full;
use serde::Serialize;

/// The media type of problem details (RFC 9457 section 3).
pub const PROBLEM_JSON: &str = "application/problem+json";

/// A problem details object (RFC 9457): `{"type", "title", "status",
/// "detail"}`, plus `retry_after` (seconds) for a 429.
///
/// ```
/// use http::StatusCode;
/// use tollgate_tower::Problem;
///
/// let response = Problem::new(StatusCode::NOT_FOUND, "no route for /x").into_response();
/// assert_eq!(response.status(), StatusCode::NOT_FOUND);
/// assert_eq!(response.headers()["content-type"], "application/problem+json");
/// ```
#[derive(Debug, Serialize)]
pub struct Problem {
    #[serde(rename = "type")]
    kind: &'static str,
    title: &'static str,
    status: u16,
    detail: String,
    /// For a 429: seconds to wait, as in `Retry-After`.
    #[serde(skip_serializing_if = "Option::is_none")]
    retry_after: Option<u64>,
}

impl Problem {
    /// A problem of `status` explained by `detail`; `type` is `about:blank` and
    /// `title` the status's reason phrase.
    pub fn new(status: StatusCode, detail: impl Into<String>) -> Self {
        Problem {
            kind: "about:blank",
            title: status.canonical_reason().unwrap_or("Error"),
            status: status.as_u16(),
            detail: detail.into(),
            retry_after: None,
        }
    }

    /// 429 Too Many Requests (RFC 6585 section 4) for the limit named `limit`,
    /// with `Retry-After` in whole seconds (RFC 9110 section 10.2.3), never 0,
    /// and the same wait as `retry_after` in the body.
    pub fn too_many_requests(limit: &str, retry_after: u64) -> Response<Full<Bytes>> {
        Problem::refused(StatusCode::TOO_MANY_REQUESTS, limit, retry_after)
    }

    /// A refusal by the limit named `limit` answered with `status` instead of
    /// 429 (nginx's `limit_req` answers 503 by default): the same body, with
    /// `status` in it, and the same `Retry-After`.
    pub fn refused(status: StatusCode, limit: &str, retry_after: u64) -> Response<Full<Bytes>> {
        let retry_after = retry_after.max(1);
        let mut problem = Problem::new(
            status,
            format!("the rate limit of {limit} is exhausted; retry in {retry_after} s"),
        );
        problem.retry_after = Some(retry_after);
        let mut response = problem.into_response();
        response
            .headers_mut()
            .insert(RETRY_AFTER, HeaderValue::from(retry_after));
        response
    }

    /// A refusal by a concurrency limit (`max_in_flight`): `limit` (a
    /// route) has `max` requests of this key in flight already. Answered
    /// with `status` (429 by default) and `Retry-After: 1`: a slot comes
    /// back when any of them ends, which no one can foretell.
    pub fn in_flight_refused(status: StatusCode, limit: &str, max: u64) -> Response<Full<Bytes>> {
        let requests = if max == 1 { "request" } else { "requests" };
        let mut problem = Problem::new(
            status,
            format!(
                "the concurrency limit of {limit} is reached: at most {max} {requests} in flight \
                 at once; retry in 1 s"
            ),
        );
        problem.retry_after = Some(1);
        let mut response = problem.into_response();
        response
            .headers_mut()
            .insert(RETRY_AFTER, HeaderValue::from(1u64));
        response
    }

    /// 401 Unauthorized: the request lacks the identity it is limited by.
    /// RFC 9110 section 11.6.1 requires a `WWW-Authenticate` challenge: `Bearer`.
    pub fn unauthorized(detail: impl Into<String>) -> Response<Full<Bytes>> {
        let mut response = Problem::new(StatusCode::UNAUTHORIZED, detail).into_response();
        response
            .headers_mut()
            .insert(WWW_AUTHENTICATE, HeaderValue::from_static("Bearer"));
        response
    }

    /// 503 Service Unavailable: the limit store cannot decide now (what a
    /// [`FailurePolicy::FailClosed`](crate::FailurePolicy) layer answers).
    pub fn unavailable() -> Response<Full<Bytes>> {
        Problem::new(
            StatusCode::SERVICE_UNAVAILABLE,
            "the rate limiter cannot decide right now; retry shortly",
        )
        .into_response()
    }

    /// 500 Internal Server Error: the server is set up wrongly.
    pub fn internal(detail: impl Into<String>) -> Response<Full<Bytes>> {
        Problem::new(StatusCode::INTERNAL_SERVER_ERROR, detail).into_response()
    }

    /// The response: this status, `Content-Type: application/problem+json`.
    pub fn into_response(self) -> Response<Full<Bytes>> {
        let body = serde_json::to_vec(&self).unwrap_or_default();
        let mut response = Response::new(Full::new(Bytes::from(body)));
        *response.status_mut() =
            StatusCode::from_u16(self.status).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
        response
            .headers_mut()
            .insert(CONTENT_TYPE, HeaderValue::from_static(PROBLEM_JSON));
        response
    }
}
