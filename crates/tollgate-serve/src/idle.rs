//! Closing idle connections: a connection that sends and receives no byte
//! for an idle timeout while no request of it is in flight is closed, in
//! every phase of its life, as nginx times every phase (60 s for a request's
//! headers, 75 s between keep-alive requests, HTTP/2 included). Without
//! this, a connection that never sends its first byte, an HTTP/2 connection
//! that sends no request, or a TLS connection silent after its handshake
//! stayed open until the peer went away, and enough of them used up the
//! process's file descriptors.
//!
//! [`Tracked`] wraps a connection's stream and notes the time of its last
//! byte either way in its [`Activity`]; an [`InFlight`] guard, held from a
//! request's start to its response's end, keeps the connection from being
//! idle however quiet it is (an upstream taking its time); [`idle`]
//! resolves once the connection is idle.

use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::task::{Context, Poll};
use std::time::Duration;

use futures_util::task::AtomicWaker;
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::sync::Notify;
use tokio::time::Instant;

/// One connection's activity: when it last moved a byte, and how many of its
/// requests are in flight. Shared by its [`Tracked`] stream, its
/// [`InFlight`] guards and whoever waits for [`idle`].
#[derive(Debug)]
pub struct Activity {
    /// Where `last_byte_ns` counts from.
    opened: Instant,
    /// Nanoseconds from `opened` to the last byte read or written.
    last_byte_ns: AtomicU64,
    in_flight: AtomicUsize,
    /// Set when the connection is shed (see `shed.rs`): it is then closed as
    /// if idle.
    shed: AtomicBool,
    /// Wakes [`idle`] when the connection is shed.
    shed_notify: Notify,
    /// Wakes a [`ClosedWhenIdle`] stream's read when the connection is shed.
    shed_waker: AtomicWaker,
}

impl Activity {
    /// A connection opened now.
    pub fn new() -> Arc<Activity> {
        Arc::new(Activity {
            opened: Instant::now(),
            last_byte_ns: AtomicU64::new(0),
            in_flight: AtomicUsize::new(0),
            shed: AtomicBool::new(false),
            shed_notify: Notify::new(),
            shed_waker: AtomicWaker::new(),
        })
    }

    /// Has the connection closed as if idle, at once, though only once no
    /// request of it is in flight (the process is out of file descriptors,
    /// and it is the oldest idle one).
    pub(crate) fn shed(&self) {
        self.shed.store(true, Ordering::Release);
        self.shed_notify.notify_waiters();
        self.shed_waker.wake();
    }

    /// Whether the connection has been shed.
    pub(crate) fn is_shed(&self) -> bool {
        self.shed.load(Ordering::Acquire)
    }

    fn touch(&self) {
        let since = Instant::now().saturating_duration_since(self.opened);
        let nanos = u64::try_from(since.as_nanos()).unwrap_or(u64::MAX);
        self.last_byte_ns.fetch_max(nanos, Ordering::Relaxed);
    }

    pub(crate) fn last_byte(&self) -> Instant {
        self.opened + Duration::from_nanos(self.last_byte_ns.load(Ordering::Relaxed))
    }

    /// How many of the connection's requests are in flight.
    pub fn in_flight(&self) -> usize {
        self.in_flight.load(Ordering::Acquire)
    }
}

/// A request in flight on a connection: counted from [`InFlight::start`]
/// until dropped (hold it until the response's last byte is handed on).
#[derive(Debug)]
pub struct InFlight(Arc<Activity>);

impl InFlight {
    /// Counts one more request in flight on `activity`'s connection.
    pub fn start(activity: &Arc<Activity>) -> InFlight {
        activity.in_flight.fetch_add(1, Ordering::Relaxed);
        InFlight(Arc::clone(activity))
    }
}

impl Drop for InFlight {
    fn drop(&mut self) {
        // The request's end is activity too: the idle time counts from it.
        self.0.touch();
        self.0.in_flight.fetch_sub(1, Ordering::Release);
        if self.0.is_shed() {
            // A shed connection closes once its requests are done.
            self.0.shed_notify.notify_waiters();
            self.0.shed_waker.wake();
        }
    }
}

/// Resolves once `activity`'s connection has moved no byte for `timeout`
/// with no request in flight, or has been shed with no request in flight (a
/// shed connection is closed between requests, never in one). A timeout too
/// long to add to a time never passes.
pub async fn idle(activity: &Activity, timeout: Duration) {
    loop {
        let notified = activity.shed_notify.notified();
        let mut notified = std::pin::pin!(notified);
        notified.as_mut().enable();
        let wake = match activity.next_look(timeout) {
            Look::Idle => return,
            Look::At(instant) => Some(instant),
            Look::WhenWoken => None,
        };
        tokio::select! {
            () = notified => {}
            () = sleep_until_some(wake) => {}
        }
    }
}

/// Sleeps until `instant`; for ever without one.
async fn sleep_until_some(instant: Option<Instant>) {
    match instant {
        Some(instant) => tokio::time::sleep_until(instant).await,
        None => std::future::pending().await,
    }
}

/// What a look at a connection's activity finds.
enum Look {
    /// It is idle (or shed) with no request in flight.
    Idle,
    /// Look again then.
    At(Instant),
    /// Look again when woken: it is shed and a request is in flight (whose
    /// end wakes), or its timeout never passes.
    WhenWoken,
}

impl Activity {
    /// Whether the connection is idle for `timeout` now, and if not when to
    /// look again. A request in flight is looked at again a whole timeout
    /// later: its end touches the activity, so the timeout then counts from
    /// it.
    fn next_look(&self, timeout: Duration) -> Look {
        let in_flight = self.in_flight() > 0;
        if self.is_shed() {
            return if in_flight {
                Look::WhenWoken
            } else {
                Look::Idle
            };
        }
        let now = Instant::now();
        match self.last_byte().checked_add(timeout) {
            None => Look::WhenWoken,
            Some(quiet_until) if now < quiet_until => Look::At(quiet_until),
            Some(_) if !in_flight => Look::Idle,
            Some(_) => now.checked_add(timeout).map_or(Look::WhenWoken, Look::At),
        }
    }
}

/// A stream whose every byte read or written is noted in its [`Activity`].
#[derive(Debug)]
pub struct Tracked<Stream> {
    stream: Stream,
    activity: Arc<Activity>,
}

impl<Stream> Tracked<Stream> {
    /// `stream`, noting its bytes in `activity`.
    pub fn new(stream: Stream, activity: &Arc<Activity>) -> Self {
        Tracked {
            stream,
            activity: Arc::clone(activity),
        }
    }
}

impl<Stream: AsyncRead + Unpin> AsyncRead for Tracked<Stream> {
    fn poll_read(
        mut self: Pin<&mut Self>,
        context: &mut Context<'_>,
        buffer: &mut ReadBuf<'_>,
    ) -> Poll<std::io::Result<()>> {
        let before = buffer.filled().len();
        let polled = Pin::new(&mut self.stream).poll_read(context, buffer);
        if buffer.filled().len() > before {
            self.activity.touch();
        }
        polled
    }
}

impl<Stream: AsyncWrite + Unpin> AsyncWrite for Tracked<Stream> {
    fn poll_write(
        mut self: Pin<&mut Self>,
        context: &mut Context<'_>,
        bytes: &[u8],
    ) -> Poll<std::io::Result<usize>> {
        let polled = Pin::new(&mut self.stream).poll_write(context, bytes);
        if matches!(polled, Poll::Ready(Ok(written)) if written > 0) {
            self.activity.touch();
        }
        polled
    }

    fn poll_write_vectored(
        mut self: Pin<&mut Self>,
        context: &mut Context<'_>,
        buffers: &[std::io::IoSlice<'_>],
    ) -> Poll<std::io::Result<usize>> {
        let polled = Pin::new(&mut self.stream).poll_write_vectored(context, buffers);
        if matches!(polled, Poll::Ready(Ok(written)) if written > 0) {
            self.activity.touch();
        }
        polled
    }

    fn is_write_vectored(&self) -> bool {
        self.stream.is_write_vectored()
    }

    fn poll_flush(
        mut self: Pin<&mut Self>,
        context: &mut Context<'_>,
    ) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.stream).poll_flush(context)
    }

    fn poll_shutdown(
        mut self: Pin<&mut Self>,
        context: &mut Context<'_>,
    ) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.stream).poll_shutdown(context)
    }
}

/// A stream that ends itself once idle: like [`Tracked`], and when a read
/// finds nothing to read after its connection has moved no byte for
/// `timeout` with no request in flight, the read fails (`TimedOut`), so
/// whatever serves the connection (tonic's or hyper's, which poll their
/// reads as long as a connection is open, HTTP/2 included) closes it. For
/// servers that do not hand out each connection's future to race against
/// [`idle`].
#[derive(Debug)]
pub struct ClosedWhenIdle<Stream> {
    tracked: Tracked<Stream>,
    timeout: Duration,
    /// When to look again.
    wake: Pin<Box<tokio::time::Sleep>>,
}

impl<Stream> ClosedWhenIdle<Stream> {
    /// `stream`, its bytes noted in `activity`, closed once idle for
    /// `timeout`.
    pub fn new(stream: Stream, activity: &Arc<Activity>, timeout: Duration) -> Self {
        ClosedWhenIdle {
            tracked: Tracked::new(stream, activity),
            timeout,
            wake: Box::pin(tokio::time::sleep(timeout)),
        }
    }

    /// The stream inside.
    pub fn get_ref(&self) -> &Stream {
        &self.tracked.stream
    }

    /// Whether the connection is idle now; if not, the wake-up is set to when
    /// it may be, and registered with `context`.
    fn is_idle(&mut self, context: &mut Context<'_>) -> bool {
        self.tracked.activity.shed_waker.register(context.waker());
        loop {
            match self.tracked.activity.next_look(self.timeout) {
                Look::Idle => return true,
                Look::WhenWoken => return false,
                Look::At(instant) => {
                    self.wake.as_mut().reset(instant);
                    if self.wake.as_mut().poll(context).is_pending() {
                        return false;
                    }
                }
            }
        }
    }
}

impl<Stream: AsyncRead + Unpin> AsyncRead for ClosedWhenIdle<Stream> {
    fn poll_read(
        mut self: Pin<&mut Self>,
        context: &mut Context<'_>,
        buffer: &mut ReadBuf<'_>,
    ) -> Poll<std::io::Result<()>> {
        let polled = Pin::new(&mut self.tracked).poll_read(context, buffer);
        if polled.is_pending() && self.is_idle(context) {
            return Poll::Ready(Err(std::io::Error::new(
                std::io::ErrorKind::TimedOut,
                "the connection was idle too long",
            )));
        }
        polled
    }
}

impl<Stream: AsyncWrite + Unpin> AsyncWrite for ClosedWhenIdle<Stream> {
    fn poll_write(
        mut self: Pin<&mut Self>,
        context: &mut Context<'_>,
        bytes: &[u8],
    ) -> Poll<std::io::Result<usize>> {
        Pin::new(&mut self.tracked).poll_write(context, bytes)
    }

    fn poll_write_vectored(
        mut self: Pin<&mut Self>,
        context: &mut Context<'_>,
        buffers: &[std::io::IoSlice<'_>],
    ) -> Poll<std::io::Result<usize>> {
        Pin::new(&mut self.tracked).poll_write_vectored(context, buffers)
    }

    fn is_write_vectored(&self) -> bool {
        self.tracked.is_write_vectored()
    }

    fn poll_flush(
        mut self: Pin<&mut Self>,
        context: &mut Context<'_>,
    ) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.tracked).poll_flush(context)
    }

    fn poll_shutdown(
        mut self: Pin<&mut Self>,
        context: &mut Context<'_>,
    ) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.tracked).poll_shutdown(context)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tokio::io::{AsyncReadExt, AsyncWriteExt};

    const TIMEOUT: Duration = Duration::from_secs(30);

    #[tokio::test(start_paused = true)]
    async fn a_connection_that_moves_no_byte_is_idle_after_the_timeout() {
        let activity = Activity::new();
        let start = Instant::now();
        idle(&activity, TIMEOUT).await;
        assert_eq!(start.elapsed(), TIMEOUT);
    }

    #[tokio::test(start_paused = true)]
    async fn each_byte_either_way_starts_the_timeout_again() {
        let activity = Activity::new();
        let (client, server) = tokio::io::duplex(64);
        let mut server = Tracked::new(server, &activity);
        let mut client = client;
        let start = Instant::now();
        tokio::time::advance(Duration::from_secs(20)).await;
        client.write_all(b"x").await.unwrap();
        let mut byte = [0];
        server.read_exact(&mut byte).await.unwrap();
        tokio::time::advance(Duration::from_secs(20)).await;
        server.write_all(b"y").await.unwrap();
        // Read at 20 s, written at 40 s: idle at 70 s.
        idle(&activity, TIMEOUT).await;
        assert_eq!(start.elapsed(), Duration::from_secs(70));
    }

    #[tokio::test(start_paused = true)]
    async fn a_request_in_flight_keeps_a_quiet_connection_open_until_it_ends() {
        let activity = Activity::new();
        let start = Instant::now();
        let request = InFlight::start(&activity);
        let waiting = {
            let activity = Arc::clone(&activity);
            tokio::spawn(async move { idle(&activity, TIMEOUT).await })
        };
        // The request takes 100 s with no byte moving; it ends at 100 s.
        tokio::time::sleep(Duration::from_secs(100)).await;
        assert!(!waiting.is_finished());
        drop(request);
        waiting.await.unwrap();
        // Looks at 30, 60, 90 and 120 s find the request in flight or its
        // end (100 s) less than a timeout ago; idle a whole timeout after its
        // end, at 130 s.
        assert_eq!(start.elapsed(), Duration::from_secs(130));
    }

    #[tokio::test(start_paused = true)]
    async fn a_stream_closed_when_idle_fails_its_read_a_timeout_after_its_last_byte() {
        let activity = Activity::new();
        let (mut client, server) = tokio::io::duplex(64);
        let mut server = ClosedWhenIdle::new(server, &activity, TIMEOUT);
        let start = Instant::now();
        tokio::time::advance(Duration::from_secs(20)).await;
        client.write_all(b"x").await.unwrap();
        let mut byte = [0];
        server.read_exact(&mut byte).await.unwrap();
        // The byte came at 20 s: the next read fails at 50 s.
        let error = server.read_exact(&mut byte).await.unwrap_err();
        assert_eq!(error.kind(), std::io::ErrorKind::TimedOut);
        assert_eq!(start.elapsed(), Duration::from_secs(50));
    }

    #[tokio::test(start_paused = true)]
    async fn a_stream_closed_when_idle_stays_open_while_a_request_is_in_flight() {
        let activity = Activity::new();
        let (_client, server) = tokio::io::duplex(64);
        let mut server = ClosedWhenIdle::new(server, &activity, TIMEOUT);
        let start = Instant::now();
        let request = InFlight::start(&activity);
        let ending = tokio::spawn(async move {
            tokio::time::sleep(Duration::from_secs(100)).await;
            drop(request);
        });
        let mut byte = [0];
        let error = server.read_exact(&mut byte).await.unwrap_err();
        ending.await.unwrap();
        // The request ended at 100 s; looks at 30, 60 and 90 s found it in
        // flight, and the one at 120 s its end less than a timeout ago: the
        // read fails at 130 s.
        assert_eq!(error.kind(), std::io::ErrorKind::TimedOut);
        assert_eq!(start.elapsed(), Duration::from_secs(130));
    }
}
