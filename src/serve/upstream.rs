//! The upstream connection of one client connection: each client connection
//! of the gateway keeps one HTTP/1.1 connection of its own to the upstream it
//! last used, and sends its requests there in turn, with no pool to look up
//! and no lock shared with other connections. A request that finds that
//! connection busy (HTTP/2 clients send several at once), closed or to another
//! upstream goes through the worker's shared pool instead.

use std::sync::{Arc, Mutex};

use axum::body::Body;
use http::{HeaderValue, Request, Response, Uri};
use hyper::body::Incoming;
use hyper::client::conn::http1::{self, SendRequest};
use hyper_util::client::legacy::connect::HttpConnector;
use tower_service::Service;

/// Any error of reaching an upstream.
pub(crate) type BoxError = Box<dyn std::error::Error + Send + Sync>;

/// Where a route's requests go.
#[derive(Debug)]
pub(crate) struct UpstreamTarget {
    /// `http://host:port/`: where connections are opened.
    pub(crate) origin: Uri,
    /// `host:port`, the requests' `Host`.
    pub(crate) host: HeaderValue,
}

impl UpstreamTarget {
    /// The target of `origin` (`http://host:port/`); `Err` when it names no
    /// host.
    pub(crate) fn new(origin: Uri) -> Result<Self, &'static str> {
        let host = origin
            .authority()
            .and_then(|authority| HeaderValue::from_str(authority.as_str()).ok())
            .ok_or("the upstream URL names no host")?;
        Ok(UpstreamTarget { origin, host })
    }

    /// Whether `other` goes to the same place.
    fn is(self: &Arc<Self>, other: &Arc<UpstreamTarget>) -> bool {
        Arc::ptr_eq(self, other) || self.origin == other.origin
    }

    /// `request` (in origin form) in the absolute form the shared pool takes.
    pub(crate) fn absolute(&self, mut request: Request<Body>) -> Request<Body> {
        let mut parts = self.origin.clone().into_parts();
        parts.path_and_query = request.uri().path_and_query().cloned();
        if let Ok(uri) = Uri::from_parts(parts) {
            *request.uri_mut() = uri;
        }
        request
    }
}

/// One client connection's own upstream connection, if it has one.
#[derive(Default)]
pub(crate) struct OwnUpstream {
    connection: Mutex<Option<Open>>,
}

/// An open upstream connection and where it goes.
struct Open {
    target: Arc<UpstreamTarget>,
    sender: SendRequest<Body>,
}

/// Whether an open connection can take a request now.
enum State {
    /// Idle and to the request's upstream.
    Ready,
    /// Still carrying an earlier request (an HTTP/2 client's).
    Busy,
    /// To another upstream (the connection stays for the upstream the client
    /// connection started with: a client alternating between two would
    /// otherwise open a connection each time).
    Elsewhere,
    /// Closed by either side: to be opened again.
    Closed,
}

impl Open {
    fn state(&self, target: &Arc<UpstreamTarget>) -> State {
        if self.sender.is_closed() {
            State::Closed
        } else if !self.target.is(target) {
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
    /// Sends `request` (in origin form, its `Host` set) to `target` over
    /// this client connection's own upstream connection, opening one with
    /// `connector` when there is none or the last one was closed.
    pub(crate) async fn send(
        &self,
        connector: &HttpConnector,
        target: &Arc<UpstreamTarget>,
        request: Request<Body>,
    ) -> Sent {
        // The exchange under way on the open connection, or the request to
        // open one for.
        let under_way = {
            let Ok(mut slot) = self.connection.lock() else {
                return Sent::Declined(request);
            };
            match slot.as_ref().map(|open| open.state(target)) {
                Some(State::Ready) => match slot.as_mut() {
                    Some(open) => Ok(open.sender.try_send_request(request)),
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
                let mut sender = match connect(connector, target.origin.clone()).await {
                    Ok(sender) => sender,
                    Err(error) => return Sent::Answered(Err(error)),
                };
                if let Err(error) = sender.ready().await {
                    return Sent::Answered(Err(error.into()));
                }
                let sending = sender.try_send_request(request);
                if let Ok(mut slot) = self.connection.lock() {
                    *slot = Some(Open {
                        target: Arc::clone(target),
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
                Some(request) => Sent::Declined(request),
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_pool_gets_the_request_in_absolute_form() {
        let target = UpstreamTarget::new(Uri::from_static("http://127.0.0.1:9000/")).unwrap();
        assert_eq!(target.host, "127.0.0.1:9000");
        let request = Request::builder()
            .uri("/orders/7?page=2")
            .body(Body::empty())
            .unwrap();
        let request = target.absolute(request);
        assert_eq!(request.uri(), "http://127.0.0.1:9000/orders/7?page=2");
    }
}
