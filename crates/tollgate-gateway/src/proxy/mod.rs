//! Forwarding an admitted request to its upstream: the forwarding itself,
//! each route's servers and their passive health, the worker's connection
//! pool, TLS to upstreams, body timeouts, upgraded connections (WebSocket),
//! the hop-by-hop header fields, the timer a client connection keeps for
//! its upstream timeouts, and the demo backend that answers when no
//! route is configured.

pub(crate) mod body_timeout;
pub(crate) mod client_body;
pub(crate) mod demo;
pub(crate) mod forward;
pub(crate) mod hop_by_hop;
pub(crate) mod kept_timer;
pub(crate) mod servers;
pub(crate) mod upgrade;
pub(crate) mod upstream;
pub(crate) mod upstream_health;
pub(crate) mod upstream_tls;
