//! One client connection of the gateway: whom it comes from.

use std::net::SocketAddr;

use http::HeaderValue;

/// What the requests of one client connection share.
pub(crate) struct ClientConnection {
    /// The connection's peer.
    pub(crate) peer: SocketAddr,
    /// The peer's IP address as `X-Forwarded-For` names it, written once.
    pub(crate) forwarded_for: HeaderValue,
    /// `X-Forwarded-Proto`: `http`, or `https` over TLS.
    pub(crate) forwarded_proto: HeaderValue,
}

impl ClientConnection {
    /// The connection from `peer`.
    pub(crate) fn new(peer: SocketAddr) -> Self {
        ClientConnection {
            peer,
            // An IP address is always a valid header value.
            forwarded_for: HeaderValue::try_from(peer.ip().to_string())
                .unwrap_or(HeaderValue::from_static("unknown")),
            forwarded_proto: HeaderValue::from_static("http"),
        }
    }

    /// The connection from `peer` over TLS.
    pub(crate) fn over_tls(peer: SocketAddr) -> Self {
        ClientConnection {
            forwarded_proto: HeaderValue::from_static("https"),
            ..ClientConnection::new(peer)
        }
    }
}
