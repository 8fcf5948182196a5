//! [`UsageBody`]: a response body that hands its request's usage report
//! (core's [`UsageReport`], read from a response header, else from a
//! trailer of the same name) to a settlement once, when the body ends or is
//! dropped (the client gone). Used by a route layer with
//! [`RouteLimitLayer::charge`](crate::RouteLimitLayer::charge) and by the
//! gateway's routes with `charge`.

use std::pin::Pin;
use std::task::{Context, Poll};

use bytes::Buf;
use http::{HeaderMap, HeaderName};
use http_body::{Body, Frame, SizeHint};
use tollgate_core::UsageReport;

/// The report `headers` carry under `name` (`None`: none).
pub fn read_usage(headers: &HeaderMap, name: &HeaderName) -> Option<UsageReport> {
    UsageReport::parse(headers.get_all(name).iter().map(|value| value.as_bytes()))
}

/// What settles a request's usage, given its report (`None`: none).
pub type Settle = Box<dyn FnOnce(Option<UsageReport>) + Send>;

pin_project_lite::pin_project! {
    /// A response body passing `B` through, reading a usage report from its
    /// trailers, and calling its settlement once at its end (or drop). A
    /// report in both the response header and a trailer is
    /// [`UsageReport::Bad`]: which one is meant is not known.
    pub struct UsageBody<B> {
        #[pin]
        body: B,
        header: Option<HeaderName>,
        settle: Option<Settle>,
        report: Option<UsageReport>,
    }

    impl<B> PinnedDrop for UsageBody<B> {
        fn drop(this: Pin<&mut Self>) {
            let this = this.project();
            if let Some(settle) = this.settle.take() {
                settle(*this.report);
            }
        }
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
        }
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
        let this = self.project();
        let polled = this.body.poll_frame(context);
        if this.settle.is_none() {
            return polled;
        }
        match &polled {
            Poll::Ready(Some(Ok(frame))) => {
                if let (Some(trailers), Some(header)) = (frame.trailers_ref(), this.header.as_ref())
                    && let Some(reported) = read_usage(trailers, header)
                {
                    *this.report = Some(match this.report {
                        Some(_) => UsageReport::Bad,
                        None => reported,
                    });
                }
            }
            Poll::Ready(None | Some(Err(_))) => {
                if let Some(settle) = this.settle.take() {
                    settle(*this.report);
                }
            }
            Poll::Pending => {}
        }
        polled
    }

    fn is_end_stream(&self) -> bool {
        self.body.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        self.body.size_hint()
    }
}
