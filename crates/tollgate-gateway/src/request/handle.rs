//! The entry of every request to the gateway's listener ([`handle`]): its
//! path put in normal form, the decision endpoint, the route, the CORS
//! preflight, admission (the limits), then forwarding (or the demo backend),
//! and its access-log line once the response body is done.

use std::borrow::Cow;
use std::sync::Arc;

use axum::extract::Request;
use axum::response::Response;
use http::{Method, StatusCode};

use crate::app::Worker;
use crate::observe::access_log::Outcome;
use crate::proxy::demo;
use crate::request::problem::problem;
use crate::request::rate_limit_headers::RateLimitHeaders;
use crate::request::{admission, charge, in_flight, path};
use crate::serve::client::ClientConnection;

/// Every request to the gateway's listener, from `client`; its access log
/// line is sent once its response body is done.
pub(crate) async fn handle(
    worker: Worker,
    client: Arc<ClientConnection>,
    request: Request,
) -> Response {
    let Some(access_log) = worker.app.access_log.clone() else {
        return answer(worker, client, request, &mut Outcome::new(false)).await;
    };
    let arrival = access_log.arrival(&request);
    let mut outcome = Outcome::new(true);
    let response = answer(worker, client, request, &mut outcome).await;
    access_log.follow(arrival, outcome, response)
}

/// The answer to `request`; `outcome` learns its route and decision.
async fn answer(
    Worker { app, proxy }: Worker,
    client: Arc<ClientConnection>,
    request: Request,
    outcome: &mut Outcome,
) -> Response {
    if request.method() == Method::CONNECT {
        // A tunnel is not an API request: nothing to limit or to route.
        return problem(
            StatusCode::NOT_IMPLEMENTED,
            "tollgate is a reverse proxy and does not open tunnels (CONNECT)",
        );
    }
    if let Some(reason) = host_problem(&request) {
        return problem(StatusCode::BAD_REQUEST, reason);
    }
    let peer = client.peer;
    let reloadable = app.reloadable.load_full();
    let mut request = request;
    // Routes see, and upstreams get, the path in one normal form.
    match path::normalize(request.uri().path()) {
        Ok(Cow::Borrowed(_)) => {}
        Ok(Cow::Owned(normal)) => match with_path(request.uri(), &normal) {
            Some(uri) => *request.uri_mut() = uri,
            None => return bad_request("the path cannot be read"),
        },
        Err(reason) => return bad_request(reason),
    }
    // Decisions for proxies that ask first, at the path in normal form.
    if let Some(forward_auth) = &reloadable.forward_auth
        && request.uri().path() == forward_auth.path
    {
        return forward_auth
            .decide(
                admission::Stores {
                    store: &app.store,
                    slots: None,
                    waiting: &app.waiting,
                    top_keys: app.top_keys.as_ref(),
                },
                &reloadable,
                request.headers(),
                peer,
                outcome,
            )
            .await;
    }
    let route = reloadable.routes.find(request.uri().path());
    if route.is_none() && !reloadable.routes.is_empty() {
        let detail = format!("no route matches {}", request.uri().path());
        return problem(StatusCode::NOT_FOUND, detail);
    }
    outcome.set_route(route.map_or(&reloadable.demo_route, |route| &route.name));
    let admitted = if route.is_some_and(|route| route.preflight_passes) && is_preflight(&request) {
        // Passed on without a key or budget (`preflight = "pass"`).
        RateLimitHeaders::default().into()
    } else {
        let stores = admission::Stores {
            store: &app.store,
            slots: Some(&app.slots),
            waiting: &app.waiting,
            top_keys: app.top_keys.as_ref(),
        };
        // Most requests are answered at once, building no future.
        let answer = admission::admit(stores, &reloadable, route, request.headers(), peer, outcome);
        let admitted = match answer {
            admission::Answer::Now(admitted) => admitted,
            admission::Answer::Later(admitting) => admitting.finish(outcome).await,
        };
        match admitted {
            Ok(admitted) => admitted,
            Err(response) => return response,
        }
    };
    let mut admitted = admitted;
    if let Some(settlement) = admitted.settlement.as_mut()
        && !tollgate_tower::can_send_trailers(
            request.method(),
            request.version(),
            request.headers(),
        )
    {
        // No body (HEAD) or no chunked body (HTTP/1.0): no trailers.
        settlement.trailers = None;
    }
    let mut response = match route {
        Some(route) => {
            outcome.forwarded = true;
            proxy
                .forward(&client, route, request, &reloadable.upstream)
                .await
        }
        None => demo::respond(&request),
    };
    admitted.headers.insert_into(response.headers_mut());
    let response =
        charge::settle_when_done(response, admitted.settlement.map(|settlement| *settlement));
    in_flight::hold_until_done(response, admitted.slot)
}

/// Whether `request` is a CORS preflight (the Fetch standard): `OPTIONS`
/// with `Access-Control-Request-Method`.
fn is_preflight(request: &Request) -> bool {
    is_preflight_of(request.method(), request.headers())
}

/// Whether a request of `method` with `headers` is a CORS preflight.
pub(crate) fn is_preflight_of(method: &Method, headers: &http::HeaderMap) -> bool {
    method == Method::OPTIONS && headers.contains_key(http::header::ACCESS_CONTROL_REQUEST_METHOD)
}

/// Why an HTTP/1.1 request's `Host` makes it unanswerable, if it does: RFC
/// 9112 section 3.2 requires exactly one `Host` header line in HTTP/1.1 (a
/// server answers 400 otherwise). HTTP/1.0 may omit it; HTTP/2 carries
/// `:authority` instead.
fn host_problem(request: &Request) -> Option<&'static str> {
    if request.version() != http::Version::HTTP_11 {
        return None;
    }
    match request.headers().get_all(http::header::HOST).iter().count() {
        1 => None,
        0 => Some("an HTTP/1.1 request needs a Host header (RFC 9112 section 3.2)"),
        _ => Some("the request carries two Host headers (RFC 9112 section 3.2)"),
    }
}

/// `uri` with its path replaced by `path` (the query kept).
fn with_path(uri: &http::Uri, path: &str) -> Option<http::Uri> {
    let path_and_query = match uri.query() {
        Some(query) => format!("{path}?{query}"),
        None => path.to_owned(),
    };
    let mut parts = uri.clone().into_parts();
    parts.path_and_query = Some(path_and_query.parse().ok()?);
    http::Uri::from_parts(parts).ok()
}

fn bad_request(detail: &str) -> Response {
    problem(StatusCode::BAD_REQUEST, detail)
}
