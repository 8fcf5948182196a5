//! Servers on loopback: a port on 127.0.0.1 that nothing listens on, and
//! (feature `loopback`) a test upstream there and a read that waits for the
//! server to close a connection.

#[cfg(feature = "loopback")]
mod upstream;

#[cfg(feature = "loopback")]
pub use upstream::Upstream;

/// Reads `stream` until its server closes it (end of stream or a reset),
/// within 20 s, and gives what was read: for tests of servers that close
/// idle connections.
///
/// # Panics
///
/// When the server has not closed it within 20 s.
#[cfg(feature = "loopback")]
pub async fn read_until_closed(stream: &mut tokio::net::TcpStream) -> Vec<u8> {
    use tokio::io::AsyncReadExt;
    let mut read = Vec::new();
    let until_closed = async {
        let mut buffer = [0u8; 4096];
        loop {
            match stream.read(&mut buffer).await {
                Ok(0) | Err(_) => return,
                Ok(count) => read.extend_from_slice(&buffer[..count]),
            }
        }
    };
    tokio::time::timeout(std::time::Duration::from_secs(20), until_closed)
        .await
        .expect("the server closed the connection within 20 s");
    read
}

/// A port on 127.0.0.1 that nothing listens on now (bound, then let go):
/// for a server to listen on, or as a peer that refuses connections.
pub fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|listener| listener.local_addr())
        .unwrap_or_else(|error| panic!("no free port on 127.0.0.1: {error}"))
        .port()
}
