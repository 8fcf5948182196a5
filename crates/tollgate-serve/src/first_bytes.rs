//! Telling an HTTP/1 client from an HTTP/2 client with prior knowledge by
//! the first bytes it sends, peeked, not read ([`first_bytes`]): the
//! connection is then served by hyper's HTTP/1 connection alone, with none
//! of hyper-util's `auto` detection on its path (its state and its `Rewind`
//! around every read cost 500 to 650 instructions a request under callgrind,
//! issue #30). The rule is `auto`'s (hyper-util 0.1, `ReadVersion`): a
//! client is HTTP/1 as soon as what it sent differs from the HTTP/2
//! connection preface (RFC 9113, section 3.4), or it sent nothing.

use std::io;

use tokio::net::TcpStream;

/// The HTTP/2 client connection preface (RFC 9113, section 3.4).
const HTTP2_PREFACE: &[u8; 24] = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n";

/// What a client's first bytes say of its protocol.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FirstBytes {
    /// They differ from the HTTP/2 preface, or the client closed before
    /// sending any: HTTP/1 (hyper-util's `auto` would serve it so).
    Http1,
    /// They are the preface or, fewer than its 24 bytes so far, its start:
    /// leave it to a server that reads the rest (HTTP/2 with prior
    /// knowledge, or HTTP/1 if the rest differs).
    Http2OrUndecided,
}

/// What `bytes`, the first a client sent, say of its protocol.
pub fn tell(bytes: &[u8]) -> FirstBytes {
    let seen = bytes.len().min(HTTP2_PREFACE.len());
    if bytes.is_empty() || bytes[..seen] != HTTP2_PREFACE[..seen] {
        FirstBytes::Http1
    } else {
        FirstBytes::Http2OrUndecided
    }
}

/// Waits for the client on `stream` to send its first bytes (or close),
/// peeks at up to 24 of them and [`tell`]s its protocol; nothing is read, so
/// the server that then serves `stream` reads every byte. Errors are the
/// socket's.
pub async fn first_bytes(stream: &TcpStream) -> io::Result<FirstBytes> {
    let mut bytes = [0; HTTP2_PREFACE.len()];
    let peeked = stream.peek(&mut bytes).await?;
    Ok(tell(&bytes[..peeked]))
}

#[cfg(test)]
mod tests {
    use super::*;
    use tokio::io::AsyncWriteExt;

    /// Both ends of a TCP connection on loopback: the client's, the server's.
    async fn connected() -> (TcpStream, TcpStream) {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let client = TcpStream::connect(listener.local_addr().unwrap())
            .await
            .unwrap();
        let (server, _) = listener.accept().await.unwrap();
        (client, server)
    }

    #[test]
    fn a_request_line_is_http1_from_its_first_byte() {
        assert_eq!(tell(b"GET / HTTP/1.1\r\n"), FirstBytes::Http1);
        assert_eq!(tell(b"G"), FirstBytes::Http1);
        // POST shares the preface's first byte, not its second.
        assert_eq!(tell(b"PO"), FirstBytes::Http1);
        assert_eq!(tell(b"PRO"), FirstBytes::Http1);
    }

    #[test]
    fn the_preface_or_its_start_is_left_undecided() {
        assert_eq!(
            tell(b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"),
            FirstBytes::Http2OrUndecided
        );
        assert_eq!(tell(b"P"), FirstBytes::Http2OrUndecided);
        assert_eq!(tell(b"PRI * HTTP/2"), FirstBytes::Http2OrUndecided);
    }

    #[test]
    fn a_preface_that_differs_late_is_http1() {
        assert_eq!(tell(b"PRI * HTTP/2.0\r\n\r\nSX\r\n\r\n"), FirstBytes::Http1);
    }

    #[test]
    fn a_client_that_sent_nothing_is_http1() {
        assert_eq!(tell(b""), FirstBytes::Http1);
    }

    #[tokio::test]
    async fn peeking_leaves_the_bytes_to_be_read() {
        let (mut client, server) = connected().await;
        client.write_all(b"GET / HTTP/1.1\r\n\r\n").await.unwrap();
        assert_eq!(first_bytes(&server).await.unwrap(), FirstBytes::Http1);
        let mut read = [0; 18];
        tokio::io::AsyncReadExt::read_exact(&mut { server }, &mut read)
            .await
            .unwrap();
        assert_eq!(&read, b"GET / HTTP/1.1\r\n\r\n");
    }

    #[tokio::test]
    async fn a_first_byte_that_may_begin_the_preface_is_left_undecided() {
        let (mut client, server) = connected().await;
        client.write_all(b"P").await.unwrap();
        assert_eq!(
            first_bytes(&server).await.unwrap(),
            FirstBytes::Http2OrUndecided
        );
    }

    #[tokio::test]
    async fn a_client_that_closes_before_a_byte_is_http1() {
        let (client, server) = connected().await;
        drop(client);
        assert_eq!(first_bytes(&server).await.unwrap(), FirstBytes::Http1);
    }
}
