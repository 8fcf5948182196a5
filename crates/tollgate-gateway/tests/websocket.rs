//! WebSockets through `tollgate serve`, end to end with tokio-tungstenite's
//! client and server: messages both ways, a close from either side, the
//! upgrade limited once (in memory and on Redis), a refused upgrade that
//! never reaches the upstream, an idle tunnel closed, the access log's line
//! written at the tunnel's end, and upgrades the gateway does not tunnel.
//! Expected values by hand.

use std::time::Duration;

use futures_util::{SinkExt, StreamExt};
use tokio_tungstenite::tungstenite::{Error, Message};
use tollgate_test_support::gateway::{Gateway, config};
use tollgate_test_support::loopback::Upstream;
use tollgate_test_support::redis as redis_support;
use tollgate_test_support::websocket::{
    CLOSE_PLEASE, WebSocketUpstream, connect, next, round_trip,
};

/// Plans as `gateway::plans` (default fixed window 5 per 60 s), every path
/// to `upstream` on a route named `route`, then `extra`.
fn gateway_config(upstream: std::net::SocketAddr, route: &str, extra: &str) -> String {
    config(&format!(
        "{extra}\n[limits.default_policy]\nalgorithm = \"fixed_window\"\nlimit = 5\nwindow_s = 60\n\
         [[routes]]\nname = \"{route}\"\nprefix = \"/\"\nupstream = \"http://{upstream}\"\n"
    ))
}

#[tokio::test]
async fn messages_go_both_ways_and_either_side_may_close() {
    let upstream = WebSocketUpstream::start().await;
    let gateway = Gateway::start(&gateway_config(upstream.address, "ws-both-ways", ""), 0).await;
    // `Keep-Alive` is hop-by-hop and stays here; the upgrade goes on.
    let extra = [("keep-alive", "timeout=5"), ("x-kept", "1")];
    let (mut socket, headers) = connect(gateway.running.address, "/chat", "sk_a", &extra)
        .await
        .unwrap();
    // The 101 carries the limit headers: 5 - 1 left.
    assert_eq!(headers["x-ratelimit-remaining"], "4");
    assert_eq!(round_trip(&mut socket, "hello").await, "echo: hello");
    socket.send(Message::binary(vec![1, 2])).await.unwrap();
    assert_eq!(
        next(&mut socket).await,
        Some(Message::binary(b"echo: \x01\x02".to_vec()))
    );
    let seen = upstream.last_headers();
    assert_eq!(seen["connection"], "upgrade");
    assert_eq!(seen["upgrade"], "websocket");
    assert_eq!(seen["x-kept"], "1");
    assert_eq!(seen["x-forwarded-for"], "127.0.0.1");
    assert!(seen.get("keep-alive").is_none());
    assert!(seen.contains_key("sec-websocket-key"));
    // The client closes: the upstream's close frame comes back, then the end.
    socket.close(None).await.unwrap();
    assert!(matches!(next(&mut socket).await, Some(Message::Close(_))));
    assert_eq!(next(&mut socket).await, None);

    // The upstream closes.
    let (mut socket, _) = connect(gateway.running.address, "/chat", "sk_a", &[])
        .await
        .unwrap();
    assert_eq!(round_trip(&mut socket, "again").await, "echo: again");
    socket.send(Message::text(CLOSE_PLEASE)).await.unwrap();
    match next(&mut socket).await {
        Some(Message::Close(Some(frame))) => assert_eq!(frame.reason, "the upstream closes"),
        other => panic!("expected the upstream's close frame, got {other:?}"),
    }
    assert_eq!(next(&mut socket).await, None);
    // One connection per WebSocket, none kept for reuse.
    assert_eq!((upstream.connections(), upstream.upgrades()), (2, 2));
}

/// Five upgrades of one key with ten messages each: the budget of 5 counts
/// the upgrades alone (remaining 4, 3, 2, 1, 0); the sixth is refused with
/// `Retry-After` and never reaches the upstream. `retry_after` is what the
/// refusal's `Retry-After` must be.
async fn upgrades_are_limited_once_each(
    gateway: &Gateway,
    upstream: &WebSocketUpstream,
    retry_after: &str,
) {
    for remaining in ["4", "3", "2", "1", "0"] {
        let (mut socket, headers) = connect(gateway.running.address, "/", "sk_budget", &[])
            .await
            .unwrap();
        assert_eq!(headers["x-ratelimit-remaining"], remaining);
        for message in 0..10 {
            let text = format!("message {message}");
            assert_eq!(
                round_trip(&mut socket, &text).await,
                format!("echo: {text}")
            );
        }
        socket.close(None).await.unwrap();
        while next(&mut socket).await.is_some() {}
    }
    assert_eq!((upstream.connections(), upstream.upgrades()), (5, 5));
    let refused = connect(gateway.running.address, "/", "sk_budget", &[]).await;
    let Err(Error::Http(response)) = refused else {
        panic!("the sixth upgrade was not refused: {refused:?}");
    };
    assert_eq!(response.status(), 429);
    assert_eq!(response.headers()["retry-after"], retry_after);
    // The upstream never saw it.
    assert_eq!((upstream.connections(), upstream.upgrades()), (5, 5));
}

#[tokio::test]
async fn an_upgrade_is_limited_once_in_memory() {
    let upstream = WebSocketUpstream::start().await;
    let gateway = Gateway::start(&gateway_config(upstream.address, "ws-memory", ""), 0).await;
    // The window of 60 s began at 0 s, on the gateway's manual clock.
    upgrades_are_limited_once_each(&gateway, &upstream, "60").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[cfg_attr(not(has_redis), ignore = "set REDIS_URL=redis://127.0.0.1:6379 to run")]
async fn an_upgrade_is_limited_once_on_redis() {
    let url = redis_support::require_redis_url();
    let prefix = redis_support::prefix("websocket");
    let store = format!(
        "[store]\nurl = \"{url}\"\nprefix = \"{prefix}\"\ntimeout = \"5s\"\ntime = \"local\"\n"
    );
    let upstream = WebSocketUpstream::start().await;
    let gateway = Gateway::start(&gateway_config(upstream.address, "ws-redis", &store), 0).await;
    // The gateway's manual clock (time = "local", at 0 s) decides the
    // window's end, as in memory: 60 s away.
    upgrades_are_limited_once_each(&gateway, &upstream, "60").await;
    redis_support::cleanup(&url, &prefix);
}

#[tokio::test]
async fn a_silent_websocket_is_closed_after_the_body_idle_timeout() {
    let upstream = WebSocketUpstream::start().await;
    let toml = gateway_config(
        upstream.address,
        "ws-idle",
        "[upstream]\nbody_idle_timeout = \"200ms\"",
    );
    let gateway = Gateway::start(&toml, 0).await;
    let (mut socket, _) = connect(gateway.running.address, "/", "sk_a", &[])
        .await
        .unwrap();
    assert_eq!(round_trip(&mut socket, "hello").await, "echo: hello");
    // Then nothing either way: the gateway closes both connections (TCP,
    // without a close frame: it does not speak WebSocket).
    let ended = tokio::time::timeout(Duration::from_secs(10), socket.next())
        .await
        .expect("the gateway closed the idle WebSocket");
    assert!(
        matches!(ended, None | Some(Err(_))),
        "expected the end, got {ended:?}"
    );
}

/// A gateway as [`gateway_config`] with route `route`, logging JSON lines
/// to a file in `directory`; the file's path.
async fn logging_gateway(
    upstream: &WebSocketUpstream,
    route: &str,
    directory: &tempfile::TempDir,
) -> (Gateway, std::path::PathBuf) {
    let path = directory.path().join("access.log");
    let toml = gateway_config(
        upstream.address,
        route,
        &format!(
            "[access_log]\nenabled = true\npath = \"{}\"\nformat = \"json\"",
            path.display()
        ),
    );
    (Gateway::start(&toml, 0).await, path)
}

/// The one line of an access log whose text is `text`, read as JSON.
fn only_line(text: &str) -> serde_json::Value {
    let lines: Vec<&str> = text.lines().collect();
    assert_eq!(lines.len(), 1, "{text}");
    serde_json::from_str(lines[0]).unwrap()
}

/// The access log's line of a WebSocket is written when its tunnel ends,
/// with the bytes the tunnel sent to the client: the upstream's two frames,
/// counted by hand (RFC 6455 section 5.2: a server's frames are unmasked,
/// two bytes of header for a payload under 126 bytes): the text
/// `echo: hello` (11 bytes) is 13; the close frame, code 1000 (2 bytes) and
/// the reason `the upstream closes` (19), is 23. 36 in all.
#[tokio::test]
async fn the_access_log_line_of_a_websocket_counts_what_its_tunnel_sent() {
    let upstream = WebSocketUpstream::start().await;
    let directory = tempfile::tempdir().unwrap();
    let (gateway, path) = logging_gateway(&upstream, "ws-logged", &directory).await;
    let (mut socket, _) = connect(gateway.running.address, "/chat", "sk_a", &[])
        .await
        .unwrap();
    assert_eq!(round_trip(&mut socket, "hello").await, "echo: hello");
    socket.send(Message::text(CLOSE_PLEASE)).await.unwrap();
    assert!(matches!(next(&mut socket).await, Some(Message::Close(_))));
    assert_eq!(next(&mut socket).await, None);
    // The client's connection closes too: the tunnel ends.
    drop(socket);
    // The writer writes every 20 ms: wait for the line, 10 s at most.
    let mut text = String::new();
    for _ in 0..500 {
        text = std::fs::read_to_string(&path).unwrap_or_default();
        if !text.is_empty() {
            break;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let line = only_line(&text);
    assert_eq!(line["status"], 101, "{line}");
    assert_eq!(line["upstream_status"], 101, "{line}");
    assert_eq!(line["route"], "ws-logged", "{line}");
    assert_eq!(line["decision"], "allowed", "{line}");
    assert_eq!(line["bytes"], 36, "{line}");
}

/// A WebSocket still open when the gateway stops is cut off, and its line
/// written then, with what the tunnel had sent: the 13 bytes of the frame
/// `echo: hello` (2 of header, 11 of payload).
#[tokio::test]
async fn a_websocket_cut_off_at_shutdown_still_gets_its_line() {
    let upstream = WebSocketUpstream::start().await;
    let directory = tempfile::tempdir().unwrap();
    let (gateway, path) = logging_gateway(&upstream, "ws-cut", &directory).await;
    let (mut socket, _) = connect(gateway.running.address, "/chat", "sk_a", &[])
        .await
        .unwrap();
    assert_eq!(round_trip(&mut socket, "hello").await, "echo: hello");
    // Stopping writes out every line before it returns.
    gateway.running.shutdown().await;
    let line = only_line(&std::fs::read_to_string(&path).unwrap());
    assert_eq!(
        (&line["status"], &line["bytes"]),
        (&101.into(), &13.into()),
        "{line}"
    );
}

#[tokio::test]
async fn an_upgrade_the_upstream_declines_is_a_plain_response() {
    // An HTTP upstream that does not speak WebSocket answers 200.
    let upstream = Upstream::start().await;
    let gateway = Gateway::start(&gateway_config(upstream.address, "ws-declined", ""), 0).await;
    let declined = connect(gateway.running.address, "/", "sk_a", &[]).await;
    let Err(Error::Http(response)) = declined else {
        panic!("expected a plain response: {declined:?}");
    };
    assert_eq!(response.status(), 200);
    assert_eq!(response.body().as_deref(), Some(&b"upstream"[..]));
    assert_eq!(upstream.requests(), 1);
}

#[tokio::test]
async fn an_h2c_upgrade_is_served_as_a_plain_request() {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let upstream = Upstream::start().await;
    let gateway = Gateway::start(&gateway_config(upstream.address, "ws-h2c", ""), 0).await;
    let mut stream = tokio::net::TcpStream::connect(gateway.running.address)
        .await
        .unwrap();
    let request = "GET /headers HTTP/1.1\r\nHost: test\r\nAuthorization: Bearer sk_a\r\n\
                   Connection: Upgrade, HTTP2-Settings, close\r\nUpgrade: h2c\r\n\
                   HTTP2-Settings: AAMAAABkAARAAAAAAAIAAAAA\r\n\r\n";
    stream.write_all(request.as_bytes()).await.unwrap();
    let mut response = String::new();
    stream.read_to_string(&mut response).await.unwrap();
    assert!(response.starts_with("HTTP/1.1 200 "), "{response}");
    let body = &response[response.find("\r\n\r\n").unwrap() + 4..];
    let echoed: serde_json::Value = serde_json::from_str(body).unwrap();
    let headers = echoed["headers"].as_object().unwrap();
    for name in ["upgrade", "http2-settings"] {
        assert!(!headers.contains_key(name), "{name} reached the upstream");
    }
}

#[tokio::test]
async fn an_http2_client_gets_an_answer_not_a_hang() {
    use http_body_util::Empty;
    use hyper_util::rt::{TokioExecutor, TokioIo};
    let upstream = WebSocketUpstream::start().await;
    let gateway = Gateway::start(&gateway_config(upstream.address, "ws-http2", ""), 0).await;
    let stream = tokio::net::TcpStream::connect(gateway.running.address)
        .await
        .unwrap();
    let (mut sender, connection) =
        hyper::client::conn::http2::handshake(TokioExecutor::new(), TokioIo::new(stream))
            .await
            .unwrap();
    tokio::spawn(connection);
    let authority = gateway.running.address.to_string();
    // RFC 8441's extended CONNECT (a WebSocket over HTTP/2) is not offered:
    // the client cannot send it, and learns so at once.
    let extended = http::Request::connect(format!("http://{authority}/chat"))
        .header("authorization", "Bearer sk_a")
        .extension(hyper::ext::Protocol::from_static("websocket"))
        .body(Empty::<bytes::Bytes>::new())
        .unwrap();
    let answered = tokio::time::timeout(Duration::from_secs(10), sender.send_request(extended))
        .await
        .expect("an answer, not a hang");
    assert!(answered.is_err(), "{answered:?}");
    // A plain CONNECT gets 501.
    let plain = http::Request::connect(authority.as_str())
        .header("authorization", "Bearer sk_a")
        .body(Empty::<bytes::Bytes>::new())
        .unwrap();
    let answered = tokio::time::timeout(Duration::from_secs(10), sender.send_request(plain))
        .await
        .expect("an answer, not a hang")
        .unwrap();
    assert_eq!(answered.status(), 501);
    assert_eq!(upstream.connections(), 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_websocket_holds_its_concurrency_slot_while_its_tunnel_is_open() {
    let upstream = WebSocketUpstream::start().await;
    let gateway = Gateway::start(
        &format!(
            "{}max_in_flight = 1\n",
            gateway_config(upstream.address, "ws-slot", "")
        ),
        0,
    )
    .await;
    let (mut socket, _) = connect(gateway.running.address, "/chat", "sk_a", &[])
        .await
        .unwrap();
    round_trip(&mut socket, "hello").await;
    assert_eq!(gateway.running.slots_held(), 1);
    // Another request of the same key while the tunnel is open: refused.
    assert!(
        connect(gateway.running.address, "/chat", "sk_a", &[])
            .await
            .is_err()
    );
    socket.close(None).await.unwrap();
    while next(&mut socket).await.is_some() {}
    drop(socket);
    // The tunnel's end gives the slot back (once its task has seen it).
    for _ in 0..500 {
        if gateway.running.slots_held() == 0 {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(10)).await;
    }
    assert_eq!(gateway.running.slots_held(), 0);
    let (mut again, _) = connect(gateway.running.address, "/chat", "sk_a", &[])
        .await
        .unwrap();
    round_trip(&mut again, "again").await;
}
