//! Upgraded connections (RFC 9110 section 7.8): which requests are proxied as
//! an upgrade (WebSocket alone), the two headers of an upgrade passed on
//! among the hop-by-hop ones, and the tunnel that carries bytes both ways
//! once both sides have switched, closed after a pause in both directions
//! longer than the idle timeout.
//!
//! The request that asks for the upgrade is limited like any other; what
//! then flows through the tunnel is not seen, so only protocols that carry
//! one client's session are tunneled: WebSocket (RFC 6455). `h2c` would
//! carry any number of HTTP/2 requests past the limits, and is never
//! forwarded (the request is served as a plain one, without its `Upgrade`,
//! as a server that declines an upgrade answers).

use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::task::{Context, Poll};
use std::time::Duration;

use http::header::{CONNECTION, UPGRADE};
use http::{HeaderMap, HeaderValue, Method, Request, Version};
use hyper::upgrade::OnUpgrade;
use hyper_util::rt::TokioIo;
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::time::Instant;

/// The one protocol tunneled.
const WEBSOCKET: &str = "websocket";

/// The `Upgrade` value of `request` when it is an upgrade the gateway
/// proxies: an HTTP/1.1 `GET` whose `Connection` names `upgrade` and whose
/// `Upgrade` is `websocket` alone (any case); `None` for every other request.
pub(crate) fn websocket_upgrade<B>(request: &Request<B>) -> Option<HeaderValue> {
    if request.version() != Version::HTTP_11 || request.method() != Method::GET {
        return None;
    }
    let headers = request.headers();
    let upgrade = headers.get(UPGRADE)?;
    let only_websocket = upgrade
        .to_str()
        .is_ok_and(|value| value.trim().eq_ignore_ascii_case(WEBSOCKET));
    (only_websocket && connection_names_upgrade(headers)).then(|| upgrade.clone())
}

/// Whether a `Connection` line of `headers` names the `upgrade` option.
fn connection_names_upgrade(headers: &HeaderMap) -> bool {
    headers
        .get_all(CONNECTION)
        .iter()
        .filter_map(|value| value.to_str().ok())
        .flat_map(|value| value.split(','))
        .any(|option| option.trim().eq_ignore_ascii_case("upgrade"))
}

/// Puts the two hop-by-hop headers of an upgrade into `headers` (once the
/// others are removed): `Connection: upgrade` and `Upgrade: protocol`.
pub(crate) fn keep_upgrade_headers(headers: &mut HeaderMap, protocol: HeaderValue) {
    headers.insert(CONNECTION, HeaderValue::from_static("upgrade"));
    headers.insert(UPGRADE, protocol);
}

/// How a tunnel ended.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum TunnelEnd {
    /// Both sides closed (or one failed): bytes from the client, bytes from
    /// the upstream.
    Closed(u64, u64),
    /// Nothing went either way for the idle timeout; both were closed.
    Idle,
}

/// What to do when a tunnel ends, given the bytes it sent to the client
/// (the access log's line).
pub(crate) type OnTunnelEnd = Box<dyn FnOnce(u64) + Send>;

/// A response extension on the 101 that opens a tunnel: whoever reads the
/// response may [`set`](TunnelLog::set) what to do when the tunnel ends (the
/// access log writes its line then, with the bytes sent, as nginx logs a
/// WebSocket). It runs once, however the tunnel ends: closed, idle, failed,
/// or cut off when the gateway stops (the tunnel's task dropped with its
/// runtime).
#[derive(Clone, Default)]
pub(crate) struct TunnelLog(Arc<std::sync::Mutex<TunnelEnding>>);

/// What a tunnel's end runs and lets go of.
#[derive(Default)]
struct TunnelEnding {
    on_end: Option<OnTunnelEnd>,
    /// Kept until the tunnel ends (a concurrency slot), then dropped.
    held: Vec<Box<dyn Send>>,
}

impl TunnelLog {
    /// Runs `on_end` when the tunnel ends (in place of anything set before).
    pub(crate) fn set(&self, on_end: OnTunnelEnd) {
        if let Ok(mut ending) = self.0.lock() {
            ending.on_end = Some(on_end);
        }
    }

    /// Keeps `item` until the tunnel ends, however it ends, then drops it.
    pub(crate) fn hold(&self, item: Box<dyn Send>) {
        if let Ok(mut ending) = self.0.lock() {
            ending.held.push(item);
        }
    }
}

/// Held by a tunnel's task: when it is dropped (the tunnel ended, or its task
/// was), it runs what its [`TunnelLog`] was set to, with the bytes counted.
struct TunnelGuard {
    log: TunnelLog,
    to_client: Arc<AtomicU64>,
}

impl Drop for TunnelGuard {
    fn drop(&mut self) {
        let ending = self
            .log
            .0
            .lock()
            .ok()
            .map(|mut ending| std::mem::take(&mut *ending));
        if let Some(TunnelEnding { on_end, held }) = ending {
            if let Some(on_end) = on_end {
                on_end(self.to_client.load(Ordering::Relaxed));
            }
            drop(held);
        }
    }
}

/// Waits for the client's and the upstream's connections to switch
/// protocols, then carries bytes both ways until both sides have closed, or
/// nothing has gone either way for `idle_timeout`; then (or when this future
/// is dropped) runs what `log` was set to, with the bytes sent to the client
/// (0 when the upgrade did not complete).
pub(crate) async fn tunnel(
    client: OnUpgrade,
    upstream: OnUpgrade,
    idle_timeout: Duration,
    route: Arc<str>,
    log: TunnelLog,
) {
    let to_client = Arc::new(AtomicU64::new(0));
    let _guard = TunnelGuard {
        log,
        to_client: Arc::clone(&to_client),
    };
    let (client, upstream) = match tokio::try_join!(client, upstream) {
        Ok(both) => both,
        Err(error) => {
            tracing::debug!(%route, %error, "an upgrade did not complete");
            return;
        }
    };
    let end = splice(
        TokioIo::new(client),
        TokioIo::new(upstream),
        idle_timeout,
        Arc::clone(&to_client),
    )
    .await;
    if end == TunnelEnd::Idle {
        tracing::debug!(%route, ?idle_timeout, "upgraded connection idle; closed");
    }
}

/// Copies bytes between `client` and `upstream` both ways (each side's end
/// of stream passed on as a shutdown of the other's writing) until both
/// have ended, or nothing has gone either way for `idle_timeout`;
/// `to_client` counts the bytes written to the client meanwhile.
pub(crate) async fn splice<C, U>(
    client: C,
    mut upstream: U,
    idle_timeout: Duration,
    to_client: Arc<AtomicU64>,
) -> TunnelEnd
where
    C: AsyncRead + AsyncWrite + Unpin,
    U: AsyncRead + AsyncWrite + Unpin,
{
    let started = Instant::now();
    let last_activity = Arc::new(AtomicU64::new(0));
    let mut client = Watched {
        io: client,
        started,
        last_activity: Arc::clone(&last_activity),
        written: to_client,
    };
    let copy = tokio::io::copy_bidirectional(&mut client, &mut upstream);
    tokio::pin!(copy);
    loop {
        let since_start = Duration::from_nanos(last_activity.load(Ordering::Relaxed));
        // A timeout too long to count from now is no timeout.
        let Some(deadline) = started
            .checked_add(since_start)
            .and_then(|last| last.checked_add(idle_timeout))
        else {
            return ended(copy.await);
        };
        tokio::select! {
            copied = &mut copy => return ended(copied),
            () = tokio::time::sleep_until(deadline) => {
                let latest = Duration::from_nanos(last_activity.load(Ordering::Relaxed));
                if latest == since_start {
                    return TunnelEnd::Idle;
                }
            }
        }
    }
}

fn ended(copied: std::io::Result<(u64, u64)>) -> TunnelEnd {
    match copied {
        Ok((from_client, from_upstream)) => TunnelEnd::Closed(from_client, from_upstream),
        Err(error) => {
            tracing::debug!(%error, "upgraded connection ended");
            TunnelEnd::Closed(0, 0)
        }
    }
}

/// The client's side of a tunnel, noting when bytes last went either way
/// (read from the client, or written to it), in nanoseconds since `started`,
/// and counting the bytes written to the client.
struct Watched<T> {
    io: T,
    started: Instant,
    last_activity: Arc<AtomicU64>,
    written: Arc<AtomicU64>,
}

impl<T> Watched<T> {
    fn touch(&self) {
        let since = u64::try_from(self.started.elapsed().as_nanos()).unwrap_or(u64::MAX);
        self.last_activity.store(since, Ordering::Relaxed);
    }
}

impl<T: AsyncRead + Unpin> AsyncRead for Watched<T> {
    fn poll_read(
        mut self: Pin<&mut Self>,
        context: &mut Context<'_>,
        buffer: &mut ReadBuf<'_>,
    ) -> Poll<std::io::Result<()>> {
        let before = buffer.filled().len();
        let polled = Pin::new(&mut self.io).poll_read(context, buffer);
        if matches!(polled, Poll::Ready(Ok(()))) && buffer.filled().len() > before {
            self.touch();
        }
        polled
    }
}

impl<T: AsyncWrite + Unpin> AsyncWrite for Watched<T> {
    fn poll_write(
        mut self: Pin<&mut Self>,
        context: &mut Context<'_>,
        bytes: &[u8],
    ) -> Poll<std::io::Result<usize>> {
        let polled = Pin::new(&mut self.io).poll_write(context, bytes);
        if let Poll::Ready(Ok(written)) = polled
            && written > 0
        {
            self.written.fetch_add(written as u64, Ordering::Relaxed);
            self.touch();
        }
        polled
    }

    fn poll_flush(
        mut self: Pin<&mut Self>,
        context: &mut Context<'_>,
    ) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.io).poll_flush(context)
    }

    fn poll_shutdown(
        mut self: Pin<&mut Self>,
        context: &mut Context<'_>,
    ) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.io).poll_shutdown(context)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tokio::io::{AsyncReadExt, AsyncWriteExt, DuplexStream};

    fn request(version: Version, method: Method, headers: &[(&str, &str)]) -> Request<()> {
        let mut request = Request::builder().version(version).method(method);
        for (name, value) in headers {
            request = request.header(*name, *value);
        }
        request.body(()).unwrap()
    }

    #[test]
    fn only_http_1_1_websocket_gets_are_upgrades() {
        let websocket = [
            ("connection", "keep-alive, Upgrade"),
            ("upgrade", "WebSocket"),
        ];
        let upgrade = |version, method, headers: &[(&str, &str)]| {
            websocket_upgrade(&request(version, method, headers))
        };
        assert_eq!(
            upgrade(Version::HTTP_11, Method::GET, &websocket),
            Some(HeaderValue::from_static("WebSocket"))
        );
        // `upgrade` on a line of its own.
        let two_lines = [
            ("connection", "keep-alive"),
            ("connection", "upgrade"),
            ("upgrade", "websocket"),
        ];
        assert!(upgrade(Version::HTTP_11, Method::GET, &two_lines).is_some());
        assert_eq!(upgrade(Version::HTTP_10, Method::GET, &websocket), None);
        assert_eq!(upgrade(Version::HTTP_11, Method::POST, &websocket), None);
        let h2c = [
            ("connection", "upgrade, http2-settings"),
            ("upgrade", "h2c"),
        ];
        assert_eq!(upgrade(Version::HTTP_11, Method::GET, &h2c), None);
        let two = [("connection", "upgrade"), ("upgrade", "websocket, h2c")];
        assert_eq!(upgrade(Version::HTTP_11, Method::GET, &two), None);
        let not_named = [("connection", "keep-alive"), ("upgrade", "websocket")];
        assert_eq!(upgrade(Version::HTTP_11, Method::GET, &not_named), None);
    }

    /// A tunnel between two in-memory connections, idle timeout 10 s: the
    /// client's far end, the upstream's, the tunnel's task and its count of
    /// bytes sent to the client.
    fn spliced() -> (
        DuplexStream,
        DuplexStream,
        tokio::task::JoinHandle<TunnelEnd>,
        Arc<AtomicU64>,
    ) {
        let (client, client_far) = tokio::io::duplex(64);
        let (upstream, upstream_far) = tokio::io::duplex(64);
        let to_client = Arc::new(AtomicU64::new(0));
        let tunnel = tokio::spawn(splice(
            client,
            upstream,
            Duration::from_secs(10),
            Arc::clone(&to_client),
        ));
        (client_far, upstream_far, tunnel, to_client)
    }

    #[tokio::test(start_paused = true)]
    async fn a_tunnel_passes_pauses_shorter_than_the_timeout_and_closes_after_a_longer_one() {
        let started = Instant::now();
        let (mut client_far, mut upstream_far, spliced, to_client) = spliced();
        // 9 s, then the client sends; 9 s more, then the upstream answers:
        // each pause under 10 s, 18 s in all.
        tokio::time::sleep(Duration::from_secs(9)).await;
        client_far.write_all(b"ping").await.unwrap();
        let mut four = [0u8; 4];
        upstream_far.read_exact(&mut four).await.unwrap();
        assert_eq!(&four, b"ping");
        tokio::time::sleep(Duration::from_secs(9)).await;
        upstream_far.write_all(b"pong").await.unwrap();
        client_far.read_exact(&mut four).await.unwrap();
        assert_eq!(&four, b"pong");
        // Then silence: closed 10 s after the last bytes, at 28 s.
        assert_eq!(spliced.await.unwrap(), TunnelEnd::Idle);
        assert_eq!(started.elapsed(), Duration::from_secs(28));
        // "pong" reached the client: 4 bytes, counted though it ended idle.
        assert_eq!(to_client.load(Ordering::Relaxed), 4);
        // Both far ends see their connection end.
        assert_eq!(client_far.read(&mut four).await.unwrap(), 0);
        assert_eq!(upstream_far.read(&mut four).await.unwrap(), 0);
    }

    #[tokio::test(start_paused = true)]
    async fn a_tunnel_ends_when_both_sides_close() {
        let (mut client_far, mut upstream_far, spliced, to_client) = spliced();
        client_far.write_all(b"bye").await.unwrap();
        client_far.shutdown().await.unwrap();
        let mut received = Vec::new();
        upstream_far.read_to_end(&mut received).await.unwrap();
        assert_eq!(received, b"bye");
        upstream_far.write_all(b"ok").await.unwrap();
        upstream_far.shutdown().await.unwrap();
        drop(upstream_far);
        let mut answer = Vec::new();
        client_far.read_to_end(&mut answer).await.unwrap();
        assert_eq!(answer, b"ok");
        // 3 bytes from the client, 2 from the upstream.
        assert_eq!(spliced.await.unwrap(), TunnelEnd::Closed(3, 2));
        assert_eq!(to_client.load(Ordering::Relaxed), 2);
    }
}
