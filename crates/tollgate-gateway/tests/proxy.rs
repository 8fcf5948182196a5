//! `tollgate serve` end to end, as a reverse proxy: upstream failures,
//! streamed bodies, hop-by-hop headers, upstream connections, path forms,
//! stalls, CONNECT and message framing. Expected values by hand.

use std::time::Duration;
use tollgate_test_support::gateway::{Gateway, config, header, plans, raw_get};
use tollgate_test_support::loopback::Upstream;

/// Whether a body read failed because the connection ended before the body
/// did (an unexpected end of file beneath the HTTP error).
fn ended_early(error: &reqwest::Error) -> bool {
    let mut cause: Option<&(dyn std::error::Error + 'static)> = Some(error);
    while let Some(error) = cause {
        if error
            .downcast_ref::<std::io::Error>()
            .is_some_and(|error| error.kind() == std::io::ErrorKind::UnexpectedEof)
        {
            return true;
        }
        cause = error.source();
    }
    false
}

#[tokio::test]
async fn an_unreachable_upstream_gives_502_and_a_silent_one_504() {
    // A port with nothing behind it.
    let closed = {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        listener.local_addr().unwrap()
    };
    // A server that accepts connections and never answers.
    let silent = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let silent_address = silent.local_addr().unwrap();
    tokio::spawn(async move {
        let mut held = Vec::new();
        while let Ok((connection, _)) = silent.accept().await {
            held.push(connection);
        }
    });
    let toml = config(&format!(
        "[upstream]\ntimeout = \"100ms\"\n\
         [[routes]]\nprefix = \"/closed\"\nupstream = \"http://{closed}\"\n\
         [[routes]]\nprefix = \"/silent\"\nupstream = \"http://{silent_address}\"\n"
    ));
    let gateway = Gateway::start(&toml, 0).await;
    let unreachable = gateway.get("/closed", "sk_a").await;
    assert_eq!(unreachable.status(), 502);
    assert_eq!(
        header(&unreachable, "content-type").as_deref(),
        Some("application/problem+json")
    );
    let slow = gateway.get("/silent", "sk_a").await;
    assert_eq!(slow.status(), 504);
    // Limit headers are on these too: the requests were admitted, and both
    // counted (the built-in plan: 5 per window of 60 s, the first at 0 s).
    assert_eq!(
        header(&slow, "ratelimit").as_deref(),
        Some("\"default\";r=3;t=60")
    );
    // Unknown paths with routes configured: 404.
    assert_eq!(gateway.status("/nowhere", "sk_a").await, 404);
    // Each failure counted once, by route (named by prefix here) and server.
    let (closed, silent) = (closed.to_string(), silent_address.to_string());
    for (route, server, failure) in [
        ("/closed", &closed, "unreachable"),
        ("/silent", &silent, "timeout"),
    ] {
        let labels = [("route", route), ("server", server), ("failure", failure)];
        assert_eq!(
            gateway
                .route_sample("tollgate_upstream_failures_total", &labels)
                .await,
            Some(1.0),
            "{route}"
        );
    }
}

#[tokio::test]
async fn bodies_stream_both_ways_without_being_buffered_whole() {
    use futures_util::StreamExt;
    let upstream = Upstream::start().await;
    let gateway = Gateway::start(&plans(&upstream, ""), 0).await;
    let (sender, receiver) = tokio::sync::mpsc::channel::<Result<Vec<u8>, std::io::Error>>(1);
    let body = reqwest::Body::wrap_stream(tokio_stream::wrappers::ReceiverStream::new(receiver));
    sender.send(Ok(b"first chunk;".to_vec())).await.unwrap();
    let response = gateway
        .client
        .post(gateway.url("/echo"))
        .header("authorization", "Bearer sk_a")
        .body(body)
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 200);
    let mut echoed = response.bytes_stream();
    // The first chunk comes back while the request body is still open: neither
    // the gateway nor the upstream waited for the whole body.
    let first = tokio::time::timeout(Duration::from_secs(10), echoed.next())
        .await
        .expect("the first chunk came back before the body ended")
        .unwrap()
        .unwrap();
    assert_eq!(&first[..], b"first chunk;");
    // A large second part, then the end.
    let large = vec![b'x'; 4 << 20];
    sender.send(Ok(large.clone())).await.unwrap();
    drop(sender);
    let mut rest = Vec::new();
    while let Some(chunk) = echoed.next().await {
        rest.extend_from_slice(&chunk.unwrap());
    }
    assert_eq!(rest, large);
}

#[tokio::test]
async fn hop_by_hop_headers_stop_at_the_gateway_and_the_client_is_forwarded() {
    let upstream = Upstream::start().await;
    let gateway = Gateway::start(&plans(&upstream, ""), 0).await;
    let response = gateway
        .client
        .get(gateway.url("/headers?q=1"))
        .header("authorization", "Bearer sk_a")
        .header("connection", "x-private")
        .header("x-private", "1")
        .header("keep-alive", "timeout=5")
        .header("x-kept", "yes")
        .send()
        .await
        .unwrap();
    let seen: serde_json::Value = response.json().await.unwrap();
    let headers = &seen["headers"];
    assert_eq!(seen["path"], "/headers?q=1");
    assert!(headers.get("x-private").is_none());
    assert!(headers.get("keep-alive").is_none());
    assert_eq!(headers["x-kept"], "yes");
    assert_eq!(headers["x-forwarded-for"], "127.0.0.1");
    assert_eq!(headers["authorization"], "Bearer sk_a");
    // `Host` names the upstream, `X-Forwarded-Host` what the client asked for.
    assert_eq!(headers["host"], upstream.address.to_string());
    let gateway_host = gateway.url("").trim_start_matches("http://").to_owned();
    assert_eq!(headers["x-forwarded-host"], gateway_host.as_str());
}

#[tokio::test]
async fn upstream_connections_outlive_client_connections_and_are_reopened_when_closed() {
    let upstream = Upstream::start().await;
    // One worker: every request below goes through its connections.
    let toml = plans(&upstream, "").replacen(
        "listen = \"127.0.0.1:0\"\n",
        "listen = \"127.0.0.1:0\"\nworkers = 1\n",
        1,
    );
    let gateway = Gateway::start(&toml, 0).await;
    // A new client connection for each of three requests, then two requests
    // on one kept-alive client connection; the exempt key is never limited.
    let one_shot = reqwest::Client::builder()
        .pool_max_idle_per_host(0)
        .build()
        .unwrap();
    for _ in 0..3 {
        let response = one_shot
            .get(gateway.url("/"))
            .header("authorization", "Bearer sk_internal")
            .send()
            .await
            .unwrap();
        assert_eq!(response.status(), 200);
        assert_eq!(response.text().await.unwrap(), "upstream");
    }
    for _ in 0..2 {
        assert_eq!(gateway.status("/", "sk_internal").await, 200);
    }
    assert_eq!(upstream.requests(), 5);
    assert_eq!(
        upstream.connections(),
        1,
        "five requests on three client connections, one upstream connection"
    );
    // The upstream closes its connection after this answer; the client's
    // connection stays open (`Connection` is hop-by-hop).
    let response = gateway.get("/close", "sk_internal").await;
    assert_eq!(response.status(), 200);
    assert!(header(&response, "connection").is_none());
    assert_eq!(response.text().await.unwrap(), "closing");
    // The next request goes over a new upstream connection.
    let response = gateway.get("/", "sk_internal").await;
    assert_eq!(response.status(), 200);
    assert_eq!(response.text().await.unwrap(), "upstream");
    assert_eq!(upstream.requests(), 7);
    assert_eq!(upstream.connections(), 2);
}

#[tokio::test]
async fn other_spellings_of_a_path_land_on_the_same_route() {
    let upstream = Upstream::start().await;
    let routes = format!(
        "[[routes]]\nname = \"search\"\nprefix = \"/api/search\"\nupstream = \"http://{0}\"\nrpm = 2\nburst = 2\n\
         [[routes]]\nname = \"api\"\nprefix = \"/api\"\nupstream = \"http://{0}\"\n",
        upstream.address
    );
    let gateway = Gateway::start(&plans(&upstream, &routes), 0).await;
    assert_eq!(gateway.status("/api/search", "sk_a").await, 200);
    assert_eq!(gateway.status("/api/search", "sk_a").await, 200);
    // Each is /api/search once normalised: the route's budget is spent. (An
    // HTTP client would resolve dot segments itself: these go raw.)
    for spelling in [
        "/api/x/../search",
        "/api/./search",
        "/api/%73earch",
        "/api//search",
    ] {
        let (status, head) = raw_get(gateway.running.address, spelling, "sk_a").await;
        assert_eq!(status, 429, "{spelling}");
        let policy = head
            .lines()
            .find_map(|line| line.strip_prefix("ratelimit-policy: "));
        assert_eq!(
            policy,
            Some("\"default\";q=5;w=60, \"search\";q=2;w=60"),
            "{head}"
        );
    }
    // Paths that cannot be made unambiguous are refused.
    for refused in ["/api/a%2Fb", "/api/..%2f..", "/../etc", "/api\\search"] {
        assert_eq!(
            raw_get(gateway.running.address, refused, "sk_a").await.0,
            400,
            "{refused}"
        );
    }
    // The upstream gets the normal form.
    let seen: serde_json::Value = gateway
        .get("/%68eaders?q=1", "sk_b")
        .await
        .json()
        .await
        .unwrap();
    assert_eq!(seen["path"], "/headers?q=1");
}

#[tokio::test]
async fn an_upstream_that_stalls_in_a_body_has_the_response_cut_off() {
    let upstream = Upstream::start().await;
    // A route name of its own: the metrics are the test process's.
    let toml = config(&format!(
        "[upstream]\nbody_idle_timeout = \"1s\"\n\
         [[routes]]\nname = \"stalling\"\nprefix = \"/\"\nupstream = \"http://{}\"\n",
        upstream.address
    ));
    let gateway = Gateway::start(&toml, 0).await;
    let mut response = gateway.get("/stall", "sk_a").await;
    assert_eq!(response.status(), 200);
    let first = response.chunk().await.unwrap().unwrap();
    assert_eq!(&first[..], b"first part;");
    // The upstream sends nothing more; after 1 s the gateway cuts the
    // response off, and the client sees the body end in an error (not a
    // clean end, which would pass a truncated body for a whole one).
    let rest = tokio::time::timeout(Duration::from_secs(10), response.chunk())
        .await
        .expect("the gateway cut the stalled body off");
    let error = rest.expect_err("the body ended cleanly");
    assert!(ended_early(&error), "{error:?}");
    let server = upstream.address.to_string();
    let labels = [
        ("route", "stalling"),
        ("server", &server),
        ("failure", "body_stalled"),
    ];
    assert_eq!(
        gateway
            .route_sample("tollgate_upstream_failures_total", &labels)
            .await,
        Some(1.0)
    );
}

#[tokio::test]
async fn connect_is_refused_with_501_and_not_forwarded() {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let upstream = Upstream::start().await;
    let gateway = Gateway::start(&plans(&upstream, ""), 0).await;
    let mut stream = tokio::net::TcpStream::connect(gateway.running.address)
        .await
        .unwrap();
    stream
        .write_all(
            b"CONNECT example.com:443 HTTP/1.1\r\nHost: example.com:443\r\n\
              Authorization: Bearer sk_a\r\n\r\n",
        )
        .await
        .unwrap();
    let mut head = vec![0; 12];
    stream.read_exact(&mut head).await.unwrap();
    assert_eq!(head, b"HTTP/1.1 501");
    assert_eq!(upstream.requests(), 0);
    // The refusal used no budget: sk_a still has its 5.
    assert_eq!(
        header(&gateway.get("/", "sk_a").await, "x-ratelimit-remaining").as_deref(),
        Some("4")
    );
}

#[tokio::test]
async fn a_response_framed_twice_reaches_the_client_by_its_transfer_encoding() {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    // An upstream that frames its body both ways (RFC 9112 section 6.3 says
    // the chunked framing wins, and a proxy drops the length).
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let address = listener.local_addr().unwrap();
    tokio::spawn(async move {
        while let Ok((mut connection, _)) = listener.accept().await {
            tokio::spawn(async move {
                let mut head = Vec::new();
                let mut buffer = [0; 1024];
                while !head.windows(4).any(|end| end == b"\r\n\r\n") {
                    match connection.read(&mut buffer).await {
                        Ok(0) | Err(_) => return,
                        Ok(read) => head.extend_from_slice(&buffer[..read]),
                    }
                }
                let _ = connection
                    .write_all(
                        b"HTTP/1.1 200 OK\r\nContent-Length: 3\r\n\
                          Transfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n0\r\n\r\n",
                    )
                    .await;
            });
        }
    });
    let toml = config(&format!(
        "[[routes]]\nprefix = \"/\"\nupstream = \"http://{address}\"\n"
    ));
    let gateway = Gateway::start(&toml, 0).await;
    let response = gateway.get("/", "sk_a").await;
    assert_eq!(response.status(), 200);
    assert_eq!(header(&response, "content-length"), None);
    assert_eq!(response.text().await.unwrap(), "hello");
}

#[tokio::test]
async fn a_chunked_get_body_reaches_the_upstream() {
    let upstream = Upstream::start().await;
    let gateway = Gateway::start(&plans(&upstream, ""), 0).await;
    let body = reqwest::Body::wrap_stream(futures_util::stream::iter([Ok::<_, std::io::Error>(
        "query",
    )]));
    let response = gateway
        .client
        .get(gateway.url("/echo"))
        .header("authorization", "Bearer sk_a")
        // hyper (under reqwest) sends a GET body of unknown length only when
        // asked to chunk it.
        .header("transfer-encoding", "chunked")
        .body(body)
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 200);
    assert_eq!(response.text().await.unwrap(), "query");
}

/// A raw HTTP/1.1 request whose head is `head` (without the final empty
/// line): the status the gateway answers.
async fn raw_status(address: std::net::SocketAddr, head: &str) -> u16 {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let mut stream = tokio::net::TcpStream::connect(address).await.unwrap();
    stream
        .write_all(format!("{head}\r\nConnection: close\r\n\r\n").as_bytes())
        .await
        .unwrap();
    let mut response = String::new();
    stream.read_to_string(&mut response).await.unwrap();
    response[9..12].parse().unwrap()
}

#[tokio::test]
async fn an_http_1_1_request_without_one_host_gets_400_and_is_not_forwarded() {
    let upstream = Upstream::start().await;
    let gateway = Gateway::start(&plans(&upstream, ""), 0).await;
    let address = gateway.running.address;
    let key = "Authorization: Bearer sk_a";
    assert_eq!(
        raw_status(address, &format!("GET / HTTP/1.1\r\n{key}")).await,
        400
    );
    assert_eq!(
        raw_status(
            address,
            &format!("GET / HTTP/1.1\r\nHost: a\r\nHost: b\r\n{key}")
        )
        .await,
        400
    );
    assert_eq!(upstream.requests(), 0);
    // Neither used budget: the next request has 4 of 5 left.
    let response = gateway.get("/", "sk_a").await;
    assert_eq!(
        header(&response, "x-ratelimit-remaining").as_deref(),
        Some("4")
    );
    // HTTP/1.0 may leave Host out.
    assert_eq!(
        raw_status(address, &format!("GET / HTTP/1.0\r\n{key}")).await,
        200
    );
    assert_eq!(upstream.requests(), 2);
}

#[tokio::test]
async fn a_malformed_request_body_gets_400_and_is_no_upstream_failure() {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let upstream = Upstream::start().await;
    // A route name of its own: the metrics are the test process's.
    let toml = config(&format!(
        "[[routes]]\nname = \"malformed-body\"\nprefix = \"/\"\nupstream = \"http://{}\"\n",
        upstream.address
    ));
    let gateway = Gateway::start(&toml, 0).await;
    // A chunk size that is not hexadecimal, then one that overflows.
    for chunk in [
        "zz\r\nab\r\n0\r\n\r\n",
        "fffffffffffffffffffffff\r\nab\r\n0\r\n\r\n",
    ] {
        let mut stream = tokio::net::TcpStream::connect(gateway.running.address)
            .await
            .unwrap();
        let request = format!(
            "POST /read HTTP/1.1\r\nHost: test\r\nAuthorization: Bearer sk_a\r\n\
             Transfer-Encoding: chunked\r\nConnection: close\r\n\r\n{chunk}"
        );
        stream.write_all(request.as_bytes()).await.unwrap();
        let mut response = String::new();
        let _ = stream.read_to_string(&mut response).await;
        assert_eq!(&response[9..12], "400", "{chunk:?}: {response}");
    }
    assert!(
        !gateway
            .route_has_samples("tollgate_upstream_failures_total", "malformed-body")
            .await
    );
    assert_eq!(
        gateway
            .route_sample(
                "tollgate_client_body_errors_total",
                &[("route", "malformed-body")]
            )
            .await,
        Some(2.0)
    );
}

#[tokio::test]
async fn an_upstream_body_cut_short_is_counted_as_an_upstream_failure() {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    // An upstream that promises 10 bytes, sends 3 and closes.
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let address = listener.local_addr().unwrap();
    tokio::spawn(async move {
        while let Ok((mut stream, _)) = listener.accept().await {
            let mut head = [0u8; 4096];
            let _ = stream.read(&mut head).await;
            let _ = stream
                .write_all(b"HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\nabc")
                .await;
        }
    });
    // A route name of its own: the metrics are the test process's.
    let toml = config(&format!(
        "[[routes]]\nname = \"short-body\"\nprefix = \"/\"\nupstream = \"http://{address}\"\n"
    ));
    let gateway = Gateway::start(&toml, 0).await;
    let response = gateway.get("/", "sk_a").await;
    assert_eq!(response.status(), 200);
    let error = response.bytes().await.expect_err("the body ended cleanly");
    assert!(ended_early(&error), "{error:?}");
    let server = address.to_string();
    let labels = [
        ("route", "short-body"),
        ("server", &server),
        ("failure", "body_broken"),
    ];
    assert_eq!(
        gateway
            .route_sample("tollgate_upstream_failures_total", &labels)
            .await,
        Some(1.0)
    );
}

#[tokio::test]
async fn an_upstream_switching_protocols_unasked_gives_502() {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    // An upstream that answers 101 to a plain GET, which asked for no
    // upgrade (RFC 9110 section 15.2.2 forbids it; over HTTP/2 a 101 is
    // no answer at all).
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let address = listener.local_addr().unwrap();
    tokio::spawn(async move {
        while let Ok((mut stream, _)) = listener.accept().await {
            let mut head = [0u8; 4096];
            let _ = stream.read(&mut head).await;
            let _ = stream
                .write_all(
                    b"HTTP/1.1 101 Switching Protocols\r\nConnection: upgrade\r\n\
                      Upgrade: websocket\r\n\r\n",
                )
                .await;
            // Held open, as a switched connection would be.
            tokio::spawn(async move {
                let _ = stream.read(&mut head).await;
            });
        }
    });
    let toml = config(&format!(
        "[[routes]]\nname = \"switched-unasked\"\nprefix = \"/\"\nupstream = \"http://{address}\"\n"
    ));
    let gateway = Gateway::start(&toml, 0).await;
    let response = gateway.get("/", "sk_a").await;
    assert_eq!(response.status(), 502);
    // And over HTTP/2 with prior knowledge, where 101 does not exist.
    let http2 = hyper_util::client::legacy::Client::builder(hyper_util::rt::TokioExecutor::new())
        .http2_only(true)
        .build_http::<http_body_util::Empty<bytes::Bytes>>();
    let request = http::Request::get(gateway.url("/"))
        .header("authorization", "Bearer sk_b")
        .body(http_body_util::Empty::new())
        .unwrap();
    let response = http2.request(request).await.unwrap();
    assert_eq!(response.version(), http::Version::HTTP_2);
    assert_eq!(response.status(), 502);
    let server = address.to_string();
    let labels = [
        ("route", "switched-unasked"),
        ("server", &server),
        ("failure", "switched_unasked"),
    ];
    assert_eq!(
        gateway
            .route_sample("tollgate_upstream_failures_total", &labels)
            .await,
        Some(2.0)
    );
}
