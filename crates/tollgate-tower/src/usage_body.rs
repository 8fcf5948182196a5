//! [`UsageBody`]: a response body that hands its request's usage report
//! (core's [`UsageReport`], read from a response header, else from a
//! trailer of the same name) to a settlement once, when the body ends or is
//! dropped (the client gone). Used by a route layer with
//! [`RouteLimitLayer::charge`](crate::RouteLimitLayer::charge) and by the
//! gateway's routes with `charge`.

use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll, ready};

use bytes::Buf;
use http::{HeaderMap, HeaderName};
use http_body::{Body, Frame, SizeHint};
use tollgate_core::UsageReport;

/// The report `headers` carry under `name` (`None`: none).
pub fn read_usage(headers: &HeaderMap, name: &HeaderName) -> Option<UsageReport> {
    UsageReport::parse(headers.get_all(name).iter().map(|value| value.as_bytes()))
}

/// Whether a request with `headers` accepts trailers in its response
/// (RFC 9110 §10.1.4: `TE` lists `trailers`). A member weighted `q=0`
/// (RFC 9110 §12.4.2: "not acceptable") does not count.
pub fn accepts_trailers(headers: &HeaderMap) -> bool {
    headers
        .get_all(http::header::TE)
        .iter()
        .filter_map(|value| value.to_str().ok())
        .flat_map(|value| value.split(','))
        .any(|member| {
            let mut parts = member.split(';');
            let coding = parts.next().unwrap_or("").trim();
            coding.eq_ignore_ascii_case("trailers") && !parts.any(weighs_zero)
        })
}

/// Whether a `TE` member's parameter is a weight of zero (`q=0`, `q=0.000`).
fn weighs_zero(parameter: &str) -> bool {
    let Some((name, value)) = parameter.split_once('=') else {
        return false;
    };
    if !name.trim().eq_ignore_ascii_case("q") {
        return false;
    }
    let value = value.trim();
    let fraction = match value.strip_prefix('0') {
        Some(rest) => rest,
        None => return false,
    };
    fraction.is_empty()
        || fraction
            .strip_prefix('.')
            .is_some_and(|digits| digits.chars().all(|digit| digit == '0'))
}

/// Whether the response to a request of `method` in `version` with
/// `headers` can carry trailers: the request accepts them
/// ([`accepts_trailers`]), is not `HEAD` (no body) and is HTTP/1.1 or later
/// (HTTP/1.0 has no chunked body).
pub fn can_send_trailers(
    method: &http::Method,
    version: http::Version,
    headers: &HeaderMap,
) -> bool {
    *method != http::Method::HEAD
        && !matches!(version, http::Version::HTTP_09 | http::Version::HTTP_10)
        && accepts_trailers(headers)
}

/// Whether a response of `status` has a body to end with trailers (not
/// 1xx, 204 or 304).
pub fn status_has_body(status: http::StatusCode) -> bool {
    !status.is_informational()
        && status != http::StatusCode::NO_CONTENT
        && status != http::StatusCode::NOT_MODIFIED
}

/// The trailers a settlement adds to its response once it has run (`None`:
/// none), such as the rate-limit fields after it.
pub type SettledTrailers = Pin<Box<dyn Future<Output = Option<HeaderMap>> + Send>>;

/// What settles a request's usage, given its report (`None`: none) and
/// whether its trailers will be sent (the body ended with trailers
/// wanted: [`UsageBody::with_trailers`]; `false` when it ends without or
/// is dropped): the settlement to run, awaited before the response's
/// trailers when they are sent, else run in a task of its own (the
/// response does not wait for it).
pub type Settle = Box<dyn FnOnce(Option<UsageReport>, bool) -> SettledTrailers + Send>;

pin_project_lite::pin_project! {
    /// A response body passing `B` through, reading a usage report from its
    /// trailers, and calling its settlement once at its end (or drop). A
    /// report in both the response header and a trailer is
    /// [`UsageReport::Bad`]: which one is meant is not known.
    ///
    /// With trailers ([`UsageBody::with_trailers`]), the body's end waits
    /// for the settlement and sends its trailers, after (and merged into,
    /// replacing fields of the same name) those of `B`; its size is then
    /// not known in advance, so an HTTP/1.1 response is chunked.
    pub struct UsageBody<B> {
        #[pin]
        body: B,
        header: Option<HeaderName>,
        settle: Option<Settle>,
        report: Option<UsageReport>,
        // With trailers: `B`'s own, held back until the settlement's.
        trailers: Option<Trailers>,
    }

    impl<B> PinnedDrop for UsageBody<B> {
        fn drop(this: Pin<&mut Self>) {
            let this = this.project();
            if let Some(settle) = this.settle.take() {
                settle_in_background(settle(*this.report, false));
            }
            if let Some(Trailers { settling: Some(settling), .. }) = this.trailers.take() {
                settle_in_background(settling);
            }
        }
    }
}

/// Where a body sending its settlement's trailers is.
struct Trailers {
    /// `B`'s trailers, held back.
    held: Option<HeaderMap>,
    /// The settlement under way, once `B` has ended.
    settling: Option<SettledTrailers>,
    /// Whether the trailers (or the end) have been sent.
    sent: bool,
}

/// Runs `settlement` in a task of its own; without a tokio runtime it
/// cannot run, and the request keeps the cost its admission took.
pub fn settle_in_background(settlement: SettledTrailers) {
    if let Ok(runtime) = tokio::runtime::Handle::try_current() {
        runtime.spawn(settlement);
    }
}

impl<B> UsageBody<B> {
    /// `body` passed through untouched, settling nothing.
    pub fn plain(body: B) -> Self {
        UsageBody {
            body,
            header: None,
            settle: None,
            report: None,
            trailers: None,
        }
    }

    /// `body`, whose response's headers reported `report` under `header`,
    /// calling `settle` when it ends.
    pub fn settling(
        body: B,
        header: HeaderName,
        report: Option<UsageReport>,
        settle: Settle,
    ) -> Self {
        UsageBody {
            body,
            header: Some(header),
            settle: Some(settle),
            report,
            trailers: None,
        }
    }

    /// This body, its end waiting for the settlement to send the trailers
    /// it gives (for a client that accepts trailers: `TE: trailers`).
    #[must_use]
    pub fn with_trailers(mut self) -> Self {
        if self.settle.is_some() {
            self.trailers = Some(Trailers {
                held: None,
                settling: None,
                sent: false,
            });
        }
        self
    }
}

impl<B: Body> Body for UsageBody<B>
where
    B::Data: Buf,
{
    type Data = B::Data;
    type Error = B::Error;

    fn poll_frame(
        self: Pin<&mut Self>,
        context: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<B::Data>, B::Error>>> {
        let mut this = self.project();
        loop {
            if let Some(trailers) = this.trailers.as_mut() {
                if let Some(settling) = trailers.settling.as_mut() {
                    let settled = ready!(settling.as_mut().poll(context));
                    trailers.settling = None;
                    trailers.sent = true;
                    let mut sent = trailers.held.take().unwrap_or_default();
                    // Each field the settlement gives replaces `B`'s of
                    // its name, every value of it kept.
                    if let Some(settled) = settled {
                        sent.extend(settled);
                    }
                    return Poll::Ready((!sent.is_empty()).then(|| Ok(Frame::trailers(sent))));
                }
                if trailers.sent {
                    return Poll::Ready(None);
                }
            }
            let polled = this.body.as_mut().poll_frame(context);
            if this.settle.is_none() {
                return polled;
            }
            match polled {
                Poll::Ready(Some(Ok(frame))) => {
                    let frame = match frame.into_trailers() {
                        Ok(trailers) => trailers,
                        Err(frame) => return Poll::Ready(Some(Ok(frame))),
                    };
                    if let Some(header) = this.header.as_ref()
                        && let Some(reported) = read_usage(&frame, header)
                    {
                        *this.report = Some(match this.report {
                            Some(_) => UsageReport::Bad,
                            None => reported,
                        });
                    }
                    match this.trailers.as_mut() {
                        // Held back, sent with the settlement's.
                        Some(trailers) => trailers.held = Some(frame),
                        None => return Poll::Ready(Some(Ok(Frame::trailers(frame)))),
                    }
                }
                Poll::Ready(None) => {
                    let Some(settle) = this.settle.take() else {
                        return Poll::Ready(None);
                    };
                    let settlement = settle(*this.report, this.trailers.is_some());
                    match this.trailers.as_mut() {
                        Some(trailers) => trailers.settling = Some(settlement),
                        None => {
                            settle_in_background(settlement);
                            return Poll::Ready(None);
                        }
                    }
                }
                Poll::Ready(Some(Err(error))) => {
                    if let Some(settle) = this.settle.take() {
                        settle_in_background(settle(*this.report, false));
                    }
                    if let Some(trailers) = this.trailers.as_mut() {
                        trailers.sent = true;
                    }
                    return Poll::Ready(Some(Err(error)));
                }
                Poll::Pending => return Poll::Pending,
            }
        }
    }

    fn is_end_stream(&self) -> bool {
        match &self.trailers {
            Some(trailers) => trailers.sent,
            None => self.body.is_end_stream(),
        }
    }

    fn size_hint(&self) -> SizeHint {
        match &self.trailers {
            // Unknown: an HTTP/1.1 response is chunked, to carry trailers.
            Some(_) => {
                let mut hint = SizeHint::new();
                hint.set_lower(self.body.size_hint().lower());
                hint
            }
            None => self.body.size_hint(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use bytes::Bytes;
    use http_body_util::BodyExt;
    use std::sync::{Arc, Mutex};

    /// A body of "tokens" then trailers `x-usage: 30` and `x-other: kept`,
    /// settled by a settlement that records its report and gives the
    /// trailer `ratelimit: settled` (sent with trailers or not): the frames
    /// the client gets, and the report seen.
    async fn ended(trailers: bool) -> (Vec<Frame<Bytes>>, Option<UsageReport>) {
        let mut upstream = HeaderMap::new();
        upstream.insert("x-usage", "30".parse().unwrap());
        upstream.insert("x-other", "kept".parse().unwrap());
        let frames: Vec<Result<Frame<Bytes>, std::convert::Infallible>> = vec![
            Ok(Frame::data(Bytes::from_static(b"tokens"))),
            Ok(Frame::trailers(upstream)),
        ];
        let inner = http_body_util::StreamBody::new(futures_util::stream::iter(frames));
        let seen = Arc::new(Mutex::new(None));
        let recorded = Arc::clone(&seen);
        let settle: Settle = Box::new(move |report, _| {
            *recorded.lock().unwrap() = report;
            Box::pin(async {
                let mut fields = HeaderMap::new();
                fields.insert("ratelimit", "settled".parse().unwrap());
                fields.insert("x-other", "replaced".parse().unwrap());
                fields.append("x-other", "twice".parse().unwrap());
                Some(fields)
            })
        });
        let body = UsageBody::settling(inner, HeaderName::from_static("x-usage"), None, settle);
        let mut body = if trailers { body.with_trailers() } else { body };
        let mut frames = Vec::new();
        while let Some(frame) = body.frame().await {
            frames.push(frame.unwrap());
        }
        // (`StreamBody` never says it has ended; with trailers, this does.)
        assert!(body.is_end_stream() || !trailers);
        let report = *seen.lock().unwrap();
        (frames, report)
    }

    #[tokio::test]
    async fn with_trailers_the_settlements_follow_the_bodys_own() {
        let (frames, report) = ended(true).await;
        assert_eq!(report, Some(UsageReport::Reported(30)));
        assert_eq!(frames.len(), 2);
        assert_eq!(
            frames[0].data_ref().unwrap(),
            &Bytes::from_static(b"tokens")
        );
        let trailers = frames[1].trailers_ref().unwrap();
        assert_eq!(trailers.len(), 4);
        assert_eq!(trailers["x-usage"], "30");
        let other: Vec<_> = trailers.get_all("x-other").iter().collect();
        assert_eq!(other, ["replaced", "twice"]);
        assert_eq!(trailers["ratelimit"], "settled");
    }

    /// Whether the settlement of a body with trailers wanted, given
    /// `frames` then dropped or read to its end (`read_to_end`), was told
    /// its trailers will be sent.
    async fn told_trailers_sent(read_to_end: bool) -> Option<bool> {
        let frames: Vec<Result<Frame<Bytes>, std::convert::Infallible>> =
            vec![Ok(Frame::data(Bytes::from_static(b"tokens")))];
        let inner = http_body_util::StreamBody::new(futures_util::stream::iter(frames));
        let told = Arc::new(Mutex::new(None));
        let recorded = Arc::clone(&told);
        let settle: Settle = Box::new(move |_, sending_trailers| {
            *recorded.lock().unwrap() = Some(sending_trailers);
            Box::pin(async { None })
        });
        let mut body = UsageBody::settling(inner, HeaderName::from_static("x-usage"), None, settle)
            .with_trailers();
        let first = body.frame().await.unwrap().unwrap();
        assert_eq!(first.data_ref().unwrap(), &Bytes::from_static(b"tokens"));
        if read_to_end {
            assert!(body.frame().await.is_none());
        }
        drop(body);
        *told.lock().unwrap()
    }

    #[tokio::test]
    async fn a_body_dropped_before_its_end_settles_without_trailers() {
        // Ended: the settlement's fields are wanted for the trailers.
        assert_eq!(told_trailers_sent(true).await, Some(true));
        // The client gone: no trailers, so no look at the state is needed.
        assert_eq!(told_trailers_sent(false).await, Some(false));
    }

    #[test]
    fn a_weight_of_zero_refuses_trailers() {
        let accepts = |value: &'static str| {
            let mut headers = HeaderMap::new();
            headers.insert(http::header::TE, http::HeaderValue::from_static(value));
            accepts_trailers(&headers)
        };
        assert!(accepts("trailers"));
        assert!(accepts("gzip, Trailers"));
        assert!(accepts("trailers;q=0.5"));
        assert!(accepts("trailers; q=1"));
        assert!(!accepts("trailers;q=0"));
        assert!(!accepts("trailers; Q = 0.000"));
        assert!(!accepts("gzip"));
        assert!(!accepts("trailersx"));
    }

    #[tokio::test]
    async fn without_trailers_the_bodys_own_pass_and_the_settlement_runs_apart() {
        let (frames, report) = ended(false).await;
        assert_eq!(report, Some(UsageReport::Reported(30)));
        assert_eq!(frames.len(), 2);
        let trailers = frames[1].trailers_ref().unwrap();
        assert_eq!(trailers.len(), 2);
        assert_eq!(trailers["x-other"], "kept");
    }
}
