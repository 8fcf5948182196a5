//! One worker's connections to the upstreams: HTTP/1.1 connections (hyper's
//! `client::conn`), over TLS to `https://` upstreams (see [`UpstreamTls`]),
//! kept open between requests. A request takes the connection
//! to its upstream that was given back last, or opens one; the connection is
//! given back once the response body has ended, for the worker's next request
//! to that upstream, whichever client connection it comes from. Idle
//! connections are closed after [`IDLE_TIMEOUT`] (a sweep every
//! [`SWEEP_INTERVAL`]), and at most [`MAX_IDLE_PER_UPSTREAM`] are kept per
//! upstream. A WebSocket upgrade gets a connection of its own, never listed
//! idle ([`UpstreamConnections::send_upgrade`]). A connection that cannot be
//! opened gives the request back unsent ([`SendError::Connect`]), for the
//! route's next server.
//!
//! hyper-util's pooled client does the same for any executor and protocol, at
//! about 9,600 more instructions per proxied request (see
//! `docs/performance/history.md`): a worker is one thread and speaks HTTP/1.1 to its
//! upstreams, so a list per upstream is all the pooling it needs.

use std::pin::Pin;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

use axum::body::Body;
use bytes::Bytes;
use http::{HeaderValue, Request, Response, Uri};
use http_body::{Body as HttpBody, Frame, SizeHint};
use hyper::body::Incoming;
use hyper::client::conn::http1::{self, SendRequest};
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::rt::TokioIo;
use tollgate_serve::Connections;
use tower_service::Service;

use crate::proxy::upstream_health::Health;
use crate::proxy::upstream_tls::UpstreamTls;

/// Any error of reaching an upstream.
pub(crate) type BoxError = Box<dyn std::error::Error + Send + Sync>;

/// Why a request got no response from a server.
#[derive(Debug)]
pub(crate) enum SendError {
    /// No connection could be opened (refused, no answer within the connect
    /// timeout, a name that does not resolve): the request, never written,
    /// comes back to be sent elsewhere.
    /// (Boxed: a failure is rare, and the result of every send carries it.)
    Connect(Box<Request<Body>>, BoxError),
    /// The exchange failed once the request was (or may have been) written.
    Exchange(BoxError),
}

/// How long an idle upstream connection is kept.
pub(crate) const IDLE_TIMEOUT: Duration = Duration::from_secs(90);

/// The most idle connections a worker keeps to one upstream.
pub(crate) const MAX_IDLE_PER_UPSTREAM: usize = 256;
const _: () = assert!(MAX_IDLE_PER_UPSTREAM > 0);

/// How often idle connections past [`IDLE_TIMEOUT`] are closed.
pub(crate) const SWEEP_INTERVAL: Duration = Duration::from_secs(30);

/// Where a route's requests go.
#[derive(Debug)]
pub(crate) struct UpstreamTarget {
    /// `http://host:port/` or `https://host:port/`: where connections are
    /// opened.
    pub(crate) origin: Uri,
    /// `host:port` (`host` alone for the scheme's default port), the requests'
    /// `Host` (RFC 9110 section 7.2): never any credentials of the URL.
    pub(crate) host: HeaderValue,
    /// `host:port`, the port always given: the `server` label of metrics.
    pub(crate) server: Arc<str>,
    /// Whether it is skipped for a while (see `servers.rs`).
    pub(crate) health: Health,
    /// How connections are made secure, for an `https://` origin.
    pub(crate) tls: Option<UpstreamTls>,
}

impl UpstreamTarget {
    /// The target of `origin` (`http://host:port/`, or `https://` with
    /// `tls`); `Err` when it names no host.
    pub(crate) fn new(origin: Uri) -> Result<Self, &'static str> {
        let name = origin.host().ok_or("the upstream URL names no host")?;
        let default_port = if origin.scheme_str() == Some("https") {
            443
        } else {
            80
        };
        let port = origin.port_u16().unwrap_or(default_port);
        let server: Arc<str> = Arc::from(format!("{name}:{port}"));
        let host = if port == default_port { name } else { &server };
        let host = HeaderValue::try_from(host).map_err(|_| "the upstream host is not text")?;
        Ok(UpstreamTarget {
            origin,
            host,
            server,
            health: Health::default(),
            tls: None,
        })
    }

    /// This target reached over `tls`.
    pub(crate) fn with_tls(self, tls: UpstreamTls) -> Self {
        UpstreamTarget {
            tls: Some(tls),
            ..self
        }
    }

    /// Whether `other` goes to the same place, reached the same way: a
    /// connection made under another `[upstream_tls]` (before a reload) is
    /// not reused for a target of the configuration in force.
    fn same_origin_as(&self, other: &UpstreamTarget) -> bool {
        std::ptr::eq(self, other)
            || (self.origin == other.origin
                && match (&self.tls, &other.tls) {
                    (None, None) => true,
                    (Some(mine), Some(theirs)) => mine.same_configuration(theirs),
                    _ => false,
                })
    }
}

/// An idle connection and since when it is idle.
#[derive(Debug)]
struct Idle {
    sender: SendRequest<Body>,
    since: Instant,
}

/// The connections of one worker, idle ones listed per upstream.
#[derive(Debug)]
pub(crate) struct UpstreamConnections {
    connector: HttpConnector,
    /// The connector's connect timeout, which bounds a TLS handshake too.
    connect_timeout: Duration,
    idle: Mutex<Vec<(Arc<UpstreamTarget>, Vec<Idle>)>>,
    /// The gateway's client connections: out of file descriptors, opening a
    /// connection sheds the one idle longest and tries once more.
    clients: Arc<Connections>,
}

impl UpstreamConnections {
    /// Connections opened with `connector` (its `TCP_NODELAY`), given up
    /// when the TCP connection, or then the TLS handshake, takes longer than
    /// `connect_timeout` (the connector's own).
    pub(crate) fn new(
        connector: HttpConnector,
        connect_timeout: Duration,
        clients: Arc<Connections>,
    ) -> Self {
        UpstreamConnections {
            connector,
            connect_timeout,
            idle: Mutex::new(Vec::new()),
            clients,
        }
    }

    fn idle_lists(&self) -> MutexGuard<'_, Vec<(Arc<UpstreamTarget>, Vec<Idle>)>> {
        // Nothing panics while the list is held; a poisoned list is still whole.
        self.idle.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// The idle connection to `target` given back last, if any is still open
    /// and ready; connections closed, expired or not ready are dropped.
    fn take_idle(&self, target: &UpstreamTarget, now: Instant) -> Option<SendRequest<Body>> {
        let mut idle = self.idle_lists();
        let list = idle
            .iter_mut()
            .find(|(listed, _)| listed.same_origin_as(target))
            .map(|(_, list)| list)?;
        while let Some(entry) = list.pop() {
            if now.duration_since(entry.since) > IDLE_TIMEOUT {
                // The rest are older still.
                list.clear();
                return None;
            }
            if entry.sender.is_ready() {
                return Some(entry.sender);
            }
        }
        None
    }

    /// Closes the idle connections past [`IDLE_TIMEOUT`] or no longer open,
    /// and forgets upstreams without any (those of routes reloaded away).
    fn sweep(&self, now: Instant) {
        let mut idle = self.idle_lists();
        for (_, list) in idle.iter_mut() {
            list.retain(|entry| {
                now.duration_since(entry.since) <= IDLE_TIMEOUT && entry.sender.is_ready()
            });
        }
        idle.retain(|(_, list)| !list.is_empty());
    }

    /// Starts the sweep of idle connections every [`SWEEP_INTERVAL`] on the
    /// current reloadable; it ends with the last reference to `connections`.
    pub(crate) fn start_sweeping(connections: &Arc<Self>) {
        let connections = Arc::downgrade(connections);
        tokio::spawn(async move {
            let mut ticks = tokio::time::interval(SWEEP_INTERVAL);
            ticks.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
            loop {
                ticks.tick().await;
                let Some(connections) = connections.upgrade() else {
                    return;
                };
                connections.sweep(Instant::now());
            }
        });
    }

    /// Lists `sender` as idle if it can take another request. It can as soon
    /// as its response has ended: hyper's connection task marks the
    /// connection idle and wanting a request in the same turn in which it
    /// reads the response's last bytes, before the body's reader (a task on
    /// the same worker thread) sees the end. Should that ever not hold, the
    /// connection is closed here: no reuse, nothing lost.
    fn give_back(&self, target: &Arc<UpstreamTarget>, sender: SendRequest<Body>) {
        if !sender.is_ready() {
            // Closed, or still sending a request body the upstream did not
            // wait for: not worth keeping.
            return;
        }
        let mut idle = self.idle_lists();
        let index = match idle
            .iter()
            .position(|(listed, _)| listed.same_origin_as(target))
        {
            Some(index) => index,
            None => {
                idle.push((Arc::clone(target), Vec::new()));
                idle.len() - 1
            }
        };
        // Expired ones go in the sweep; past the cap, the oldest goes now.
        let list = &mut idle[index].1;
        if list.len() >= MAX_IDLE_PER_UPSTREAM {
            list.remove(0);
        }
        list.push(Idle {
            sender,
            since: Instant::now(),
        });
    }

    /// Sends `request` (in origin form, its `Host` set) to `target` over an
    /// idle connection, or a new one. A request that an idle connection
    /// closed under before it was written goes on the next one: it was never
    /// sent, so nothing is sent twice.
    pub(crate) async fn send(
        self: &Arc<Self>,
        target: &Arc<UpstreamTarget>,
        mut request: Request<Body>,
    ) -> Result<Response<ReturnWhenDone>, SendError> {
        loop {
            let reused = self.take_idle(target, Instant::now());
            let fresh = reused.is_none();
            let mut sender = match reused {
                Some(sender) => sender,
                None => match self.open(target, Upgrades::Refused).await {
                    Ok(sender) => sender,
                    Err(Opening::Connect(error)) => {
                        return Err(SendError::Connect(Box::new(request), error));
                    }
                    Err(Opening::Handshake(error)) => return Err(SendError::Exchange(error)),
                },
            };
            match sender.try_send_request(request).await {
                Ok(response) => {
                    let (parts, body) = response.into_parts();
                    let body = ReturnWhenDone::new(body, sender, self, target);
                    return Ok(Response::from_parts(parts, body));
                }
                Err(mut error) => match error.take_message() {
                    Some(unsent) if !fresh => request = unsent,
                    _ => return Err(SendError::Exchange(error.into_error().into())),
                },
            }
        }
    }

    /// Sends `request`, an upgrade (see `upgrade.rs`), to `target` over a
    /// connection of its own, which is never listed idle: after a 101 it
    /// carries the upgraded protocol, and after any other answer it closes
    /// once the response has been read. The sender comes back with the
    /// response, to be held until the upgrade is done.
    pub(crate) async fn send_upgrade(
        &self,
        target: &UpstreamTarget,
        request: Request<Body>,
    ) -> Result<(Response<Incoming>, SendRequest<Body>), SendError> {
        let mut sender = match self.open(target, Upgrades::Allowed).await {
            Ok(sender) => sender,
            Err(Opening::Connect(error)) => {
                return Err(SendError::Connect(Box::new(request), error));
            }
            Err(Opening::Handshake(error)) => return Err(SendError::Exchange(error)),
        };
        match sender.send_request(request).await {
            Ok(response) => Ok((response, sender)),
            Err(error) => Err(SendError::Exchange(error.into())),
        }
    }

    /// Opens an HTTP/1.1 connection to `target` (over TLS for an `https://`
    /// one), driven by a task of its own on the current reloadable until it
    /// closes (or is upgraded).
    async fn open(
        &self,
        target: &UpstreamTarget,
        upgrades: Upgrades,
    ) -> Result<SendRequest<Body>, Opening> {
        let mut connector = self.connector.clone();
        std::future::poll_fn(|context| connector.poll_ready(context))
            .await
            .map_err(|error| Opening::Connect(error.into()))?;
        let io = self.connect(&mut connector, target).await?;
        match &target.tls {
            None => handshake(io, upgrades).await,
            Some(tls) => {
                // Nothing is written before the handshake succeeds: a server
                // that fails it (a wrong certificate, plain HTTP) or stalls
                // in it is one that takes no connection, for the next.
                let secured =
                    tokio::time::timeout(self.connect_timeout, tls.connect(io.into_inner()))
                        .await
                        .map_err(|_| Opening::Connect("the TLS handshake timed out".into()))?
                        .map_err(|error| Opening::Connect(error.into()))?;
                handshake(TokioIo::new(secured), upgrades).await
            }
        }
    }
}

/// How many times opening a connection to an upstream sheds an idle client
/// connection and tries again when the process is out of file descriptors:
/// a flood's connections, accepted meanwhile, may take what was freed.
const SHED_ATTEMPTS: usize = 4;

impl UpstreamConnections {
    /// A TCP connection to `target`'s origin. Out of file descriptors, which
    /// is not the upstream's fault, an idle client connection makes room
    /// and the connection is tried again (at most [`SHED_ATTEMPTS`] times).
    async fn connect(
        &self,
        connector: &mut HttpConnector,
        target: &UpstreamTarget,
    ) -> Result<TokioIo<tokio::net::TcpStream>, Opening> {
        let mut attempts = 0;
        loop {
            match connector.call(target.origin.clone()).await {
                Ok(io) => return Ok(io),
                Err(error)
                    if attempts < SHED_ATTEMPTS
                        && tollgate_serve::out_of_descriptors(&error)
                        && self.clients.shed_oldest_idle() =>
                {
                    attempts += 1;
                    tracing::warn!(%error, "out of file descriptors: the oldest idle connection was closed");
                    tokio::time::sleep(tollgate_serve::SHED_PAUSE).await;
                }
                Err(error) => return Err(Opening::Connect(error.into())),
            }
        }
    }
}

/// The HTTP/1.1 handshake over `io`, the connection then driven by a task of
/// its own.
async fn handshake<T>(io: T, upgrades: Upgrades) -> Result<SendRequest<Body>, Opening>
where
    T: hyper::rt::Read + hyper::rt::Write + Unpin + Send + 'static,
{
    let handshake = |error: hyper::Error| Opening::Handshake(error.into());
    let (mut sender, connection) = http1::handshake(io).await.map_err(handshake)?;
    tokio::spawn(async move {
        let ended = match upgrades {
            Upgrades::Refused => connection.await,
            Upgrades::Allowed => connection.with_upgrades().await,
        };
        if let Err(error) = ended {
            tracing::debug!(%error, "upstream connection ended");
        }
    });
    sender.ready().await.map_err(handshake)?;
    Ok(sender)
}

/// Why a connection could not be opened.
enum Opening {
    /// No connection: the request was not written.
    Connect(BoxError),
    /// Connected, but HTTP/1.1 could not start on it.
    Handshake(BoxError),
}

/// Whether a connection may switch protocols after a 101.
#[derive(Clone, Copy)]
enum Upgrades {
    Refused,
    Allowed,
}

/// A response body that gives its connection back to the worker's idle list
/// once it has ended. Dropped before its end (the client went away), it
/// closes the connection instead: the rest of the response would still be on
/// it.
pub(crate) struct ReturnWhenDone {
    body: Incoming,
    /// Until given back or dropped.
    connection: Option<Borrowed>,
}

/// A connection in use, and where it goes back to.
struct Borrowed {
    sender: SendRequest<Body>,
    connections: Arc<UpstreamConnections>,
    target: Arc<UpstreamTarget>,
}

impl Borrowed {
    fn give_back(self) {
        self.connections.give_back(&self.target, self.sender);
    }
}

impl ReturnWhenDone {
    fn new(
        body: Incoming,
        sender: SendRequest<Body>,
        connections: &Arc<UpstreamConnections>,
        target: &Arc<UpstreamTarget>,
    ) -> Self {
        let mut returning = ReturnWhenDone {
            body,
            connection: Some(Borrowed {
                sender,
                connections: Arc::clone(connections),
                target: Arc::clone(target),
            }),
        };
        // A body that is empty from the start (`HEAD`, 204, 304, length 0)
        // may never be polled.
        returning.give_back_if_done();
        returning
    }

    fn give_back_if_done(&mut self) {
        if self.body.is_end_stream() {
            self.give_back();
        }
    }

    fn give_back(&mut self) {
        if let Some(connection) = self.connection.take() {
            connection.give_back();
        }
    }
}

impl HttpBody for ReturnWhenDone {
    type Data = Bytes;
    type Error = hyper::Error;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        context: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, hyper::Error>>> {
        let polled = Pin::new(&mut self.body).poll_frame(context);
        match &polled {
            Poll::Ready(None) => self.give_back(),
            // Trailers end a body: the gateway may not poll again after them.
            Poll::Ready(Some(Ok(frame))) if frame.is_trailers() => self.give_back(),
            Poll::Ready(Some(Ok(_))) => self.give_back_if_done(),
            // An error ends the connection: it is not given back.
            Poll::Ready(Some(Err(_))) => self.connection = None,
            Poll::Pending => {}
        }
        polled
    }

    fn is_end_stream(&self) -> bool {
        self.body.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        self.body.size_hint()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn host_is_the_upstream_host_and_port_without_credentials() {
        let host = |origin: &'static str| {
            UpstreamTarget::new(Uri::from_static(origin))
                .unwrap()
                .host
                .to_str()
                .unwrap()
                .to_owned()
        };
        assert_eq!(host("http://127.0.0.1:9000/"), "127.0.0.1:9000");
        assert_eq!(host("http://user:secret@backend:8080/"), "backend:8080");
        assert_eq!(host("http://backend/"), "backend");
        assert_eq!(host("http://backend:80/"), "backend");
        assert_eq!(host("http://[::1]:9000/"), "[::1]:9000");
        assert_eq!(host("https://backend:443/"), "backend");
        assert_eq!(host("https://backend:80/"), "backend:80");
        assert_eq!(host("https://backend:8443/"), "backend:8443");
    }
}
