//! A response body that fails when its upstream pauses too long in the middle
//! of it: [`IdleTimeout`]. Without it, an upstream that sends its headers and
//! then stalls would hold the client's connection (and the upstream's) for
//! ever; with it, the client's connection is closed after the pause, before
//! the body's end. An HTTP/1.1 client (a `Content-Length` short of its bytes,
//! or a chunked body without its last chunk) and an HTTP/2 client (a reset
//! stream) can tell the response was cut short; an HTTP/1.0 client reading a
//! body of unknown length cannot, since for it the connection's end is the
//! body's end.

use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll, ready};
use std::time::Duration;

use bytes::Bytes;
use http_body::{Body as HttpBody, Frame, SizeHint};
use tokio::time::{Instant, Sleep};

use crate::observe::metrics::{UpstreamFailure, record_upstream_failure};

/// The error of a body whose upstream paused longer than the idle timeout.
#[derive(Debug, thiserror::Error)]
#[error("the upstream sent nothing of the response body for {}", humantime::format_duration(*.0))]
pub(crate) struct BodyPaused(pub(crate) Duration);

/// `body`, failing with [`BodyPaused`] once `timeout` passes with the gateway
/// waiting for its next part. The timer starts only when a part is not ready
/// at once, so a body already at hand costs no timer.
pub(crate) struct IdleTimeout<B> {
    body: B,
    timeout: Duration,
    /// The route, for the log line and the metric.
    route: Arc<str>,
    /// The server (`host:port`), for the log line and the metric.
    server: Arc<str>,
    /// Created on the first wait, then reset for each later one.
    deadline: Option<Pin<Box<Sleep>>>,
    /// Whether `deadline` runs for the current wait (when false, a part
    /// arrived since it was set).
    waiting: bool,
}

impl<B> IdleTimeout<B> {
    /// `body` of a response on `route` from `server`, allowed pauses of at
    /// most `timeout` between its parts.
    pub(crate) fn new(body: B, timeout: Duration, route: Arc<str>, server: Arc<str>) -> Self {
        IdleTimeout {
            body,
            timeout,
            route,
            server,
            deadline: None,
            waiting: false,
        }
    }
}

impl<B> HttpBody for IdleTimeout<B>
where
    B: HttpBody<Data = Bytes> + Unpin,
    B::Error: Into<Box<dyn std::error::Error + Send + Sync>>,
{
    type Data = Bytes;
    type Error = Box<dyn std::error::Error + Send + Sync>;

    fn poll_frame(
        self: Pin<&mut Self>,
        context: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, Self::Error>>> {
        let this = self.get_mut();
        if let Poll::Ready(frame) = Pin::new(&mut this.body).poll_frame(context) {
            this.waiting = false;
            if let Some(Err(_)) = &frame {
                // The upstream's body broke off: its connection closed before
                // the body's end (a short Content-Length, a missing last chunk).
                record_upstream_failure(&this.route, &this.server, UpstreamFailure::BodyBroken);
            }
            return Poll::Ready(frame.map(|frame| frame.map_err(Into::into)));
        }
        // A timeout too long to count from now is no timeout.
        let Some(deadline) = Instant::now().checked_add(this.timeout) else {
            return Poll::Pending;
        };
        let sleep = match &mut this.deadline {
            Some(sleep) => {
                if !this.waiting {
                    sleep.as_mut().reset(deadline);
                }
                sleep
            }
            None => this
                .deadline
                .insert(Box::pin(tokio::time::sleep_until(deadline))),
        };
        this.waiting = true;
        ready!(sleep.as_mut().poll(context));
        tracing::warn!(
            route = %this.route,
            server = %this.server,
            timeout = ?this.timeout,
            "upstream paused in a response body; cutting it off"
        );
        record_upstream_failure(&this.route, &this.server, UpstreamFailure::BodyStalled);
        Poll::Ready(Some(Err(BodyPaused(this.timeout).into())))
    }

    fn is_end_stream(&self) -> bool {
        self.body.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        self.body.size_hint()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use http_body_util::{BodyExt, StreamBody};
    use tokio::sync::mpsc;
    use tokio_stream::wrappers::ReceiverStream;

    type Part = Result<Frame<Bytes>, std::io::Error>;

    fn streamed() -> (mpsc::Sender<Part>, StreamBody<ReceiverStream<Part>>) {
        let (sender, receiver) = mpsc::channel(4);
        (sender, StreamBody::new(ReceiverStream::new(receiver)))
    }

    fn part(text: &'static str) -> Part {
        Ok(Frame::data(Bytes::from_static(text.as_bytes())))
    }

    #[tokio::test(start_paused = true)]
    async fn pauses_shorter_than_the_timeout_pass_and_a_longer_one_fails() {
        let (sender, body) = streamed();
        let mut body = IdleTimeout::new(
            body,
            Duration::from_secs(10),
            Arc::from("test"),
            Arc::from("h:1"),
        );
        let started = Instant::now();
        tokio::spawn(async move {
            // Pauses of 9 s, 9 s: each under 10 s, 18 s in all.
            for text in ["a", "b"] {
                tokio::time::sleep(Duration::from_secs(9)).await;
                sender.send(part(text)).await.unwrap();
            }
            // Then 11 s of silence before the last part.
            tokio::time::sleep(Duration::from_secs(11)).await;
            let _ = sender.send(part("too late")).await;
        });
        let first = body.frame().await.unwrap().unwrap().into_data().unwrap();
        assert_eq!(first, "a");
        let second = body.frame().await.unwrap().unwrap().into_data().unwrap();
        assert_eq!(second, "b");
        let error = body.frame().await.unwrap().unwrap_err();
        assert_eq!(
            error.to_string(),
            "the upstream sent nothing of the response body for 10s"
        );
        // 9 + 9 s of parts, then the 10 s timeout.
        assert_eq!(started.elapsed(), Duration::from_secs(28));
    }

    #[tokio::test(start_paused = true)]
    async fn a_timeout_too_long_to_count_never_fires() {
        let (sender, body) = streamed();
        let mut body = IdleTimeout::new(body, Duration::MAX, Arc::from("test"), Arc::from("h:1"));
        let started = Instant::now();
        tokio::spawn(async move {
            tokio::time::sleep(Duration::from_secs(365 * 86_400)).await;
            sender.send(part("a year later")).await.unwrap();
        });
        let late = body.frame().await.unwrap().unwrap().into_data().unwrap();
        assert_eq!(late, "a year later");
        assert_eq!(started.elapsed(), Duration::from_secs(365 * 86_400));
    }

    #[tokio::test(start_paused = true)]
    async fn a_body_that_ends_in_time_ends_normally() {
        let (sender, body) = streamed();
        let body = IdleTimeout::new(
            body,
            Duration::from_secs(10),
            Arc::from("test"),
            Arc::from("h:1"),
        );
        sender.send(part("whole")).await.unwrap();
        drop(sender);
        let collected = body.collect().await.unwrap().to_bytes();
        assert_eq!(collected, "whole");
    }
}
