//! Forwarding a request to its upstream and the response back, streaming both
//! bodies, with hop-by-hop headers removed (RFC 9110 section 7.6.1); 502 when
//! the upstream cannot be reached, 504 when it does not answer in time.

use std::sync::Arc;
use std::time::Duration;

use axum::body::Body;
use axum::response::Response;
use http::header::{CONTENT_LENGTH, HOST, HeaderName, TRANSFER_ENCODING};
use http::{HeaderMap, HeaderValue, Request, StatusCode, Uri, Version};
use hyper_util::client::legacy::connect::HttpConnector;

use super::body_timeout::IdleTimeout;
use super::client::ClientConnection;
use super::client_body::ClientBody;
use super::config::UpstreamConfig;
use super::hop_by_hop::remove_hop_by_hop;
use super::metrics::{UpstreamFailure, record_client_body_error, record_upstream_failure};
use super::problem::problem;
use super::routes::Route;
use super::upstream::UpstreamConnections;

/// The HTTP client to the upstreams of one worker: its keep-alive
/// connections (see [`UpstreamConnections`]).
#[derive(Clone, Debug)]
pub(crate) struct Proxy {
    connections: Arc<UpstreamConnections>,
}

impl Proxy {
    /// A client whose connections give up connecting after `connect_timeout`;
    /// its sweep of idle connections runs on the current reloadable.
    pub(crate) fn new(connect_timeout: Duration) -> Self {
        let mut connector = HttpConnector::new();
        connector.set_connect_timeout(Some(connect_timeout));
        connector.set_nodelay(true);
        // `https://` upstreams too: TLS goes over the TCP connection made.
        connector.enforce_http(false);
        let connections = Arc::new(UpstreamConnections::new(connector));
        UpstreamConnections::start_sweeping(&connections);
        Proxy { connections }
    }

    /// Sends `request` of `client` to `route`'s upstream, waiting at most
    /// `limits.timeout` for the response headers (connecting and the client's
    /// upload of the request body included), and at most
    /// `limits.body_idle_timeout` for each later part of the response body.
    pub(crate) async fn forward(
        &self,
        client: &ClientConnection,
        route: &Route,
        mut request: Request<Body>,
        limits: &UpstreamConfig,
    ) -> Response {
        let timeout = limits.timeout;
        let path_and_query = match route.upstream_path_and_query(request.uri()) {
            Ok(path_and_query) => path_and_query,
            Err(error) => {
                return problem(
                    StatusCode::BAD_REQUEST,
                    format!("cannot map the path: {error}"),
                );
            }
        };
        let client_version = request.version();
        let original_host = request.headers().get(HOST).cloned().or_else(|| {
            // HTTP/2 clients name the host in the URI, not in `Host`.
            let authority = request.uri().authority()?;
            HeaderValue::from_str(authority.as_str()).ok()
        });
        let headers = request.headers_mut();
        // (hyper's server has already dropped a request's `Content-Length`
        // beside `Transfer-Encoding`; its client has not, for responses.)
        remove_hop_by_hop(headers);
        headers.insert(HOST, route.upstream.host.clone());
        append_forwarded_for(headers, &client.forwarded_for);
        if let Some(host) = original_host {
            headers.insert(HeaderName::from_static("x-forwarded-host"), host);
        }
        headers.insert(
            HeaderName::from_static("x-forwarded-proto"),
            client.forwarded_proto.clone(),
        );
        *request.uri_mut() = Uri::from(path_and_query);
        *request.version_mut() = Version::HTTP_11;
        let client_body = ClientBody::watch(request.body_mut());
        let exchange = self.connections.send(&route.upstream, request);
        match tokio::time::timeout(timeout, exchange).await {
            Ok(Ok(mut response)) => {
                remove_hop_by_hop(response.headers_mut());
                drop_length_beside_transfer_encoding(response.headers_mut());
                // The client's protocol, not the upstream's: an HTTP/1.0
                // upstream must not end the client's keep-alive.
                *response.version_mut() = client_version;
                response.map(|body| {
                    let route = Arc::clone(&route.name);
                    Body::new(IdleTimeout::new(body, limits.body_idle_timeout, route))
                })
            }
            Ok(Err(_)) if client_body.failed() => {
                record_client_body_error(&route.name);
                problem(
                    StatusCode::BAD_REQUEST,
                    "the request body is malformed or was cut off",
                )
            }
            Ok(Err(error)) => {
                tracing::warn!(route = %route.name, %error, "upstream unreachable");
                record_upstream_failure(&route.name, UpstreamFailure::Unreachable);
                problem(
                    StatusCode::BAD_GATEWAY,
                    format!("the upstream of {} could not be reached", route.name),
                )
            }
            Err(_) => {
                tracing::warn!(route = %route.name, ?timeout, "upstream timed out");
                record_upstream_failure(&route.name, UpstreamFailure::Timeout);
                problem(
                    StatusCode::GATEWAY_TIMEOUT,
                    format!(
                        "the upstream of {} did not answer within {}",
                        route.name,
                        humantime::format_duration(timeout)
                    ),
                )
            }
        }
    }
}

/// Drops `Content-Length` from a message that also carries
/// `Transfer-Encoding`: the body was framed by the latter, and an
/// intermediary must not pass both on (RFC 9112 section 6.3).
fn drop_length_beside_transfer_encoding(headers: &mut HeaderMap) {
    if headers.contains_key(TRANSFER_ENCODING) {
        headers.remove(CONTENT_LENGTH);
    }
}

/// Appends the client's address (as text) to `X-Forwarded-For` (every line of
/// it, in order).
fn append_forwarded_for(headers: &mut HeaderMap, client: &HeaderValue) {
    let name = HeaderName::from_static("x-forwarded-for");
    let existing: Vec<&str> = headers
        .get_all(&name)
        .iter()
        .filter_map(|value| value.to_str().ok())
        .map(str::trim)
        .filter(|value| !value.is_empty())
        .collect();
    if existing.is_empty() {
        headers.insert(name, client.clone());
        return;
    }
    let client = client.to_str().unwrap_or_default();
    let chain = format!("{}, {client}", existing.join(", "));
    if let Ok(value) = HeaderValue::from_str(&chain) {
        headers.insert(name, value);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_length_beside_transfer_encoding_goes() {
        let mut both = HeaderMap::new();
        both.insert("content-length", HeaderValue::from_static("3"));
        both.insert("transfer-encoding", HeaderValue::from_static("chunked"));
        drop_length_beside_transfer_encoding(&mut both);
        let names: Vec<&str> = both.keys().map(HeaderName::as_str).collect();
        assert_eq!(names, ["transfer-encoding"]);
        let mut length_only = HeaderMap::new();
        length_only.insert("content-length", HeaderValue::from_static("3"));
        drop_length_beside_transfer_encoding(&mut length_only);
        assert_eq!(length_only["content-length"], "3");
    }

    #[test]
    fn the_client_is_appended_to_x_forwarded_for() {
        let mut headers = HeaderMap::new();
        append_forwarded_for(&mut headers, &HeaderValue::from_static("192.0.2.7"));
        assert_eq!(headers["x-forwarded-for"], "192.0.2.7");
        append_forwarded_for(&mut headers, &HeaderValue::from_static("10.0.0.1"));
        assert_eq!(headers["x-forwarded-for"], "192.0.2.7, 10.0.0.1");
        headers.append("x-forwarded-for", HeaderValue::from_static("198.51.100.7"));
        append_forwarded_for(&mut headers, &HeaderValue::from_static("10.0.0.2"));
        assert_eq!(
            headers["x-forwarded-for"],
            "192.0.2.7, 10.0.0.1, 198.51.100.7, 10.0.0.2"
        );
        assert_eq!(headers.get_all("x-forwarded-for").iter().count(), 1);
    }
}
