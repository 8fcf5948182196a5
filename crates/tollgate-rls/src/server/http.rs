//! The HTTP listener (`PORT`): `/json`, the rate limit call for clients that
//! cannot speak gRPC, and `/healthcheck`, as envoyproxy/ratelimit's
//! `NewJsonHandler` and `HealthChecker.ServeHTTP` answer them; and the debug
//! listener (`DEBUG_PORT`).

use std::sync::Arc;

use axum::Router;
use axum::body::Body;
use axum::extract::State;
use axum::routing::{any, get};
use http::{HeaderValue, StatusCode, header};

use super::health::Health;
use super::{DebugPages, Decide, DecideError, decide_catching_panics};
use crate::proto::{Code, RateLimitRequest};

/// The largest `/json` body read (bytes), as large as a gRPC message; the Go
/// service reads any size. A larger body is answered 400, as a body the Go
/// service cannot read is.
pub const MAX_JSON_BODY_BYTES: usize = super::grpc::MAX_GRPC_MESSAGE_BYTES;

#[derive(Clone)]
struct HttpState {
    decider: Arc<dyn Decide>,
    health: Health,
    /// How long a `/json` body may take to arrive whole.
    body_timeout: std::time::Duration,
}

/// The main HTTP listener's routes; a `/json` body that has not arrived
/// whole within `body_timeout` (the idle timeout: a request is in flight
/// while its body is read, so a client that stops sending would otherwise
/// hold its connection) is answered 400.
pub(crate) fn router(
    decider: Arc<dyn Decide>,
    health: Health,
    body_timeout: std::time::Duration,
) -> Router {
    Router::new()
        .route("/json", any(json))
        .route("/healthcheck", any(healthcheck))
        .fallback(not_found)
        .with_state(HttpState {
            decider,
            health,
            body_timeout,
        })
}

/// `/json` (any method, as gorilla/mux routes it): the body is a
/// `RateLimitRequest` in proto3 JSON; the answer is the `RateLimitResponse`
/// in proto3 JSON with 200 (OK), 429 (OVER_LIMIT) or 500 (UNKNOWN). A body
/// that cannot be read or parsed, or a request the service refuses, is 400
/// `Bad Request`, as Go's `http.Error` writes it.
async fn json(State(state): State<HttpState>, body: Body) -> http::Response<Body> {
    let reading = axum::body::to_bytes(body, MAX_JSON_BODY_BYTES);
    let Ok(Ok(bytes)) = tokio::time::timeout(state.body_timeout, reading).await else {
        let reason = "the /json body cannot be read, is too large or came too slowly";
        tracing::warn!("error: {reason}");
        return bad_request(reason);
    };
    let request: RateLimitRequest = match serde_json::from_slice(&bytes) {
        Ok(request) => request,
        Err(error) => {
            tracing::warn!(
                line = error.line(),
                column = error.column(),
                "error: the /json body is not a RateLimitRequest"
            );
            // Where, not what: serde's text can quote the body's values
            // (descriptor values may be API keys).
            return bad_request(&format!(
                "the body is not a RateLimitRequest (JSON line {}, column {})",
                error.line(),
                error.column()
            ));
        }
    };
    let response = match decide_catching_panics(state.decider.as_ref(), &request).await {
        Ok(response) => response,
        Err(DecideError::Service(message)) => {
            tracing::warn!(error = %message, "error");
            // The request's own faults say why; a store's error (a Redis
            // client's text) stays in the log.
            let said = [
                "rate limit domain must not be empty",
                "rate limit descriptor list must not be empty",
                "no rate limit configuration loaded",
                "descriptor ",
            ];
            if said.iter().any(|text| message.starts_with(text)) {
                return bad_request(&message);
            }
            return bad_request("the service cannot decide now (its log says why)");
        }
        Err(DecideError::Panicked) => return plain_error(StatusCode::INTERNAL_SERVER_ERROR),
    };
    let Ok(body) = serde_json::to_vec(&response) else {
        tracing::error!("error marshaling proto3 to json");
        return plain_error(StatusCode::INTERNAL_SERVER_ERROR);
    };
    let status = match response.overall_code {
        Code::Unknown => StatusCode::INTERNAL_SERVER_ERROR,
        Code::OverLimit => StatusCode::TOO_MANY_REQUESTS,
        Code::Ok => StatusCode::OK,
    };
    let mut answer = http::Response::new(Body::from(body));
    *answer.status_mut() = status;
    answer.headers_mut().insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("application/json"),
    );
    answer
}

/// `/healthcheck`: 200 `OK` while healthy, 500 with no body after.
async fn healthcheck(State(state): State<HttpState>) -> http::Response<Body> {
    if state.health.is_ok() {
        text(StatusCode::OK, "OK")
    } else {
        let mut answer = http::Response::new(Body::empty());
        *answer.status_mut() = StatusCode::INTERNAL_SERVER_ERROR;
        answer
    }
}

/// Go's `http.NotFound`.
async fn not_found() -> http::Response<Body> {
    text(StatusCode::NOT_FOUND, "404 page not found\n")
}

/// Go's `http.Error(w, http.StatusText(code), code)`.
/// 400 with the Go service's status text and, after it, why (the text the
/// Go service only logs): `Bad Request: rate limit domain must not be
/// empty`.
fn bad_request(reason: &str) -> http::Response<Body> {
    let mut answer = text(StatusCode::BAD_REQUEST, &format!("Bad Request: {reason}\n"));
    answer.headers_mut().insert(
        header::X_CONTENT_TYPE_OPTIONS,
        HeaderValue::from_static("nosniff"),
    );
    answer
}

fn plain_error(status: StatusCode) -> http::Response<Body> {
    let reason = status.canonical_reason().unwrap_or("Error");
    let mut answer = text(status, &format!("{reason}\n"));
    answer.headers_mut().insert(
        header::X_CONTENT_TYPE_OPTIONS,
        HeaderValue::from_static("nosniff"),
    );
    answer
}

fn text(status: StatusCode, body: &str) -> http::Response<Body> {
    let mut answer = http::Response::new(Body::from(body.to_owned()));
    *answer.status_mut() = status;
    answer.headers_mut().insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("text/plain; charset=utf-8"),
    );
    answer
}

/// The debug listener's routes: `/` lists the pages, `/stats` prints every
/// counter as `name: value` (the Go service prints its expvars there),
/// `/rlconfig` the configuration in force, `/settings` (tollgate's) every
/// setting in force by its environment variable.
pub(crate) fn debug_router(pages: DebugPages) -> Router {
    let stats = Arc::clone(&pages.stats);
    let config = Arc::clone(&pages.config);
    let settings = Arc::clone(&pages.settings);
    Router::new()
        .route(
            "/",
            get(|| async {
                text(
                    StatusCode::OK,
                    "/rlconfig: print out the currently loaded configuration for debugging\n\
                     /settings: print out every setting in force, by environment variable\n\
                     /stats: print out stats\n",
                )
            }),
        )
        .route(
            "/stats",
            get(move || {
                let stats = Arc::clone(&stats);
                async move { text(StatusCode::OK, &stats()) }
            }),
        )
        .route(
            "/rlconfig",
            get(move || {
                let config = Arc::clone(&config);
                async move { text(StatusCode::OK, &config()) }
            }),
        )
        .route(
            "/settings",
            get(move || {
                let settings = Arc::clone(&settings);
                async move { text(StatusCode::OK, &settings()) }
            }),
        )
        .fallback(not_found)
}
