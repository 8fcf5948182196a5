//! Idle connections to `tollgate rls` are closed in every phase
//! (`TOLLGATE_IDLE_TIMEOUT`, here 300 ms), on the gRPC listener and the HTTP
//! listener alike: one that never sends a byte, an HTTP/2 connection that
//! sends its preface and no call, a keep-alive connection after its answer.
//! Before, each stayed open until the client went away.
//!
//! The waits are for the server's own timer: each test waits for an event
//! (the connection closing) under a generous bound, and never sleeps.

use std::sync::Arc;
use std::time::Duration;

use tokio::io::AsyncWriteExt;
use tokio::net::TcpStream;
use tollgate_rls::proto::{Code, RateLimitRequest, RateLimitResponse};
use tollgate_rls::server::{
    DebugPages, Decide, DecideFuture, Health, ListenAddresses, Listeners, RunningServer,
};
use tollgate_test_support::loopback::read_until_closed;

/// Answers every call OK.
struct AlwaysOk;

impl Decide for AlwaysOk {
    fn decide<'a>(&'a self, _request: &'a RateLimitRequest) -> DecideFuture<'a> {
        Box::pin(async {
            Ok(RateLimitResponse {
                overall_code: Code::Ok,
                ..RateLimitResponse::default()
            })
        })
    }
}

/// Answers every call OK after twice the idle timeout: a slow store.
struct Slow;

impl Decide for Slow {
    fn decide<'a>(&'a self, request: &'a RateLimitRequest) -> DecideFuture<'a> {
        Box::pin(async move {
            tokio::time::sleep(Duration::from_millis(600)).await;
            AlwaysOk.decide(request).await
        })
    }
}

/// A server whose connections may idle 300 ms.
async fn server() -> RunningServer {
    server_deciding(Arc::new(AlwaysOk)).await
}

/// A server whose connections may idle 300 ms, answering with `decider`.
async fn server_deciding(decider: Arc<dyn Decide>) -> RunningServer {
    server_with(decider, Duration::from_millis(300)).await
}

/// A server whose connections may idle `idle_timeout`, answering with
/// `decider`.
async fn server_with(decider: Arc<dyn Decide>, idle_timeout: Duration) -> RunningServer {
    let listeners = Listeners::bind(&ListenAddresses {
        grpc: "127.0.0.1:0".to_owned(),
        http: "127.0.0.1:0".to_owned(),
        debug: None,
    })
    .await
    .unwrap()
    .with_idle_timeout(idle_timeout);
    let empty = || Arc::new(String::new) as Arc<dyn Fn() -> String + Send + Sync>;
    let pages = DebugPages {
        stats: empty(),
        config: empty(),
        settings: empty(),
    };
    listeners
        .serve(1, decider, Health::serving().await, pages)
        .unwrap()
}

/// HTTP/2's client connection preface and an empty SETTINGS frame (RFC
/// 9113 section 3.4).
const HTTP2_PREFACE: &[u8] =
    b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n\x00\x00\x00\x04\x00\x00\x00\x00\x00";

#[tokio::test]
async fn a_grpc_connection_that_sends_nothing_is_closed() {
    let server = server().await;
    let mut silent = TcpStream::connect(server.grpc_address().unwrap())
        .await
        .unwrap();
    // Read until closed: the server's HTTP/2 SETTINGS come unasked.
    read_until_closed(&mut silent).await;
    server.shutdown_within(Duration::from_millis(200)).await;
}

#[tokio::test]
async fn a_grpc_connection_that_sends_no_call_is_closed() {
    let server = server().await;
    let mut quiet = TcpStream::connect(server.grpc_address().unwrap())
        .await
        .unwrap();
    quiet.write_all(HTTP2_PREFACE).await.unwrap();
    let read = read_until_closed(&mut quiet).await;
    // The server's own SETTINGS frame (type 4) came first.
    assert_eq!(read.get(3), Some(&4), "{read:?}");
    server.shutdown_within(Duration::from_millis(200)).await;
}

#[tokio::test]
async fn an_http_connection_is_closed_before_its_first_byte_and_after_its_answer() {
    let server = server().await;
    let address = server.http_address().unwrap();
    let mut silent = TcpStream::connect(address).await.unwrap();
    assert!(read_until_closed(&mut silent).await.is_empty());
    let mut kept_alive = TcpStream::connect(address).await.unwrap();
    kept_alive
        .write_all(b"GET /healthcheck HTTP/1.1\r\nHost: rls\r\n\r\n")
        .await
        .unwrap();
    let read = String::from_utf8(read_until_closed(&mut kept_alive).await).unwrap();
    assert!(read.starts_with("HTTP/1.1 200 OK\r\n"), "{read}");
    assert!(read.ends_with("OK"), "{read}");
    server.shutdown_within(Duration::from_millis(200)).await;
}

#[tokio::test]
async fn a_call_slower_than_the_idle_timeout_keeps_its_connection() {
    use envoy_types::pb::envoy::service::ratelimit::v3 as grpc;
    use grpc::rate_limit_service_client::RateLimitServiceClient;
    let server = server_deciding(Arc::new(Slow)).await;
    let mut client =
        RateLimitServiceClient::connect(format!("http://{}", server.grpc_address().unwrap()))
            .await
            .unwrap();
    // The call is quiet for 600 ms, twice the idle timeout, and answered.
    let answer = client
        .should_rate_limit(grpc::RateLimitRequest {
            domain: "d".to_owned(),
            ..Default::default()
        })
        .await
        .unwrap();
    assert_eq!(answer.into_inner().overall_code, 1, "OK");
    server.shutdown_within(Duration::from_millis(200)).await;
}

#[tokio::test]
async fn a_json_body_that_stops_coming_is_answered_and_its_connection_closed() {
    let server = server().await;
    let mut stalled = TcpStream::connect(server.http_address().unwrap())
        .await
        .unwrap();
    // A body of 100 bytes announced, 10 sent.
    stalled
        .write_all(b"POST /json HTTP/1.1\r\nHost: rls\r\nContent-Length: 100\r\n\r\n{\"domain\":")
        .await
        .unwrap();
    let read = String::from_utf8(read_until_closed(&mut stalled).await).unwrap();
    assert!(read.starts_with("HTTP/1.1 400 Bad Request\r\n"), "{read}");
    server.shutdown_within(Duration::from_millis(200)).await;
}

#[tokio::test]
async fn a_silent_connection_does_not_hold_a_stop_for_its_grace() {
    // Connections may idle a minute: only the stop closes them.
    let server = server_with(Arc::new(AlwaysOk), Duration::from_secs(60)).await;
    // Connected, no HTTP/2 preface: no GOAWAY can reach it.
    let _silent = TcpStream::connect(server.grpc_address().unwrap())
        .await
        .unwrap();
    let mut half_sent = TcpStream::connect(server.http_address().unwrap())
        .await
        .unwrap();
    half_sent
        .write_all(b"GET /healthcheck HTTP/1.1\r\nHost: rls\r\n")
        .await
        .unwrap();
    // A grace of 30 s: the stop ends long before it (nothing is in flight),
    // as the bound of 10 s on the wait shows.
    tokio::time::timeout(
        Duration::from_secs(10),
        server.shutdown_within(Duration::from_secs(30)),
    )
    .await
    .expect("the stop does not wait out its grace for connections with nothing in flight");
}
