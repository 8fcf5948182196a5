//! The dashboard on the admin listener: one self-contained page
//! (`GET /dashboard`, its HTML, CSS and script embedded in the binary, no
//! network access beyond the admin listener) and the two admin calls only
//! it needs: `GET /admin/summary` (what the configuration puts in force,
//! as `tollgate check-config` says it) and `POST /admin/simulate` (a policy
//! against a traffic pattern, drawn as SVG by `tollgate-simulate`). The
//! page itself holds no data: it asks for the admin token, keeps it in the
//! tab's `sessionStorage` and sends it only in the `Authorization` header.

use std::sync::Arc;
use std::time::Duration;

use axum::extract::State;
use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use bytes::Bytes;
use serde::Deserialize;
use tollgate_simulate::{Pattern, Report, parse_policy, plot, simulate};

use crate::app::App;
use crate::request::problem::problem;

/// The page, as built into the binary.
const PAGE: &str = include_str!("dashboard/index.html");

/// The page's own rules: its inline style and script, calls to the admin
/// listener only, no frames.
const CONTENT_SECURITY_POLICY: &str = "default-src 'none'; script-src 'unsafe-inline'; \
     style-src 'unsafe-inline'; connect-src 'self'; img-src data:; frame-ancestors 'none'";

/// The most a simulation from the dashboard may run: policies, length and
/// steps (it runs beside the admin API, on a blocking thread).
const MOST_POLICIES: usize = 4;
const LONGEST: Duration = Duration::from_secs(24 * 3600);
const MOST_REQUESTS: usize = 1_000_000;

/// `GET /dashboard`: the page.
pub(crate) async fn page() -> Response {
    let mut response = PAGE.into_response();
    let headers = response.headers_mut();
    headers.insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("text/html; charset=utf-8"),
    );
    headers.insert(
        header::CONTENT_SECURITY_POLICY,
        HeaderValue::from_static(CONTENT_SECURITY_POLICY),
    );
    headers.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
    headers.insert(
        header::REFERRER_POLICY,
        HeaderValue::from_static("no-referrer"),
    );
    response
}

/// `GET /admin/summary`: `{"lines": [...], "warnings": [...]}`, what the
/// configuration in force puts in force, one line each, and its warnings,
/// as `tollgate check-config` prints them (no key, token or credential).
pub(crate) async fn summary(State(app): State<Arc<App>>) -> Response {
    let in_force = app.in_force.load();
    let lines = in_force.config.summary();
    let warnings = in_force.config.start_warnings();
    axum::Json(serde_json::json!({ "lines": lines, "warnings": warnings })).into_response()
}

/// A simulation asked for.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct SimulateBody {
    policies: Vec<String>,
    pattern: String,
    duration: Option<String>,
    step: Option<String>,
}

/// `POST /admin/simulate`: the SVG picture of `policies` against `pattern`
/// over `duration` (60 s by default; at most 4 policies, 24 h, 1,000,000 requests and
/// `tollgate-simulate`'s most steps); 400 with the reason otherwise.
pub(crate) async fn simulate_policy(body: Bytes) -> Response {
    let body: SimulateBody = match serde_json::from_slice(&body) {
        Ok(body) => body,
        Err(error) => {
            return problem(
                StatusCode::BAD_REQUEST,
                format!("invalid JSON body: {error}"),
            );
        }
    };
    let drawn = tokio::task::spawn_blocking(move || draw(&body)).await;
    match drawn {
        Ok(Ok(svg)) => {
            let mut response = svg.into_response();
            response.headers_mut().insert(
                header::CONTENT_TYPE,
                HeaderValue::from_static("image/svg+xml"),
            );
            response
        }
        Ok(Err(reason)) => problem(StatusCode::BAD_REQUEST, reason),
        Err(_) => problem(StatusCode::INTERNAL_SERVER_ERROR, "the simulation failed"),
    }
}

fn draw(body: &SimulateBody) -> Result<String, String> {
    if body.policies.is_empty() || body.policies.len() > MOST_POLICIES {
        return Err(format!("policies: give 1 to {MOST_POLICIES}"));
    }
    let policies = body
        .policies
        .iter()
        .map(|text| parse_policy(text))
        .collect::<Result<Vec<_>, _>>()?;
    let span = |text: &str, what: &str| match humantime::parse_duration(text) {
        Ok(span) if !span.is_zero() && span <= LONGEST => Ok(span),
        _ => Err(format!("{what} must be a span from 1 ms to 24 h, as 60s")),
    };
    let duration_text = body.duration.as_deref().unwrap_or("60s");
    let duration = span(duration_text, "duration")?;
    let step = match &body.step {
        Some(step) => span(step, "step")?,
        None => Duration::from_millis(
            u64::try_from(duration.as_millis() / 100)
                .unwrap_or(1)
                .max(1),
        ),
    };
    let pattern = Pattern::parse(&body.pattern).map_err(|error| error.to_string())?;
    let arrivals = pattern
        .arrivals(duration, step)
        .map_err(|error| error.to_string())?;
    if arrivals.times.len() > MOST_REQUESTS {
        return Err(format!(
            "the pattern makes more than {MOST_REQUESTS} requests: shorten it"
        ));
    }
    let runs = simulate(&policies, &arrivals, step).map_err(|error| error.to_string())?;
    let report = Report {
        pattern: &body.pattern,
        requests: arrivals.times.len() as u64,
        duration_ms: u64::try_from(duration.as_millis()).unwrap_or(u64::MAX),
        step_ms: u64::try_from(step.as_millis()).unwrap_or(u64::MAX),
        runs: &runs,
    };
    let titles = report.titles();
    plot::svg(
        &format!("{} over {duration_text}", body.pattern),
        &report.panels(&titles),
        report.step_ms,
    )
    .map_err(|error| error.to_string())
}
