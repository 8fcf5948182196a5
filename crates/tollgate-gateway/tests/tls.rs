//! TLS end to end, in process, with certificates made by each test (rcgen,
//! never a key file in the repository): the gateway listener over HTTPS
//! (HTTP/2 and HTTP/1.1 chosen by ALPN), its certificate swapped by a reload
//! and kept when the new files are bad; an `https://` upstream reached
//! through the CA of `[upstream_tls] ca_file`, its name sent (SNI) and
//! checked; an idle TLS connection closed. Limits in a Redis reached over
//! TLS are in `tls_redis.rs`.

mod tls_support;

use std::net::SocketAddr;

use std::sync::{Arc, Mutex};

use axum::Router;
use axum::routing::any;
use bytes::Bytes;
use http::{Request, StatusCode, Version};
use http_body_util::{BodyExt, Empty};
use hyper_util::rt::{TokioExecutor, TokioIo};
use rustls::ClientConfig;
use rustls::pki_types::CertificateDer;
use rustls::server::Acceptor;
use tls_support::{Issued, TestCa, directory, tls_section};
use tokio_rustls::{LazyConfigAcceptor, TlsConnector};
use tollgate_test_support::gateway::{Gateway, config, header};
use tollgate_test_support::loopback::Upstream;

/// What a request over TLS got: the protocol, the status, the body, and the
/// certificate the server showed.
struct Answer {
    version: Version,
    status: StatusCode,
    body: String,
    certificate: CertificateDer<'static>,
}

/// A GET of `path` with `key` on a new TLS connection to `address` named
/// `name`, with `client`: HTTP/2 when ALPN chose `h2`, HTTP/1.1 otherwise.
async fn https_get(
    address: SocketAddr,
    name: &'static str,
    client: &ClientConfig,
    path: &str,
    key: &str,
) -> Answer {
    let tcp = tokio::net::TcpStream::connect(address).await.unwrap();
    let connector = TlsConnector::from(Arc::new(client.clone()));
    let server_name = rustls::pki_types::ServerName::try_from(name).unwrap();
    let tls = connector.connect(server_name, tcp).await.unwrap();
    let (_, session) = tls.get_ref();
    let certificate = session.peer_certificates().unwrap()[0].clone();
    let h2 = session.alpn_protocol() == Some(b"h2");
    let io = TokioIo::new(tls);
    let request = |uri: String| {
        Request::get(uri)
            .header("authorization", format!("Bearer {key}"))
            .body(Empty::<Bytes>::new())
            .unwrap()
    };
    let response = if h2 {
        let (mut sender, connection) =
            hyper::client::conn::http2::handshake(TokioExecutor::new(), io)
                .await
                .unwrap();
        tokio::spawn(connection);
        let uri = format!("https://{name}:{}{path}", address.port());
        sender.send_request(request(uri)).await.unwrap()
    } else {
        let (mut sender, connection) = hyper::client::conn::http1::handshake(io).await.unwrap();
        tokio::spawn(connection);
        let mut request = request(path.to_owned());
        request.headers_mut().insert(
            "host",
            format!("{name}:{}", address.port()).parse().unwrap(),
        );
        sender.send_request(request).await.unwrap()
    };
    let (version, status) = (response.version(), response.status());
    let body = response.into_body().collect().await.unwrap().to_bytes();
    Answer {
        version,
        status,
        body: String::from_utf8(body.to_vec()).unwrap(),
        certificate,
    }
}

#[tokio::test]
async fn the_listener_serves_https_with_http2_or_http1_as_alpn_chooses() {
    let ca = TestCa::new("listener CA");
    let files = directory("alpn");
    ca.issue(&["localhost"]).write(&files);
    let upstream = Upstream::start().await;
    let gateway = Gateway::start(
        &config(&format!(
            "{}[[routes]]\nname = \"tls_alpn\"\nprefix = \"/\"\nupstream = \"http://{}\"\n",
            tls_section(&files),
            upstream.address
        )),
        0,
    )
    .await;
    let address = gateway.running.address;
    let h2 = https_get(
        address,
        "localhost",
        &ca.client(&[b"h2", b"http/1.1"]),
        "/",
        "sk_a",
    )
    .await;
    assert_eq!(h2.version, Version::HTTP_2);
    assert_eq!((h2.status, h2.body.as_str()), (StatusCode::OK, "upstream"));
    let h1 = https_get(
        address,
        "localhost",
        &ca.client(&[b"http/1.1"]),
        "/",
        "sk_a",
    )
    .await;
    assert_eq!(h1.version, Version::HTTP_11);
    assert_eq!((h1.status, h1.body.as_str()), (StatusCode::OK, "upstream"));
    // No ALPN at all: HTTP/1.1.
    let plain = https_get(address, "localhost", &ca.client(&[]), "/headers", "sk_a").await;
    assert_eq!(plain.version, Version::HTTP_11);
    let seen: serde_json::Value = serde_json::from_str(&plain.body).unwrap();
    assert_eq!(seen["headers"]["x-forwarded-proto"], "https");
    // Plain HTTP on an HTTPS listener gets no answer.
    let refused = gateway.client.get(gateway.url("/")).send().await;
    assert!(refused.is_err(), "{refused:?}");
    gateway.running.shutdown().await;
}

#[tokio::test]
async fn a_reload_puts_new_certificates_in_force_and_keeps_the_old_over_bad_files() {
    let ca = TestCa::new("reload CA");
    let files = directory("reload");
    let first = ca.issue(&["localhost"]);
    first.write(&files);
    let upstream = Upstream::start().await;
    let toml = config(&format!(
        "{}[[routes]]\nname = \"tls_reload\"\nprefix = \"/\"\nupstream = \"http://{}\"\n",
        tls_section(&files),
        upstream.address
    ));
    let path = files.join("gateway.toml");
    std::fs::write(&path, &toml).unwrap();
    let config = tollgate_gateway::ServeConfig::from_file(&path).unwrap();
    let gateway = Gateway::start_with(config, Some(path), 0).await;
    let address = gateway.running.address;
    let client = ca.client(&[b"h2"]);
    let shown = || https_get(address, "localhost", &client, "/", "sk_a");
    assert_eq!(shown().await.certificate, first.der);

    let second = ca.issue(&["localhost"]);
    second.write(&files);
    gateway.running.reload().unwrap();
    let answer = shown().await;
    assert_eq!(answer.certificate, second.der);
    assert_eq!(answer.status, StatusCode::OK);

    // A certificate file that is not PEM: refused, the second stays.
    std::fs::write(files.join("cert.pem"), "not a certificate").unwrap();
    let error = gateway.running.reload().unwrap_err().to_string();
    assert!(error.contains("tls.cert"), "{error}");
    assert_eq!(shown().await.certificate, second.der);
    // A certificate whose key is another's: refused too.
    let third = ca.issue(&["localhost"]);
    std::fs::write(files.join("cert.pem"), &third.cert_pem).unwrap();
    let error = gateway.running.reload().unwrap_err().to_string();
    assert!(
        error.contains("cannot sign for tls.cert")
            && error.ends_with("the key is not the certificate's (their public keys differ)"),
        "{error}"
    );
    assert_eq!(shown().await.certificate, second.der);
    // A key file gone: refused.
    third.write(&files);
    std::fs::remove_file(files.join("key.pem")).unwrap();
    let error = gateway.running.reload().unwrap_err().to_string();
    assert!(error.contains("tls.key"), "{error}");
    assert_eq!(shown().await.certificate, second.der);
    // A key that is a device that never ends, or a FIFO no one writes: refused
    // without being read (the device's read aborted the process, the FIFO's
    // never returned).
    std::os::unix::fs::symlink("/dev/zero", files.join("key.pem")).unwrap();
    let error = gateway.running.reload().unwrap_err().to_string();
    assert!(error.ends_with("key.pem: not a regular file"), "{error}");
    std::fs::remove_file(files.join("key.pem")).unwrap();
    let made = std::process::Command::new("mkfifo")
        .arg(files.join("key.pem"))
        .status()
        .unwrap();
    assert!(made.success(), "mkfifo");
    let error = gateway.running.reload().unwrap_err().to_string();
    assert!(error.ends_with("key.pem: not a regular file"), "{error}");
    assert_eq!(shown().await.certificate, second.der);
    gateway.running.shutdown().await;
}

/// An HTTPS upstream with `issued`'s certificate on 127.0.0.1, answering
/// every request with its `Host`, and the server names (SNI) its clients
/// sent.
async fn tls_upstream(issued: &Issued) -> (SocketAddr, Arc<Mutex<Vec<String>>>) {
    let server = Arc::new(issued.server());
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let address = listener.local_addr().unwrap();
    let names = Arc::new(Mutex::new(Vec::new()));
    let seen = Arc::clone(&names);
    let app = Router::new().fallback(any(|request: axum::extract::Request| async move {
        let host = request.headers().get("host").cloned();
        format!("tls upstream, host {}", host.unwrap().to_str().unwrap())
    }));
    tokio::spawn(async move {
        loop {
            let (tcp, _) = listener.accept().await.unwrap();
            let (server, app, seen) = (Arc::clone(&server), app.clone(), Arc::clone(&seen));
            tokio::spawn(async move {
                let acceptor = LazyConfigAcceptor::new(Acceptor::default(), tcp);
                let Ok(start) = acceptor.await else {
                    return;
                };
                // Recorded before the certificate is sent, so a client that
                // refuses it is counted too.
                let name = start.client_hello().server_name().unwrap_or("").to_owned();
                seen.lock().unwrap().push(name);
                let Ok(tls) = start.into_stream(server).await else {
                    return;
                };
                let service = hyper_util::service::TowerToHyperService::new(app);
                let _ = hyper_util::server::conn::auto::Builder::new(TokioExecutor::new())
                    .serve_connection(TokioIo::new(tls), service)
                    .await;
            });
        }
    });
    (address, names)
}

#[tokio::test]
async fn an_https_upstream_is_reached_through_the_ca_file_and_its_name_is_checked() {
    let ca = TestCa::new("upstream CA");
    let files = directory("upstream");
    std::fs::write(files.join("ca.pem"), &ca.pem).unwrap();
    let (good, names) = tls_upstream(&ca.issue(&["localhost"])).await;
    let (misnamed, misnamed_names) = tls_upstream(&ca.issue(&["other.example"])).await;
    let gateway = Gateway::start(
        &config(&format!(
            "[upstream_tls]\nca_file = \"{}\"\n\
             [[routes]]\nname = \"tls_good\"\nprefix = \"/good\"\nupstream = \"https://localhost:{}\"\n\
             strip_prefix = true\n\
             [[routes]]\nname = \"tls_misnamed\"\nprefix = \"/misnamed\"\n\
             upstream = \"https://localhost:{}\"\n",
            files.join("ca.pem").display(),
            good.port(),
            misnamed.port()
        )),
        0,
    )
    .await;
    let answer = gateway.get("/good/x", "sk_a").await;
    assert_eq!(answer.status(), 200);
    assert_eq!(
        answer.text().await.unwrap(),
        format!("tls upstream, host localhost:{}", good.port())
    );
    // The connection is kept: a second request makes no new handshake.
    assert_eq!(gateway.status("/good/y", "sk_a").await, 200);
    assert_eq!(*names.lock().unwrap(), ["localhost"]);

    // The other upstream's certificate names another host: 502, counted.
    let refused = gateway.get("/misnamed", "sk_b").await;
    assert_eq!(refused.status(), 502);
    assert_eq!(
        header(&refused, "content-type").as_deref(),
        Some("application/problem+json")
    );
    assert_eq!(*misnamed_names.lock().unwrap(), ["localhost"]);
    assert_eq!(
        gateway
            .route_sample(
                "tollgate_upstream_failures_total",
                &[
                    ("route", "tls_misnamed"),
                    ("failure", "unreachable"),
                    ("server", &format!("localhost:{}", misnamed.port())),
                ]
            )
            .await,
        Some(1.0)
    );
    gateway.running.shutdown().await;
}

#[tokio::test]
async fn a_server_failing_its_tls_handshake_is_skipped_for_the_next() {
    let ca = TestCa::new("pair CA");
    let files = directory("pair");
    std::fs::write(files.join("ca.pem"), &ca.pem).unwrap();
    let (misnamed, misnamed_names) = tls_upstream(&ca.issue(&["other.example"])).await;
    let (good, good_names) = tls_upstream(&ca.issue(&["localhost"])).await;
    // The misnamed server is first, so the first request's turn is its.
    let gateway = Gateway::start(
        &config(&format!(
            "[upstream_tls]\nca_file = \"{}\"\n\
             [[routes]]\nname = \"tls_pair\"\nprefix = \"/\"\n\
             upstreams = [\"https://localhost:{}\", \"https://localhost:{}\"]\n",
            files.join("ca.pem").display(),
            misnamed.port(),
            good.port()
        )),
        0,
    )
    .await;
    // Nothing was written to the misnamed server, so every request is
    // answered by the good one, and the misnamed one is in back-off (10 s by
    // default) after its one failed handshake.
    for _ in 0..4 {
        assert_eq!(gateway.status("/x", "sk_a").await, 200);
    }
    assert_eq!(*misnamed_names.lock().unwrap(), ["localhost"]);
    assert_eq!(*good_names.lock().unwrap(), ["localhost"]);
    assert_eq!(
        gateway
            .route_sample(
                "tollgate_upstream_failures_total",
                &[
                    ("route", "tls_pair"),
                    ("failure", "unreachable"),
                    ("server", &format!("localhost:{}", misnamed.port())),
                ]
            )
            .await,
        Some(1.0)
    );
    gateway.running.shutdown().await;
}

#[tokio::test]
async fn without_the_ca_file_a_private_ca_is_not_trusted() {
    let ca = TestCa::new("untrusted CA");
    let (address, names) = tls_upstream(&ca.issue(&["localhost"])).await;
    let gateway = Gateway::start(
        &config(&format!(
            "[[routes]]\nname = \"tls_untrusted\"\nprefix = \"/\"\nupstream = \"https://localhost:{}\"\n",
            address.port()
        )),
        0,
    )
    .await;
    assert_eq!(gateway.status("/", "sk_a").await, 502);
    assert_eq!(*names.lock().unwrap(), ["localhost"]);
    gateway.running.shutdown().await;
}

#[tokio::test]
async fn insecure_skip_verify_takes_any_certificate() {
    let ca = TestCa::new("unchecked CA");
    let (address, names) = tls_upstream(&ca.issue(&["other.example"])).await;
    let gateway = Gateway::start(
        &config(&format!(
            "[upstream_tls]\ninsecure_skip_verify = true\n\
             [[routes]]\nname = \"tls_unchecked\"\nprefix = \"/\"\n\
             upstream = \"https://localhost:{}\"\n",
            address.port()
        )),
        0,
    )
    .await;
    let answer = gateway.get("/", "sk_a").await;
    assert_eq!(answer.status(), 200);
    assert_eq!(
        answer.text().await.unwrap(),
        format!("tls upstream, host localhost:{}", address.port())
    );
    assert_eq!(*names.lock().unwrap(), ["localhost"]);
    gateway.running.shutdown().await;
}

#[test]
fn bad_tls_files_are_named_at_start() {
    let files = directory("start");
    std::fs::write(files.join("cert.pem"), "no PEM here").unwrap();
    std::fs::write(files.join("key.pem"), "no PEM here").unwrap();
    let runtime = tokio::runtime::Runtime::new().unwrap();
    let start = |toml: String| {
        let config = tollgate_gateway::ServeConfig::from_toml_str(&config(&toml)).unwrap();
        let options = tollgate_gateway::ServeOptions::new(config, None);
        runtime
            .block_on(tollgate_gateway::start(options))
            .err()
            .unwrap()
            .to_string()
    };
    let error = start(tls_section(&files));
    assert_eq!(
        error,
        format!(
            "tls.cert {}: no PEM certificate in the file",
            files.join("cert.pem").display()
        )
    );
    let error = start(format!(
        "[upstream_tls]\nca_file = \"{}\"\n\
         [[routes]]\nprefix = \"/\"\nupstream = \"https://localhost:1\"\n",
        files.join("missing.pem").display()
    ));
    assert!(
        error.starts_with(&format!(
            "upstream_tls.ca_file {}:",
            files.join("missing.pem").display()
        )),
        "{error}"
    );
}

#[tokio::test]
async fn a_tls_connection_silent_after_its_handshake_is_closed() {
    use tokio::io::AsyncReadExt;
    let ca = TestCa::new("idle CA");
    let files = directory("idle");
    ca.issue(&["localhost"]).write(&files);
    let upstream = Upstream::start().await;
    // idle_timeout (a top-level setting) of 300 ms; before, such a
    // connection stayed open until the client left.
    let toml = format!(
        "idle_timeout = \"300ms\"\n{}",
        config(&format!(
            "{}[[routes]]\nname = \"tls_idle\"\nprefix = \"/\"\nupstream = \"http://{}\"\n",
            tls_section(&files),
            upstream.address
        ))
    );
    let gateway = Gateway::start(&toml, 0).await;
    let tcp = tokio::net::TcpStream::connect(gateway.running.address)
        .await
        .unwrap();
    let connector = TlsConnector::from(Arc::new(ca.client(&[b"h2"])));
    let name = rustls::pki_types::ServerName::try_from("localhost").unwrap();
    let mut tls = connector.connect(name, tcp).await.unwrap();
    // The handshake is done; nothing more is sent. The gateway closes the
    // connection: the read ends (a close_notify, an end or a reset).
    let mut buffer = [0u8; 1024];
    let closed = tokio::time::timeout(std::time::Duration::from_secs(20), async {
        loop {
            match tls.read(&mut buffer).await {
                Ok(0) | Err(_) => return,
                Ok(_) => {}
            }
        }
    });
    closed
        .await
        .expect("the gateway closed the idle TLS connection");
}
