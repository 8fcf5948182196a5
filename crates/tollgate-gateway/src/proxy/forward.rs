//! Forwarding a request to its upstream and the response back, streaming both
//! bodies, with hop-by-hop headers removed (RFC 9110 section 7.6.1); 502 when
//! the upstream cannot be reached, 504 when it does not answer in time. A
//! WebSocket upgrade goes on a connection of its own and, once both sides
//! have switched, becomes a tunnel (`upgrade.rs`).

use std::pin::pin;
use std::sync::Arc;
use std::time::{Duration, Instant};

use axum::body::Body;
use axum::response::Response;
use http::header::Entry;
use http::header::{CONTENT_LENGTH, HOST, HeaderName, TRANSFER_ENCODING, UPGRADE};
use http::{HeaderMap, HeaderValue, Request, StatusCode, Uri, Version};
use hyper::body::Incoming;
use hyper::client::conn::http1::SendRequest;
use hyper::upgrade::OnUpgrade;
use hyper_util::client::legacy::connect::HttpConnector;
use tollgate_serve::{Connections, InFlight};

use crate::config::UpstreamConfig;
use crate::observe::metrics::{UpstreamFailure, record_client_body_error, record_upstream_failure};
use crate::proxy::body_timeout::IdleTimeout;
use crate::proxy::client_body::ClientBody;
use crate::proxy::hop_by_hop::remove_hop_by_hop;
use crate::proxy::upgrade::{TunnelLog, keep_upgrade_headers, tunnel, websocket_upgrade};
use crate::proxy::upstream::{
    BoxError, ReturnWhenDone, SendError, UpstreamConnections, UpstreamTarget,
};
use crate::request::problem::problem;
use crate::request::routes::Route;
use crate::serve::client::ClientConnection;

/// The HTTP client to the upstreams of one worker: its keep-alive
/// connections (see [`UpstreamConnections`]).
#[derive(Clone, Debug)]
pub(crate) struct Proxy {
    connections: Arc<UpstreamConnections>,
}

impl Proxy {
    /// A client whose connections give up connecting after `connect_timeout`;
    /// its sweep of idle connections runs on the current reloadable. Out of
    /// file descriptors, it sheds the oldest idle of `clients`.
    pub(crate) fn new(connect_timeout: Duration, clients: Arc<Connections>) -> Self {
        let mut connector = HttpConnector::new();
        connector.set_connect_timeout(Some(connect_timeout));
        connector.set_nodelay(true);
        // `https://` upstreams too: TLS goes over the TCP connection made.
        connector.enforce_http(false);
        let connections = Arc::new(UpstreamConnections::new(
            connector,
            connect_timeout,
            clients,
        ));
        UpstreamConnections::start_sweeping(&connections);
        Proxy { connections }
    }

    /// Sends `request` of `client` to `route`'s upstream (the server whose
    /// turn it is, or the next that takes a connection), waiting at most
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
        let upgrade = websocket_upgrade(&request);
        let client_upgrade = upgrade.is_some().then(|| hyper::upgrade::on(&mut request));
        let original_host = request.headers().get(HOST).cloned().or_else(|| {
            // HTTP/2 clients name the host in the URI, not in `Host`.
            let authority = request.uri().authority()?;
            HeaderValue::from_str(authority.as_str()).ok()
        });
        let headers = request.headers_mut();
        // (hyper's server has already dropped a request's `Content-Length`
        // beside `Transfer-Encoding`; its client has not, for responses.)
        remove_hop_by_hop(headers);
        if let Some(protocol) = upgrade {
            keep_upgrade_headers(headers, protocol);
        }
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
        if let Some(client_upgrade) = client_upgrade {
            return self
                .forward_upgrade(route, request, (client_upgrade, client), limits)
                .await;
        }
        let client_body = ClientBody::watch(request.body_mut());
        let mut tried = None;
        let answered = {
            // Pinned where it is made, so the timeout holds only a pointer
            // to it rather than moving it.
            let exchange = pin!(self.send(route, request, Kind::Plain, limits.backoff, &mut tried));
            client.upstream_timer.timeout(timeout, exchange).await
        };
        match answered {
            Ok(Ok((Answer::Plain(response), server)))
                if response.status() == StatusCode::SWITCHING_PROTOCOLS =>
            {
                // RFC 9110 section 15.2.2: a server switches only to a
                // protocol the request's `Upgrade` asked for, and this one
                // asked for none; over HTTP/2 a 101 is no answer at all (RFC
                // 9113 section 8.6).
                record_upstream_failure(
                    &route.name,
                    &server.server,
                    UpstreamFailure::SwitchedUnasked,
                );
                tracing::warn!(route = %route.name, "the upstream switched protocols unasked");
                problem(
                    StatusCode::BAD_GATEWAY,
                    format!("the upstream of {} switched protocols unasked", route.name),
                )
            }
            Ok(Ok((Answer::Plain(response), server))) => {
                passed_on(response, client_version, route, server, limits)
            }
            // (A plain request gets a plain answer.)
            Ok(Ok((Answer::Upgrade(..), _))) => unreachable(route, "an upgrade answer".into()),
            Ok(Err(Failed::Exchange(..))) if client_body.failed() => {
                record_client_body_error(&route.name);
                problem(
                    StatusCode::BAD_REQUEST,
                    "the request body is malformed or was cut off",
                )
            }
            Ok(Err(failed)) => failed_exchange(route, failed, tried),
            Err(_) => timed_out(route, timeout, tried),
        }
    }

    /// Sends `request`, a WebSocket upgrade of a client whose connection
    /// switches with `client_upgrade`, to `route`'s upstream over a
    /// connection of its own. A 101 goes back to the client, and the two
    /// connections are joined once both have switched, until either side
    /// closes or nothing goes either way for `limits.body_idle_timeout`;
    /// any other answer goes back as a plain response. The tunnel holds the
    /// client's connection in flight for its whole life: it is never closed
    /// as idle or shed under it (its own idle timeout closes it).
    async fn forward_upgrade(
        &self,
        route: &Route,
        request: Request<Body>,
        (client_upgrade, client): (OnUpgrade, &ClientConnection),
        limits: &UpstreamConfig,
    ) -> Response {
        let mut tried = None;
        let exchange = self.send(route, request, Kind::Upgrade, limits.backoff, &mut tried);
        let answered = tokio::time::timeout(limits.timeout, exchange).await;
        let (mut response, sender, server) = match answered {
            Ok(Ok((Answer::Upgrade(response, sender), server))) => (response, sender, server),
            Ok(Ok((Answer::Plain(response), server))) => {
                return passed_on(response, Version::HTTP_11, route, server, limits);
            }
            Ok(Err(failed)) => return failed_exchange(route, failed, tried),
            Err(_) => return timed_out(route, limits.timeout, tried),
        };
        if response.status() != StatusCode::SWITCHING_PROTOCOLS {
            // Declined: the connection closes after this response.
            drop(sender);
            return passed_on(response, Version::HTTP_11, route, server, limits);
        }
        let upstream_upgrade = hyper::upgrade::on(&mut response);
        let protocol = response.headers().get(UPGRADE).cloned();
        remove_hop_by_hop(response.headers_mut());
        if let Some(protocol) = protocol {
            keep_upgrade_headers(response.headers_mut(), protocol);
        }
        let route_name = Arc::clone(&route.name);
        let idle_timeout = limits.body_idle_timeout;
        // Whoever reads the 101 (the access log) sets what to do when the
        // tunnel ends.
        let log = TunnelLog::default();
        let tunnel_log = log.clone();
        let in_flight = InFlight::start(&client.activity);
        tokio::spawn(async move {
            let _in_flight = in_flight;
            tunnel(
                client_upgrade,
                upstream_upgrade,
                idle_timeout,
                route_name,
                tunnel_log,
            )
            .await;
            drop(sender);
        });
        let (parts, _) = response.into_parts();
        let mut response = Response::from_parts(parts, Body::empty());
        response.extensions_mut().insert(log);
        response
    }

    /// Sends `request` to the servers of `route` in the order of
    /// [`Servers::attempts`](crate::proxy::servers::Servers::attempts), its `Host`
    /// set for each, until one takes a connection: a server that does not
    /// is counted (`unreachable`) and put in back-off for `backoff`, and the
    /// request, never written, goes to the next. `tried` names the server
    /// tried last (for a timeout's metric). `Ok` holds the answer and the
    /// server that gave it.
    async fn send<'r>(
        &self,
        route: &'r Route,
        mut request: Request<Body>,
        kind: Kind,
        backoff: Duration,
        tried: &mut Option<&'r Arc<UpstreamTarget>>,
    ) -> Result<(Answer, &'r Arc<UpstreamTarget>), Failed> {
        let mut refused = None;
        for target in route.servers.attempts() {
            *tried = Some(target);
            request.headers_mut().insert(HOST, target.host.clone());
            let sent = match kind {
                Kind::Plain => self
                    .connections
                    .send(target, request)
                    .await
                    .map(Answer::Plain),
                Kind::Upgrade => self
                    .connections
                    .send_upgrade(target, request)
                    .await
                    .map(|(response, sender)| Answer::Upgrade(response, sender)),
            };
            match sent {
                Ok(answer) => {
                    target.health.mark_up();
                    return Ok((answer, target));
                }
                Err(SendError::Connect(unsent, error)) => {
                    tracing::warn!(route = %route.name, server = %target.server, %error, "cannot connect to the upstream server");
                    record_upstream_failure(
                        &route.name,
                        &target.server,
                        UpstreamFailure::Unreachable,
                    );
                    target.health.mark_down(Instant::now(), backoff);
                    request = *unsent;
                    refused = Some(error);
                }
                Err(SendError::Exchange(error)) => return Err(Failed::Exchange(error)),
            }
        }
        Err(Failed::NoConnection(
            refused.unwrap_or_else(|| "the route has no server".into()),
        ))
    }
}

/// What a request is sent as.
#[derive(Clone, Copy)]
enum Kind {
    Plain,
    Upgrade,
}

/// A server's answer to a request sent as a [`Kind`].
enum Answer {
    Plain(http::Response<ReturnWhenDone>),
    /// The response, and its connection's sender, held until the upgrade
    /// is done.
    Upgrade(http::Response<Incoming>, SendRequest<Body>),
}

/// Why a request got no answer.
enum Failed {
    /// No server took a connection (each counted already).
    NoConnection(BoxError),
    /// The exchange failed on a connection.
    Exchange(BoxError),
}

/// The upstream's `response` as the client gets it: hop-by-hop headers
/// removed, in the client's protocol, its body cut off after a pause longer
/// than `limits.body_idle_timeout`.
fn passed_on<B>(
    mut response: http::Response<B>,
    client_version: Version,
    route: &Route,
    server: &UpstreamTarget,
    limits: &UpstreamConfig,
) -> Response
where
    B: http_body::Body<Data = bytes::Bytes> + Unpin + Send + 'static,
    B::Error: Into<BoxError>,
{
    remove_hop_by_hop(response.headers_mut());
    drop_length_beside_transfer_encoding(response.headers_mut());
    // The client's protocol, not the upstream's: an HTTP/1.0
    // upstream must not end the client's keep-alive.
    *response.version_mut() = client_version;
    response.map(|body| {
        let route = Arc::clone(&route.name);
        let server = Arc::clone(&server.server);
        Body::new(IdleTimeout::new(
            body,
            limits.body_idle_timeout,
            route,
            server,
        ))
    })
}

/// The 502 of a request that `failed`, counted against the server tried
/// last unless counted already.
fn failed_exchange(route: &Route, failed: Failed, tried: Option<&Arc<UpstreamTarget>>) -> Response {
    match failed {
        Failed::NoConnection(error) => unreachable(route, error),
        Failed::Exchange(error) => {
            if let Some(server) = tried {
                record_upstream_failure(&route.name, &server.server, UpstreamFailure::Unreachable);
            }
            unreachable(route, error)
        }
    }
}

/// The 502 of a request whose upstream could not be reached.
fn unreachable(route: &Route, error: BoxError) -> Response {
    tracing::warn!(route = %route.name, %error, "upstream unreachable");
    problem(
        StatusCode::BAD_GATEWAY,
        format!("the upstream of {} could not be reached", route.name),
    )
}

/// The 504 of a request whose upstream (the server `tried` last) sent no
/// response headers within `timeout`.
fn timed_out(route: &Route, timeout: Duration, tried: Option<&Arc<UpstreamTarget>>) -> Response {
    tracing::warn!(route = %route.name, ?timeout, "upstream timed out");
    if let Some(server) = tried {
        record_upstream_failure(&route.name, &server.server, UpstreamFailure::Timeout);
    }
    problem(
        StatusCode::GATEWAY_TIMEOUT,
        format!(
            "the upstream of {} did not answer within {}",
            route.name,
            humantime::format_duration(timeout)
        ),
    )
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
    // One lookup of the name (hashed byte by byte), for reading and writing.
    let mut forwarded = match headers.entry(HeaderName::from_static("x-forwarded-for")) {
        Entry::Vacant(vacant) => {
            vacant.insert(client.clone());
            return;
        }
        Entry::Occupied(occupied) => occupied,
    };
    let chain = {
        let existing: Vec<&str> = forwarded
            .iter()
            .filter_map(|value| value.to_str().ok())
            .map(str::trim)
            .filter(|value| !value.is_empty())
            .collect();
        (!existing.is_empty()).then(|| {
            let client = client.to_str().unwrap_or_default();
            format!("{}, {client}", existing.join(", "))
        })
    };
    match chain {
        None => {
            forwarded.insert(client.clone());
        }
        Some(chain) => {
            if let Ok(value) = HeaderValue::from_str(&chain) {
                forwarded.insert(value);
            }
        }
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

    #[test]
    fn empty_x_forwarded_for_lines_are_replaced_by_the_client() {
        let mut headers = HeaderMap::new();
        headers.append("x-forwarded-for", HeaderValue::from_static(""));
        headers.append("x-forwarded-for", HeaderValue::from_static("  "));
        append_forwarded_for(&mut headers, &HeaderValue::from_static("192.0.2.7"));
        assert_eq!(headers["x-forwarded-for"], "192.0.2.7");
        assert_eq!(headers.get_all("x-forwarded-for").iter().count(), 1);
    }
}
