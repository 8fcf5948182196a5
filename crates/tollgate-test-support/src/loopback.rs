//! Servers on loopback: a port on 127.0.0.1 that nothing listens on, and
//! (feature `loopback`) a test upstream there.

#[cfg(feature = "loopback")]
mod upstream;

#[cfg(feature = "loopback")]
pub use upstream::Upstream;

/// A port on 127.0.0.1 that nothing listens on now (bound, then let go):
/// for a server to listen on, or as a peer that refuses connections.
pub fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|listener| listener.local_addr())
        .unwrap_or_else(|error| panic!("no free port on 127.0.0.1: {error}"))
        .port()
}
