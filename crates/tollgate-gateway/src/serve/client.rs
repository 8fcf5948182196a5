//! One client connection of the gateway: whom it comes from, and its
//! activity (for the idle close and shedding) and the timer its requests'
//! upstream timeouts share.

use std::net::SocketAddr;
use std::sync::Arc;

use http::HeaderValue;
use tollgate_serve::Activity;

use crate::proxy::kept_timer::KeptTimer;

/// What the requests of one client connection share.
pub(crate) struct ClientConnection {
    /// The connection's peer.
    pub(crate) peer: SocketAddr,
    /// The peer's IP address as `X-Forwarded-For` names it, written once.
    pub(crate) forwarded_for: HeaderValue,
    /// `X-Forwarded-Proto`: `http`, or `https` over TLS.
    pub(crate) forwarded_proto: HeaderValue,
    /// The connection's activity: a WebSocket tunnel holds it in flight for
    /// its whole life.
    pub(crate) activity: Arc<Activity>,
    /// The timer of its requests' upstream timeouts, reset for each.
    pub(crate) upstream_timer: KeptTimer,
}

impl ClientConnection {
    /// The connection from `peer`, its activity `activity`.
    pub(crate) fn new(peer: SocketAddr, activity: &Arc<Activity>) -> Self {
        ClientConnection {
            peer,
            activity: Arc::clone(activity),
            upstream_timer: KeptTimer::default(),
            // An IP address is always a valid header value.
            forwarded_for: HeaderValue::try_from(peer.ip().to_string())
                .unwrap_or(HeaderValue::from_static("unknown")),
            forwarded_proto: HeaderValue::from_static("http"),
        }
    }

    /// The connection from `peer` over TLS.
    pub(crate) fn over_tls(peer: SocketAddr, activity: &Arc<Activity>) -> Self {
        ClientConnection {
            forwarded_proto: HeaderValue::from_static("https"),
            ..ClientConnection::new(peer, activity)
        }
    }
}
