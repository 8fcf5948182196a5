//! Idle client connections are closed in every phase (`idle_timeout`, here
//! 300 ms): one that never sends a byte, an HTTP/2 connection that sends its
//! preface and no request, a keep-alive connection after its response. A
//! request in flight keeps its connection however quiet it is. Before, each
//! of the first two stayed open until the client went away.
//!
//! The waits are for the gateway's own timer: each test waits for an event
//! (the connection closing) under a generous bound, and never sleeps.

use std::time::Duration;

use tokio::io::AsyncWriteExt;
use tokio::net::TcpStream;
use tollgate_test_support::gateway::{Gateway, config};
use tollgate_test_support::loopback::{Upstream, read_until_closed};

/// A gateway whose connections may idle 300 ms, with one route to `upstream`.
async fn gateway(upstream: &Upstream, route: &str) -> Gateway {
    // A top-level setting: before the tables `config` begins with.
    let toml = format!(
        "idle_timeout = \"300ms\"\n{}",
        config(&format!(
            "[[routes]]\nname = \"{route}\"\nprefix = \"/\"\nupstream = \"http://{}\"\n",
            upstream.address
        ))
    );
    Gateway::start(&toml, 0).await
}

#[tokio::test]
async fn a_connection_that_sends_nothing_is_closed() {
    let upstream = Upstream::start().await;
    let gateway = gateway(&upstream, "idle_silent").await;
    let mut silent = TcpStream::connect(gateway.running.address).await.unwrap();
    assert!(read_until_closed(&mut silent).await.is_empty());
}

#[tokio::test]
async fn an_http2_connection_that_sends_no_request_is_closed() {
    let upstream = Upstream::start().await;
    let gateway = gateway(&upstream, "idle_http2").await;
    let mut http2 = TcpStream::connect(gateway.running.address).await.unwrap();
    // The client preface and an empty SETTINGS frame, then nothing.
    http2
        .write_all(b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n\x00\x00\x00\x04\x00\x00\x00\x00\x00")
        .await
        .unwrap();
    let read = read_until_closed(&mut http2).await;
    // The gateway's own SETTINGS came first (frame type 4).
    assert!(read.len() >= 9 && read[3] == 4, "{read:?}");
}

#[tokio::test]
async fn a_keep_alive_connection_is_closed_after_its_response() {
    let upstream = Upstream::start().await;
    let gateway = gateway(&upstream, "idle_keep_alive").await;
    let mut connection = TcpStream::connect(gateway.running.address).await.unwrap();
    connection
        .write_all(b"GET / HTTP/1.1\r\nHost: gateway\r\nAuthorization: Bearer sk_a\r\n\r\n")
        .await
        .unwrap();
    let read = read_until_closed(&mut connection).await;
    let text = String::from_utf8_lossy(&read);
    assert!(text.starts_with("HTTP/1.1 200 OK\r\n"), "{text}");
    assert!(text.ends_with("upstream"), "{text}");
}

#[tokio::test]
async fn a_request_in_flight_keeps_its_quiet_connection() {
    let upstream = Upstream::start().await;
    let gateway = gateway(&upstream, "idle_in_flight").await;
    let url = gateway.url("/slow");
    let slow = tokio::spawn(async move {
        reqwest::Client::new()
            .get(url)
            .header("authorization", "Bearer sk_a")
            .send()
            .await
            .unwrap()
    });
    // Opened after the slow request's connection: once the gateway closes
    // this one, the slow one has been quiet longer than the idle timeout.
    while upstream.requests() == 0 {
        tokio::task::yield_now().await;
    }
    let mut clock = TcpStream::connect(gateway.running.address).await.unwrap();
    read_until_closed(&mut clock).await;
    upstream.release.notify_one();
    let response = tokio::time::timeout(Duration::from_secs(20), slow)
        .await
        .expect("the slow request is answered")
        .unwrap();
    assert_eq!(response.status(), 200);
    assert_eq!(response.text().await.unwrap(), "finally");
}

#[tokio::test]
async fn an_admin_connection_that_sends_nothing_is_closed() {
    let upstream = Upstream::start().await;
    let gateway = gateway(&upstream, "idle_admin").await;
    let mut silent = TcpStream::connect(gateway.running.admin_address)
        .await
        .unwrap();
    assert!(read_until_closed(&mut silent).await.is_empty());
}

#[tokio::test]
async fn a_half_sent_request_head_does_not_hold_a_stop_for_its_drain() {
    let upstream = Upstream::start().await;
    // Connections may idle a minute and a drain may last 30 s: only the
    // stop closes the connection, which has no request in flight.
    let toml = format!(
        "idle_timeout = \"60s\"\ndrain_timeout = \"30s\"\n{}",
        config(&format!(
            "[[routes]]\nname = \"idle_stop\"\nprefix = \"/\"\nupstream = \"http://{}\"\n",
            upstream.address
        ))
    );
    let gateway = Gateway::start(&toml, 0).await;
    let mut half_sent = TcpStream::connect(gateway.running.address).await.unwrap();
    half_sent
        .write_all(b"GET /hello HTTP/1.1\r\nHost: x\r\n")
        .await
        .unwrap();
    tokio::time::timeout(Duration::from_secs(10), gateway.running.shutdown())
        .await
        .expect("the stop does not wait out its drain for a connection with nothing in flight");
}
