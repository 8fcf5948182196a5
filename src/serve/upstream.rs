//! The upstream connection of one client connection: each client connection
//! of the gateway keeps one HTTP/1.1 connection of its own to the upstream it
//! last used, and sends its requests there in turn, with no pool to look up
//! and no lock shared with other connections. A request that finds that
//! connection busy (HTTP/2 clients send several at once), closed or to another
//! upstream goes through the worker's shared pool instead.

use std::sync::Mutex;

use axum::body::Body;
use http::uri::{Authority, PathAndQuery, Scheme};
use http::{HeaderValue, Request, Response, Uri};
use hyper::body::Incoming;
use hyper::client::conn::http1::{self, SendRequest};
use hyper_util::client::legacy::connect::HttpConnector;
use tower_service::Service;

/// Any error of reaching an upstream.
pub(crate) type BoxError = Box<dyn std::error::Error + Send + Sync>;

/// One client connection's own upstream connection, if it has one.
#[derive(Default)]
pub(crate) struct OwnUpstream {
    connection: Mutex<Option<Open>>,
}

/// An open upstream connection and where it goes.
struct Open {
    scheme: Scheme,
    authority: Authority,
    sender: SendRequest<Body>,
}

/// Whether an open connection can take a request now.
enum State {
    /// Idle and to the request's upstream.
    Ready,
    /// Still carrying an earlier request (an HTTP/2 client's).
    Busy,
    /// To another upstream.
    Elsewhere,
    /// Closed by either side: to be opened again.
    Closed,
}

impl Open {
    fn state(&self, scheme: &Scheme, authority: &Authority) -> State {
        if self.sender.is_closed() {
            State::Closed
        } else if self.scheme != *scheme || self.authority != *authority {
            State::Elsewhere
        } else if self.sender.is_ready() {
            State::Ready
        } else {
            State::Busy
        }
    }
}

/// What became of a request offered to the client connection's own upstream
/// connection.
pub(crate) enum Sent {
    /// The upstream's response, or why there is none (the connection could
    /// not be opened, or the exchange failed).
    Answered(Result<Response<Incoming>, BoxError>),
    /// Not sent: the connection is busy, closed or to another upstream; the
    /// request comes back as it was given, for the shared pool.
    Declined(Request<Body>),
}

impl OwnUpstream {
    /// Sends `request` (its URI absolute, to its upstream) over this client
    /// connection's own upstream connection, opening one with `connector`
    /// when there is none or the last one was closed.
    pub(crate) async fn send(&self, connector: &HttpConnector, request: Request<Body>) -> Sent {
        let (Some(scheme), Some(authority)) = (
            request.uri().scheme().cloned(),
            request.uri().authority().cloned(),
        ) else {
            return Sent::Declined(request);
        };
        // The exchange under way on the open connection, or the request to
        // open one for.
        let under_way = {
            let Ok(mut slot) = self.connection.lock() else {
                return Sent::Declined(request);
            };
            match slot.as_ref().map(|open| open.state(&scheme, &authority)) {
                Some(State::Ready) => match slot.as_mut() {
                    Some(open) => Ok(open
                        .sender
                        .try_send_request(origin_form(request, &authority))),
                    None => Err(request),
                },
                Some(State::Busy | State::Elsewhere) => return Sent::Declined(request),
                Some(State::Closed) | None => {
                    *slot = None;
                    Err(request)
                }
            }
        };
        let sending = match under_way {
            Ok(sending) => sending,
            Err(request) => {
                let mut sender = match connect(connector, request.uri().clone()).await {
                    Ok(sender) => sender,
                    Err(error) => return Sent::Answered(Err(error)),
                };
                if let Err(error) = sender.ready().await {
                    return Sent::Answered(Err(error.into()));
                }
                let sending = sender.try_send_request(origin_form(request, &authority));
                if let Ok(mut slot) = self.connection.lock() {
                    *slot = Some(Open {
                        scheme: scheme.clone(),
                        authority: authority.clone(),
                        sender,
                    });
                }
                sending
            }
        };
        match sending.await {
            Ok(response) => Sent::Answered(Ok(response)),
            Err(mut error) => match error.take_message() {
                // Never written: the connection had closed in the meantime.
                Some(request) => Sent::Declined(absolute_form(request, scheme, authority)),
                None => Sent::Answered(Err(error.into_error().into())),
            },
        }
    }
}

/// Opens an HTTP/1.1 connection to `uri`'s upstream and starts driving it on
/// the current runtime.
async fn connect(connector: &HttpConnector, uri: Uri) -> Result<SendRequest<Body>, BoxError> {
    let mut connector = connector.clone();
    let io = connector.call(uri).await?;
    let (sender, connection) = http1::handshake(io).await?;
    tokio::spawn(async move {
        if let Err(error) = connection.await {
            tracing::debug!(%error, "upstream connection ended");
        }
    });
    Ok(sender)
}

/// `request` as sent on a connection to its upstream: the path and query
/// alone in the request line, the upstream in `Host` (RFC 9112 section 3.2).
fn origin_form(mut request: Request<Body>, authority: &Authority) -> Request<Body> {
    let path_and_query = request
        .uri()
        .path_and_query()
        .cloned()
        .unwrap_or_else(|| PathAndQuery::from_static("/"));
    *request.uri_mut() = Uri::from(path_and_query);
    if let Ok(host) = HeaderValue::from_str(authority.as_str()) {
        request.headers_mut().insert(http::header::HOST, host);
    }
    request
}

/// `request` back in the absolute form the shared pool takes.
fn absolute_form(
    mut request: Request<Body>,
    scheme: Scheme,
    authority: Authority,
) -> Request<Body> {
    let mut parts = request.uri().clone().into_parts();
    parts.scheme = Some(scheme);
    parts.authority = Some(authority);
    if parts.path_and_query.is_none() {
        parts.path_and_query = Some(PathAndQuery::from_static("/"));
    }
    if let Ok(uri) = Uri::from_parts(parts) {
        *request.uri_mut() = uri;
    }
    request
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn origin_form_keeps_the_path_and_query_and_names_the_upstream_host() {
        let request = Request::builder()
            .uri("http://127.0.0.1:9000/orders/7?page=2")
            .body(Body::empty())
            .unwrap();
        let authority = Authority::from_static("127.0.0.1:9000");
        let request = origin_form(request, &authority);
        assert_eq!(request.uri(), "/orders/7?page=2");
        assert_eq!(request.headers()["host"], "127.0.0.1:9000");
        let request = absolute_form(request, Scheme::HTTP, authority);
        assert_eq!(request.uri(), "http://127.0.0.1:9000/orders/7?page=2");
    }
}
