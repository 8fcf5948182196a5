//! `GET /admin/top?window=5m&n=20`: the keys most refused and most active
//! in the window, fingerprinted, with their counts, tier and route
//! ([`TopKeys`](crate::observe::top_keys::TopKeys)).

use std::sync::Arc;
use std::time::Duration;

use axum::extract::{Query, State};
use axum::response::{IntoResponse, Response};
use http::StatusCode;
use serde::Deserialize;

use crate::app::App;
use crate::observe::top_keys::MAX_MINUTES;
use crate::request::problem::problem;

/// The most keys one call lists.
const MAX_LISTED: usize = 1000;

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct TopQuery {
    /// The window, as `5m` or `1h`: whole minutes, this one included.
    window: Option<String>,
    /// How many keys each list holds.
    n: Option<usize>,
}

/// The top keys of the window `query` asks for (5 minutes and 20 keys by
/// default); 400 for a window that is not 1 to 60 minutes or an `n` that is
/// not 1 to 1000.
pub(crate) async fn top(
    State(app): State<Arc<App>>,
    query: Result<Query<TopQuery>, axum::extract::rejection::QueryRejection>,
) -> Response {
    let Ok(Query(query)) = query else {
        return problem(
            StatusCode::BAD_REQUEST,
            "the query takes window (as 5m) and n (as 20)",
        );
    };
    let window = match query.window.as_deref().map(humantime::parse_duration) {
        None => Duration::from_secs(300),
        Some(Ok(window)) => window,
        Some(Err(_)) => Duration::ZERO,
    };
    let minutes = window.as_secs().div_ceil(60);
    if window.as_secs() == 0 || minutes > MAX_MINUTES {
        return problem(
            StatusCode::BAD_REQUEST,
            "window must be a span of 1 s to 60 m, as 5m (counted in whole minutes)",
        );
    }
    let n = query.n.unwrap_or(20);
    if !(1..=MAX_LISTED).contains(&n) {
        return problem(StatusCode::BAD_REQUEST, "n must be 1 to 1000");
    }
    match &app.top_keys {
        Some(top_keys) => axum::Json(top_keys.top(minutes, n)).into_response(),
        None => problem(
            StatusCode::NOT_FOUND,
            "the top keys are not counted: [admin] top_keys = false",
        ),
    }
}
