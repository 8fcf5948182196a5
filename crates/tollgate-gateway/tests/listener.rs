//! The gateway listener serves a plain connection's HTTP/1 with hyper's
//! HTTP/1 connection alone, told from HTTP/2 by its first bytes, peeked;
//! what could still be HTTP/2's preface goes to hyper-util's `auto`. Either
//! way, a request is served whatever its first segment holds; and a request
//! in flight when the gateway stops is answered with `Connection: close`
//! (hyper's graceful close), then its connection closes.
//!
//! Each test waits for an event under a generous bound, and never sleeps.

use std::time::Duration;

use tokio::io::AsyncWriteExt;
use tokio::net::TcpStream;
use tollgate_test_support::gateway::{Gateway, config};
use tollgate_test_support::loopback::{Upstream, read_until_closed};

/// A gateway with one route to `upstream`, connections idle at most a minute,
/// a drain of at most 30 s.
async fn gateway(upstream: &Upstream, route: &str) -> Gateway {
    let toml = format!(
        "idle_timeout = \"60s\"\ndrain_timeout = \"30s\"\n{}",
        config(&format!(
            "[[routes]]\nname = \"{route}\"\nprefix = \"/\"\nupstream = \"http://{}\"\n",
            upstream.address
        ))
    );
    Gateway::start(&toml, 0).await
}

/// Sends `first`, then `rest`, each in its own segment, with
/// `Connection: close` in the request, and reads the answer to its end.
async fn sent_in_two(gateway: &Gateway, first: &[u8], rest: &[u8]) -> String {
    let mut connection = TcpStream::connect(gateway.running.address).await.unwrap();
    connection.set_nodelay(true).unwrap();
    connection.write_all(first).await.unwrap();
    connection.flush().await.unwrap();
    tokio::task::yield_now().await;
    connection.write_all(rest).await.unwrap();
    String::from_utf8_lossy(&read_until_closed(&mut connection).await).into_owned()
}

#[tokio::test]
async fn a_request_whose_first_byte_comes_alone_is_served() {
    let upstream = Upstream::start().await;
    let gateway = gateway(&upstream, "listener_p_alone").await;
    // "P" could begin HTTP/2's preface ("PRI"): if the gateway peeks it
    // alone, `auto` serves the connection (and finds HTTP/1 in the rest);
    // if it peeks "PO", hyper's HTTP/1 connection does. Either way the
    // request is answered.
    let answer = sent_in_two(
        &gateway,
        b"P",
        b"OST /echo HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer sk_a\r\n\
          Content-Length: 0\r\nConnection: close\r\n\r\n",
    )
    .await;
    assert!(answer.starts_with("HTTP/1.1 200 OK\r\n"), "{answer}");
}

#[tokio::test]
async fn an_http1_request_split_at_any_of_its_first_bytes_is_served() {
    let upstream = Upstream::start().await;
    let gateway = gateway(&upstream, "listener_split").await;
    let request =
        b"GET / HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer sk_a\r\nConnection: close\r\n\r\n";
    for split in [1, 3, 16, 24, 30] {
        let (first, rest) = request.split_at(split);
        let answer = sent_in_two(&gateway, first, rest).await;
        assert!(
            answer.starts_with("HTTP/1.1 200 OK\r\n"),
            "split at {split}: {answer}"
        );
        assert!(answer.ends_with("upstream"), "split at {split}: {answer}");
    }
}

#[tokio::test]
async fn a_request_in_flight_at_a_stop_is_answered_with_connection_close() {
    let upstream = Upstream::start().await;
    let gateway = gateway(&upstream, "listener_stop").await;
    let address = gateway.running.address;
    let mut connection = TcpStream::connect(address).await.unwrap();
    connection
        .write_all(b"GET /slow HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer sk_a\r\n\r\n")
        .await
        .unwrap();
    tokio::time::timeout(Duration::from_secs(20), async {
        while upstream.requests() == 0 {
            tokio::task::yield_now().await;
        }
    })
    .await
    .expect("the request reaches the upstream");
    let stopping = tokio::spawn(gateway.running.shutdown());
    // The stop has reached the workers once nothing accepts: their
    // listeners and this connection's task were woken by the same signal.
    tokio::time::timeout(Duration::from_secs(20), async {
        while TcpStream::connect(address).await.is_ok() {
            tokio::task::yield_now().await;
        }
    })
    .await
    .expect("the listener stops accepting");
    upstream.release.notify_one();
    let answer = String::from_utf8_lossy(&read_until_closed(&mut connection).await).into_owned();
    assert!(answer.starts_with("HTTP/1.1 200 OK\r\n"), "{answer}");
    assert!(
        answer
            .to_ascii_lowercase()
            .contains("\r\nconnection: close\r\n"),
        "{answer}"
    );
    assert!(answer.ends_with("finally"), "{answer}");
    tokio::time::timeout(Duration::from_secs(20), stopping)
        .await
        .expect("the gateway stops once the request is answered")
        .unwrap();
}

#[tokio::test]
async fn an_http2_preface_split_after_its_first_byte_is_served_as_http2() {
    let upstream = Upstream::start().await;
    let gateway = gateway(&upstream, "listener_preface").await;
    let mut http2 = TcpStream::connect(gateway.running.address).await.unwrap();
    http2.set_nodelay(true).unwrap();
    // Whatever the gateway peeks ("P", or more of the preface), it is the
    // preface's start: `auto` reads the rest and serves HTTP/2.
    http2.write_all(b"P").await.unwrap();
    tokio::task::yield_now().await;
    http2
        .write_all(b"RI * HTTP/2.0\r\n\r\nSM\r\n\r\n\x00\x00\x00\x04\x00\x00\x00\x00\x00")
        .await
        .unwrap();
    let mut frame_head = [0; 9];
    tokio::time::timeout(
        Duration::from_secs(20),
        tokio::io::AsyncReadExt::read_exact(&mut http2, &mut frame_head),
    )
    .await
    .expect("the gateway answers the preface")
    .unwrap();
    // The gateway's own SETTINGS frame (type 4) comes first.
    assert_eq!(frame_head[3], 4, "{frame_head:?}");
}
