//! Loopback ports for the tests that start the binary.

#![allow(dead_code, unreachable_pub, missing_docs)]

/// A loopback port nothing listens on (bound, then let go).
pub fn closed_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}
