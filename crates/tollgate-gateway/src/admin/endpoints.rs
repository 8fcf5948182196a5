//! The admin API and the operations endpoints, on their own listener.
//!
//! Operations, unauthenticated: `GET /healthz`, `GET /readyz`, `GET /metrics`,
//! and `GET /dashboard` (a page that asks for the admin token, see
//! [`dashboard`](super::dashboard)).
//! Admin, each call with `Authorization: Bearer <token>` (401 otherwise, the
//! token compared in constant time); bodies are JSON and keys travel in bodies,
//! never in paths, so they never reach an access log:
//!
//! | call | body | answer |
//! | --- | --- | --- |
//! | `GET /admin/policy` | | the default policy, or its list of named policies |
//! | `PUT /admin/policy` | a policy, or a list of named policies | the policy (or list) now in force |
//! | `POST /admin/tier` | `{"key", "tier"}` | `{"tier"}` |
//! | `POST /admin/reset` | `{"key"}` | `{"had_state"}` |
//! | `POST /admin/reset` | `{"route", "key" \| "tenant" \| "ip" \| "header"}` | `{"had_state"}` |
//! | `POST /admin/inspect` | `{"key"}` | `{"tier", "policy", "exempt", "tracked", "remaining", "reset_after_s"}` (of the plan's first policy), and for a plan listing several `"policies": [{"name", "policy", "tracked", "remaining", "reset_after_s"}]` |
//! | `POST /admin/inspect` | `{"route", "key" \| "tenant" \| "ip" \| "header"}` | `{"route", "key_kind", "policy", "tracked", "remaining", "reset_after_s"}` |
//!
//! A call with `route` is about the route budget a request on that route
//! would be held to for that value ([`admin_route_budget`](crate::admin::route_budget)).
//! | `GET /admin/stats` | | `{"tracked_keys", "allowed", "rejected"}` |
//! | `GET /admin/summary` | | `{"lines"}`: what the configuration puts in force |
//! | `POST /admin/simulate` | `{"policies", "pattern", "duration", "step"}` | an SVG picture |
//! | `GET /admin/top?window=5m&n=20` | | `{"window_s", "requests", "refusals", "error_bound", "most_refused", "most_active"}`, each list of `{"key", "kind", "count", "error", "tier", "route"}` ([`top`](super::top)) |
//!
//! Invalid input gets 400 with a problem+json body and changes nothing; a body
//! naming a field twice is invalid (never read as its last value).

use std::net::SocketAddr;
use std::sync::Arc;

use axum::Router;
use axum::body::{Body, Bytes};
use axum::extract::{ConnectInfo, Request, State};
use axum::middleware::{self, Next};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use http::header::{AUTHORIZATION, CONTENT_TYPE};
use http::{HeaderValue, StatusCode};
use serde::Deserialize;
use serde::de::{DeserializeOwned, IgnoredAny};
use serde_json::json;
use subtle::ConstantTimeEq;
use tollgate_core::{ApiKey, FailurePolicy, PlanPolicies, Policy, Redacted, StoreError};
use tollgate_tower::Problem;

use crate::admin::route_budget::Target;
use crate::app::App;
use crate::observe::metrics;
use crate::request::problem::{problem, respond};

/// The admin listener's routes.
pub(crate) fn router(app: Arc<App>) -> Router {
    let admin = Router::new()
        .route("/admin/policy", get(get_policy).put(put_policy))
        .route("/admin/tier", post(assign_tier))
        .route("/admin/reset", post(reset))
        .route("/admin/inspect", post(inspect))
        .route("/admin/stats", get(stats))
        .route("/admin/top", get(super::top::top))
        .route("/admin/summary", get(super::dashboard::summary))
        .route("/admin/simulate", post(super::dashboard::simulate_policy))
        .route_layer(middleware::from_fn_with_state(
            Arc::clone(&app),
            authenticate,
        ));
    Router::new()
        .route("/healthz", get(|| async { "ok\n" }))
        .route("/readyz", get(ready))
        .route("/metrics", get(render_metrics))
        .route("/dashboard", get(super::dashboard::page))
        .merge(admin)
        .fallback(|| async { problem(StatusCode::NOT_FOUND, "no such admin endpoint") })
        .method_not_allowed_fallback(|| async {
            problem(
                StatusCode::METHOD_NOT_ALLOWED,
                "this admin endpoint does not take that method",
            )
        })
        .with_state(app)
}

async fn authenticate(
    State(app): State<Arc<App>>,
    ConnectInfo(peer): ConnectInfo<SocketAddr>,
    request: Request,
    next: Next,
) -> Response {
    // An address that used up its failed calls is not heard until it waits.
    if let Some(wait) = app.admin_guard.wait_for(peer.ip()) {
        return respond(Problem::too_many_requests(
            "failed admin calls from this address",
            wait,
        ));
    }
    let presented = request
        .headers()
        .get(AUTHORIZATION)
        .and_then(|value| value.to_str().ok())
        .and_then(|value| {
            let (scheme, token) = value.trim().split_once(char::is_whitespace)?;
            scheme.eq_ignore_ascii_case("bearer").then(|| token.trim())
        });
    let accepted = match (app.admin_token(), presented) {
        (Some(expected), Some(presented)) => {
            bool::from(expected.as_bytes().ct_eq(presented.as_bytes()))
        }
        _ => false,
    };
    if !accepted {
        if app.admin_guard.failed(peer.ip()) {
            tracing::warn!(
                path = %request.uri().path(),
                "admin call refused: missing or wrong token (logged at most once a second)"
            );
        }
        let mut response = problem(
            StatusCode::UNAUTHORIZED,
            "a valid admin bearer token is required",
        );
        response.headers_mut().insert(
            http::header::WWW_AUTHENTICATE,
            HeaderValue::from_static("Bearer"),
        );
        return response;
    }
    next.run(request).await
}

/// `/readyz`: 503 while draining; when no part of the store can decide,
/// 503 under `fail_closed` (every request would get 503) and 200 "degraded"
/// under `fail_open` (requests pass unlimited), each with the reason. When
/// part of a Redis Cluster answers, 200 "degraded" with the share: every
/// gateway shares the cluster, so taking this one out of service would move
/// its clients to gateways no better off; the keys of the slots that do not
/// answer follow the failure policy.
async fn ready(State(app): State<Arc<App>>) -> Response {
    if app.is_draining() {
        return problem(StatusCode::SERVICE_UNAVAILABLE, "shutting down");
    }
    let reach = app.store.reach().await;
    metrics::record_store_up(reach.as_ref().map_or(0.0, |reach| reach.share()));
    let failure = app.reloadable.load().failure;
    match (reach, failure) {
        (Ok(reach), _) if reach.is_whole() => Response::new(Body::from("ready\n")),
        (Ok(reach), failure) => Response::new(Body::from(format!(
            "degraded: {} of {} hash slots of the Redis Cluster answer; keys in the others {}\n",
            reach.answering,
            reach.of,
            match failure {
                FailurePolicy::FailClosed => "get 503 (fail_closed)",
                FailurePolicy::FailOpen => "pass unlimited (fail_open)",
            }
        ))),
        (Err(error), FailurePolicy::FailClosed) => problem(
            StatusCode::SERVICE_UNAVAILABLE,
            format!("not ready: {error}; requests get 503 (fail_closed)"),
        ),
        (Err(error), FailurePolicy::FailOpen) => Response::new(Body::from(format!(
            "degraded: {error}; requests pass unlimited (fail_open)\n"
        ))),
    }
}

async fn render_metrics(State(app): State<Arc<App>>) -> Response {
    if let Ok(stats) = app.store.stats().await {
        metrics::record_tracked_keys(stats.tracked_keys);
    }
    let mut response = Response::new(Body::from(metrics::handle().render()));
    response.headers_mut().insert(
        CONTENT_TYPE,
        HeaderValue::from_static("text/plain; version=0.0.4"),
    );
    response
}

async fn get_policy(State(app): State<Arc<App>>) -> Result<Response, AdminError> {
    Ok(json_response(&app.store.default_plan().await?))
}

async fn put_policy(State(app): State<Arc<App>>, body: Bytes) -> Result<Response, AdminError> {
    // Checked to be one JSON document first, then read as the document itself
    // (not through a `Value`, which would keep the last of a duplicated field).
    let _: IgnoredAny = parse(&body)?;
    let plan = PlanPolicies::from_deserializer(&mut serde_json::Deserializer::from_slice(&body))
        .map_err(|error| AdminError::bad_request(format!("invalid policy: {error}")))?;
    let plan = match plan {
        PlanPolicies::One(policy) => PlanPolicies::One(app.store.configure(policy).await?),
        list => app.store.configure_plan(list).await?,
    };
    // As the answer shows it (JSON), not in Rust's Debug form.
    let shown = serde_json::to_string(&plan).unwrap_or_default();
    tracing::info!(plan = %shown, "default policy replaced");
    Ok(json_response(&plan))
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct TierBody {
    key: String,
    tier: String,
}

async fn assign_tier(State(app): State<Arc<App>>, body: Bytes) -> Result<Response, AdminError> {
    let body: TierBody = parse(&body)?;
    let key = key(&body.key)?;
    app.store.assign_tier(key, &body.tier).await?;
    tracing::info!(key = %Redacted(key), tier = %body.tier, "tier assigned");
    Ok(json_response(&json!({ "tier": body.tier })))
}

async fn reset(State(app): State<Arc<App>>, body: Bytes) -> Result<Response, AdminError> {
    let body: Target = parse(&body)?;
    let reloadable = app.reloadable.load_full();
    if let Some(budget) = body
        .route_budget(&reloadable)
        .map_err(AdminError::bad_request)?
    {
        let before = budget.look(app.store.as_ref()).await?;
        budget.reset(app.store.as_ref()).await?;
        let had_state = !before.decision.reset_after.is_zero();
        return Ok(json_response(&json!({ "had_state": had_state })));
    }
    let key = key(plan_key(&body)?)?;
    let had_state = app.store.reset(key).await?;
    tracing::info!(key = %Redacted(key), had_state, "key reset");
    Ok(json_response(&json!({ "had_state": had_state })))
}

async fn inspect(State(app): State<Arc<App>>, body: Bytes) -> Result<Response, AdminError> {
    let body: Target = parse(&body)?;
    let reloadable = app.reloadable.load_full();
    if let Some(budget) = body
        .route_budget(&reloadable)
        .map_err(AdminError::bad_request)?
    {
        let look = budget.look(app.store.as_ref()).await?;
        let decision = look.decision;
        return Ok(json_response(&json!({
            "route": body.route,
            "key_kind": budget.kind.label(),
            "policy": budget.budget.budget.policy(),
            "tracked": !decision.reset_after.is_zero(),
            "remaining": decision.remaining,
            "reset_after_s": decision.reset_after_seconds(),
        })));
    }
    let report = app.store.inspect(key(plan_key(&body)?)?).await?;
    let (remaining, reset_after_s) = match (&report.policy, &report.state) {
        (None, _) => (None, 0),
        (Some(_), Some(state)) => (state.remaining, state.reset_after_seconds()),
        (Some(policy), None) => (Some(policy.capacity()), 0),
    };
    let mut answer = json!({
        "tier": report.tier,
        "policy": report.policy,
        "exempt": report.policy.is_none(),
        "tracked": report.state.is_some() && report.policy.is_some(),
        "remaining": remaining,
        "reset_after_s": reset_after_s,
    });
    // A plan listing several policies: every one of them, the first too.
    if let (Some(name), Some(policy), Some(fields)) =
        (&report.policy_name, report.policy, answer.as_object_mut())
    {
        let first = policy_report(name, &policy, report.state.as_ref());
        let further = report
            .further
            .iter()
            .map(|further| policy_report(&further.name, &further.policy, further.state.as_ref()));
        fields.insert(
            "policies".to_owned(),
            std::iter::once(first).chain(further).collect(),
        );
    }
    Ok(json_response(&answer))
}

/// One policy of a plan listing several, as inspect reports it:
/// `{"name", "policy", "tracked", "remaining", "reset_after_s"}`.
fn policy_report(
    name: &str,
    policy: &Policy,
    state: Option<&tollgate_core::Decision>,
) -> serde_json::Value {
    let (remaining, reset_after_s) = match state {
        Some(state) => (state.remaining, state.reset_after_seconds()),
        None => (Some(policy.capacity()), 0),
    };
    json!({
        "name": name,
        "policy": policy,
        "tracked": state.is_some(),
        "remaining": remaining,
        "reset_after_s": reset_after_s,
    })
}

async fn stats(State(app): State<Arc<App>>) -> Result<Response, AdminError> {
    let stats = app.store.stats().await?;
    // u128 totals: written as exact JSON integers.
    let body = format!(
        "{{\"tracked_keys\":{},\"allowed\":{},\"rejected\":{}}}\n",
        stats.tracked_keys, stats.allowed, stats.rejected
    );
    Ok(with_json_type(Response::new(Body::from(body))))
}

/// An admin call that failed: a problem+json response.
struct AdminError {
    status: StatusCode,
    detail: String,
}

impl AdminError {
    fn bad_request(detail: impl Into<String>) -> Self {
        AdminError {
            status: StatusCode::BAD_REQUEST,
            detail: detail.into(),
        }
    }
}

impl From<StoreError> for AdminError {
    fn from(error: StoreError) -> Self {
        let status = match error {
            StoreError::UnknownTier(_) | StoreError::Policy(_) => StatusCode::BAD_REQUEST,
            StoreError::Unavailable(_) => StatusCode::SERVICE_UNAVAILABLE,
        };
        AdminError {
            status,
            detail: error.to_string(),
        }
    }
}

impl IntoResponse for AdminError {
    fn into_response(self) -> Response {
        problem(self.status, self.detail)
    }
}

/// Reads a body; the bodies are structs read straight from the document, so a
/// duplicated field is refused (`duplicate field `key``).
fn parse<T: DeserializeOwned>(body: &[u8]) -> Result<T, AdminError> {
    serde_json::from_slice(body)
        .map_err(|error| AdminError::bad_request(format!("invalid JSON body: {error}")))
}

/// The API key of a call about a plan.
fn plan_key(body: &Target) -> Result<&str, AdminError> {
    body.key.as_deref().ok_or_else(|| {
        AdminError::bad_request("missing field `key` (or `route` for a route budget)")
    })
}

fn key(raw: &str) -> Result<&str, AdminError> {
    ApiKey::parse(raw)
        .map(|key| key.as_str())
        .ok_or_else(|| AdminError::bad_request("key must be a non-empty API key"))
}

fn json_response<T: serde::Serialize>(value: &T) -> Response {
    let mut body = serde_json::to_vec(value).unwrap_or_default();
    body.push(b'\n');
    with_json_type(Response::new(Body::from(body)))
}

fn with_json_type(mut response: Response) -> Response {
    response
        .headers_mut()
        .insert(CONTENT_TYPE, HeaderValue::from_static("application/json"));
    response
}
