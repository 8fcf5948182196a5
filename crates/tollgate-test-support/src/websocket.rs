//! A WebSocket upstream on 127.0.0.1 (tokio-tungstenite's server) and a
//! WebSocket client of the gateway (tokio-tungstenite's client).
//!
//! The upstream counts connections and completed upgrades, keeps the headers
//! of the last upgrade request, answers each text or binary message with
//! `echo: ` and the message, and closes the WebSocket itself (a close frame)
//! when it receives the text `close please`.

use std::net::SocketAddr;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use futures_util::{SinkExt, StreamExt};
use http::HeaderMap;
use tokio::net::TcpStream;
use tokio_tungstenite::tungstenite::handshake::server::{Request, Response};
use tokio_tungstenite::tungstenite::protocol::CloseFrame;
use tokio_tungstenite::tungstenite::protocol::frame::coding::CloseCode;
use tokio_tungstenite::tungstenite::{Error, Message};
use tokio_tungstenite::{MaybeTlsStream, WebSocketStream};

/// The text after which the upstream closes the WebSocket.
pub const CLOSE_PLEASE: &str = "close please";

/// A WebSocket upstream on 127.0.0.1 (see the module's documentation).
#[derive(Clone)]
pub struct WebSocketUpstream {
    /// Where it listens.
    pub address: SocketAddr,
    connections: Arc<AtomicUsize>,
    upgrades: Arc<AtomicUsize>,
    last_headers: Arc<Mutex<Option<HeaderMap>>>,
}

impl WebSocketUpstream {
    /// The upstream on a port the system picks.
    pub async fn start() -> WebSocketUpstream {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let upstream = WebSocketUpstream {
            address: listener.local_addr().unwrap(),
            connections: Arc::default(),
            upgrades: Arc::default(),
            last_headers: Arc::default(),
        };
        let serving = upstream.clone();
        tokio::spawn(async move {
            while let Ok((stream, _)) = listener.accept().await {
                serving.connections.fetch_add(1, Ordering::SeqCst);
                tokio::spawn(serving.clone().serve(stream));
            }
        });
        upstream
    }

    async fn serve(self, stream: TcpStream) {
        let seen = Arc::clone(&self.last_headers);
        // tungstenite's callback type, whatever the size of its error.
        #[allow(clippy::result_large_err)]
        let callback = move |request: &Request, response: Response| {
            *seen.lock().unwrap() = Some(request.headers().clone());
            Ok(response)
        };
        let Ok(mut socket) = tokio_tungstenite::accept_hdr_async(stream, callback).await else {
            return;
        };
        self.upgrades.fetch_add(1, Ordering::SeqCst);
        while let Some(Ok(message)) = socket.next().await {
            let answer = match message {
                Message::Text(text) if text.as_str() == CLOSE_PLEASE => {
                    let frame = CloseFrame {
                        code: CloseCode::Normal,
                        reason: "the upstream closes".into(),
                    };
                    Message::Close(Some(frame))
                }
                Message::Text(text) => Message::text(format!("echo: {}", text.as_str())),
                Message::Binary(bytes) => Message::binary([b"echo: ".as_slice(), &bytes].concat()),
                // Pings are answered and closes completed by tungstenite.
                _ => continue,
            };
            if socket.send(answer).await.is_err() {
                return;
            }
        }
    }

    /// Connections accepted so far.
    pub fn connections(&self) -> usize {
        self.connections.load(Ordering::SeqCst)
    }

    /// WebSocket handshakes completed so far.
    pub fn upgrades(&self) -> usize {
        self.upgrades.load(Ordering::SeqCst)
    }

    /// The headers of the last upgrade request received.
    pub fn last_headers(&self) -> HeaderMap {
        self.last_headers
            .lock()
            .unwrap()
            .clone()
            .unwrap_or_default()
    }
}

/// A WebSocket client's connection.
pub type Client = WebSocketStream<MaybeTlsStream<TcpStream>>;

/// A WebSocket to `ws://address/path` with `Authorization: Bearer key` and
/// the `extra` headers: the socket and the 101's headers, or tungstenite's
/// error (a refusal is `Error::Http` with the response).
pub async fn connect(
    address: SocketAddr,
    path: &str,
    key: &str,
    extra: &[(&'static str, &'static str)],
) -> Result<(Client, HeaderMap), Error> {
    use tokio_tungstenite::tungstenite::client::IntoClientRequest;
    let mut request = format!("ws://{address}{path}").into_client_request()?;
    let headers = request.headers_mut();
    headers.insert("authorization", format!("Bearer {key}").parse().unwrap());
    for (name, value) in extra {
        headers.insert(*name, value.parse().unwrap());
    }
    let (socket, response) = tokio_tungstenite::connect_async(request).await?;
    Ok((socket, response.headers().clone()))
}

/// Sends `text` on `socket` and returns the next text message.
pub async fn round_trip(socket: &mut Client, text: &str) -> String {
    socket.send(Message::text(text)).await.unwrap();
    match next(socket).await {
        Some(Message::Text(answer)) => answer.as_str().to_owned(),
        other => panic!("expected a text message, got {other:?}"),
    }
}

/// The next message on `socket` (at most 10 s away), `None` once it ended.
pub async fn next(socket: &mut Client) -> Option<Message> {
    let next = tokio::time::timeout(std::time::Duration::from_secs(10), socket.next());
    match next.await.expect("a message within 10 s") {
        Some(Ok(message)) => Some(message),
        Some(Err(Error::ConnectionClosed | Error::AlreadyClosed)) | None => None,
        Some(Err(error)) => panic!("the WebSocket failed: {error}"),
    }
}
