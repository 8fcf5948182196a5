//! The decision endpoint (`[forward_auth] path`): a proxy that asks before it
//! forwards (nginx `auth_request`, Caddy `forward_auth`, Traefik ForwardAuth)
//! sends the original request's headers here, with its URI in the one header
//! `uri_header` names (`X-Forwarded-Uri` by default, as Caddy and Traefik set
//! it; nginx sets whichever its configuration says) and its method in
//! `X-Forwarded-Method`. The gateway decides it with the same routes, plans
//! and route budgets as a proxied request, and answers without forwarding:
//!
//! - allowed: 200 with an empty body and the rate-limit headers, for the
//!   proxy to copy onto its own response;
//! - refused: the 429 a proxied request would get (problem+json,
//!   `Retry-After`, the rate-limit headers), with the status
//!   `refused_status` sets (403 or 401 for nginx);
//! - a CORS preflight (method `OPTIONS` with
//!   `Access-Control-Request-Method`) on a route with `preflight = "pass"`:
//!   200 without headers, using no budget;
//! - anything else exactly as proxying answers it: 401 without an API key, 404
//!   for a URI no route matches, 503 or a pass under the store's failure
//!   policy.
//!
//! Only the headers the asking proxy sets itself may be trusted: it must set
//! (overwrite) `uri_header` and `X-Forwarded-Method`, since a proxy that
//! copies the client's headers would otherwise pass on a client's claim. The
//! client IP of route budgets keyed by IP is the peer's, or what a trusted
//! proxy reports in the forwarding header (`[client_ip]`): list the asking
//! proxy among `trusted_proxies` and have it send `X-Forwarded-For`.

use std::borrow::Cow;
use std::net::SocketAddr;

use axum::body::Body;
use axum::response::Response;
use http::{HeaderMap, HeaderName, StatusCode};

use crate::observe::access_log::Outcome;
use crate::request::admission;
use crate::request::forward_auth_endpoint::ForwardAuth;
use crate::request::path;
use crate::request::problem::problem;
use crate::serve::reloadable::Reloadable;

/// The original request's method, as Caddy and Traefik set it (and nginx by
/// `proxy_set_header X-Forwarded-Method $request_method`).
const X_FORWARDED_METHOD: HeaderName = HeaderName::from_static("x-forwarded-method");

impl ForwardAuth {
    /// The answer to a decision request with `headers` from `peer`;
    /// `outcome` learns the original's route and its decision.
    pub(crate) async fn decide(
        &self,
        stores: admission::Stores<'_>,
        reloadable: &Reloadable,
        headers: &HeaderMap,
        peer: SocketAddr,
        outcome: &mut Outcome,
    ) -> Response {
        let original = match original_path(headers, &self.uri_header) {
            Ok(original) => original,
            Err(reason) => return problem(StatusCode::BAD_REQUEST, reason),
        };
        let route = reloadable.routes.find(&original);
        if route.is_none() && !reloadable.routes.is_empty() {
            return problem(
                StatusCode::NOT_FOUND,
                format!("no route matches {original}"),
            );
        }
        outcome.set_route(route.map_or(&reloadable.demo_route, |route| &route.name));
        if route.is_some_and(|route| route.preflight_passes) && is_preflight(headers) {
            return Response::new(Body::empty());
        }
        let admitted = match admission::admit(stores, reloadable, route, headers, peer, outcome) {
            admission::Answer::Now(admitted) => admitted,
            admission::Answer::Later(admitting) => admitting.finish(outcome).await,
        };
        match admitted {
            Ok(admitted) => {
                let mut response = Response::new(Body::empty());
                admitted.headers.insert_into(response.headers_mut());
                response
            }
            Err(mut refused) => {
                if refused.extensions().get::<admission::Refused>().is_some() {
                    *refused.status_mut() = self.refused_status;
                }
                refused
            }
        }
    }
}

/// Whether the original request is a CORS preflight: `X-Forwarded-Method:
/// OPTIONS` and an `Access-Control-Request-Method` among its headers.
fn is_preflight(headers: &HeaderMap) -> bool {
    let method = headers
        .get(X_FORWARDED_METHOD)
        .and_then(|value| http::Method::from_bytes(value.as_bytes()).ok());
    method.is_some_and(|method| crate::request::handle::is_preflight_of(&method, headers))
}

/// The original request's path in normal form, from `header` (exactly once,
/// an origin-form URI: a path and maybe a query).
fn original_path(
    headers: &HeaderMap,
    header: &HeaderName,
) -> Result<Cow<'static, str>, Cow<'static, str>> {
    let mut values = headers.get_all(header).iter();
    let value = match (values.next(), values.next()) {
        (Some(value), None) => value,
        (None, _) => {
            return Err(format!("a decision request needs the original URI in {header}").into());
        }
        (Some(_), Some(_)) => {
            return Err(format!("the decision request carries two {header} headers").into());
        }
    };
    let uri: http::uri::PathAndQuery = value
        .to_str()
        .ok()
        .filter(|text| text.starts_with('/'))
        .and_then(|text| text.parse().ok())
        .ok_or_else(|| format!("{header} is not a path such as /orders?id=7"))?;
    let normal = path::normalize(uri.path()).map_err(Cow::Borrowed)?;
    Ok(Cow::Owned(normal.into_owned()))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn path_of(headers: &[(&str, &str)]) -> Result<String, String> {
        let mut map = HeaderMap::new();
        for (name, value) in headers {
            map.append(
                HeaderName::from_bytes(name.as_bytes()).unwrap(),
                value.parse().unwrap(),
            );
        }
        original_path(&map, &HeaderName::from_static("x-forwarded-uri"))
            .map(Cow::into_owned)
            .map_err(Cow::into_owned)
    }

    #[test]
    fn the_original_path_comes_from_the_one_header_named() {
        assert_eq!(
            path_of(&[("x-forwarded-uri", "/orders/7?x=1")]),
            Ok("/orders/7".into())
        );
        assert_eq!(
            path_of(&[("x-forwarded-uri", "/a/./b/../c")]),
            Ok("/a/c".into())
        );
        // Another header (a client's own claim passed on) is never read.
        assert_eq!(
            path_of(&[("x-forwarded-uri", "/api"), ("x-original-uri", "/public")]),
            Ok("/api".into())
        );
        assert_eq!(
            path_of(&[("x-original-uri", "/public")]),
            Err("a decision request needs the original URI in x-forwarded-uri".into())
        );
        assert_eq!(
            path_of(&[("x-forwarded-uri", "/a"), ("x-forwarded-uri", "/b")]),
            Err("the decision request carries two x-forwarded-uri headers".into())
        );
        for bad in ["orders", "http://host/orders", "/a b"] {
            assert_eq!(
                path_of(&[("x-forwarded-uri", bad)]),
                Err("x-forwarded-uri is not a path such as /orders?id=7".into()),
                "{bad}"
            );
        }
    }

    #[test]
    fn a_preflight_is_told_by_the_forwarded_method() {
        let headers = |pairs: &[(&'static str, &'static str)]| {
            let mut map = HeaderMap::new();
            for (name, value) in pairs {
                map.append(HeaderName::from_static(name), value.parse().unwrap());
            }
            map
        };
        assert!(is_preflight(&headers(&[
            ("x-forwarded-method", "OPTIONS"),
            ("access-control-request-method", "POST"),
        ])));
        assert!(!is_preflight(&headers(&[(
            "access-control-request-method",
            "POST"
        )])));
        assert!(!is_preflight(&headers(&[(
            "x-forwarded-method",
            "OPTIONS"
        )])));
        assert!(!is_preflight(&headers(&[
            ("x-forwarded-method", "GET"),
            ("access-control-request-method", "POST"),
        ])));
    }
}
