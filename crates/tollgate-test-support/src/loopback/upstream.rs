//! A test upstream on 127.0.0.1.

use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use axum::Router;
use axum::body::Body;
use axum::extract::Request;
use axum::routing::{any, get};
use axum::serve::ListenerExt;
use tokio::sync::Notify;

/// A test upstream on 127.0.0.1 (axum): counts requests and connections;
/// `/echo` streams the body back, `/headers` answers with the request's
/// headers as JSON, `/slow` waits for `release`, `/close` answers and closes
/// its connection, `/read` reads the whole body and answers its length,
/// `/stall` sends its headers and a first part of its body, then nothing;
/// `/busy` answers after 20 ms (so that concurrent requests overlap);
/// anything else is answered 200 `upstream`. It records the most requests
/// it ever had in flight at once (until their response headers).
#[derive(Clone)]
pub struct Upstream {
    /// Where it listens.
    pub address: SocketAddr,
    /// Requests received so far.
    pub requests: Arc<AtomicUsize>,
    /// Connections accepted so far.
    pub connections: Arc<AtomicUsize>,
    /// Notified to answer the requests waiting on `/slow`.
    pub release: Arc<Notify>,
    /// Requests in flight now (until their response headers).
    pub in_flight: Arc<AtomicUsize>,
    /// The most requests ever in flight at once.
    pub most_in_flight: Arc<AtomicUsize>,
}

impl Upstream {
    /// The upstream on a port the system picks.
    pub async fn start() -> Upstream {
        Upstream::start_at("127.0.0.1:0".parse().unwrap()).await
    }

    /// The upstream on `address` (a port of 0: one the system picks).
    pub async fn start_at(address: SocketAddr) -> Upstream {
        let requests = Arc::new(AtomicUsize::new(0));
        let release = Arc::new(Notify::new());
        let counted = Arc::clone(&requests);
        let waiting = Arc::clone(&release);
        let in_flight = Arc::new(AtomicUsize::new(0));
        let most_in_flight = Arc::new(AtomicUsize::new(0));
        let (now, most) = (Arc::clone(&in_flight), Arc::clone(&most_in_flight));
        let app = Router::new()
            .route("/read", any(|body: axum::body::Bytes| async move { body.len().to_string() }))
            .route("/echo", any(|request: Request| async move { Body::from_stream(request.into_body().into_data_stream()) }))
            .route(
                "/headers",
                any(|request: Request| async move {
                    let headers: serde_json::Map<String, serde_json::Value> = request
                        .headers()
                        .iter()
                        .map(|(name, value)| (name.to_string(), value.to_str().unwrap_or("").into()))
                        .collect();
                    axum::Json(serde_json::json!({ "path": request.uri().to_string(), "headers": headers }))
                }),
            )
            .route(
                "/slow",
                get(move || {
                    let waiting = Arc::clone(&waiting);
                    async move {
                        waiting.notified().await;
                        "finally"
                    }
                }),
            )
            .route("/close", any(|| async { ([("connection", "close")], "closing") }))
            .route(
                "/busy",
                any(|| async {
                    tokio::time::sleep(std::time::Duration::from_millis(20)).await;
                    "busy"
                }),
            )
            // Headers and a first part of the body, then nothing, for ever.
            .route(
                "/stall",
                get(|| async {
                    let first = futures_util::stream::once(async {
                        Ok::<_, std::convert::Infallible>("first part;")
                    });
                    Body::from_stream(futures_util::StreamExt::chain(
                        first,
                        futures_util::stream::pending(),
                    ))
                }),
            )
            .fallback(|| async { "upstream" })
            .layer(axum::middleware::from_fn(move |request: Request, next: axum::middleware::Next| {
                counted.fetch_add(1, Ordering::SeqCst);
                let (now, most) = (Arc::clone(&now), Arc::clone(&most));
                async move {
                    let in_flight = now.fetch_add(1, Ordering::SeqCst) + 1;
                    most.fetch_max(in_flight, Ordering::SeqCst);
                    let response = next.run(request).await;
                    now.fetch_sub(1, Ordering::SeqCst);
                    response
                }
            }));
        let listener = tokio::net::TcpListener::bind(address).await.unwrap();
        let address = listener.local_addr().unwrap();
        let connections = Arc::new(AtomicUsize::new(0));
        let accepted = Arc::clone(&connections);
        let listener = listener.tap_io(move |_| {
            accepted.fetch_add(1, Ordering::SeqCst);
        });
        tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
        Upstream {
            address,
            requests,
            connections,
            release,
            in_flight,
            most_in_flight,
        }
    }

    /// Requests received so far.
    pub fn requests(&self) -> usize {
        self.requests.load(Ordering::SeqCst)
    }

    /// The most requests it ever had in flight at once.
    pub fn most_in_flight(&self) -> usize {
        self.most_in_flight.load(Ordering::SeqCst)
    }

    /// Connections accepted so far.
    pub fn connections(&self) -> usize {
        self.connections.load(Ordering::SeqCst)
    }
}
