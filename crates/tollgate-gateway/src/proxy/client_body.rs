//! A client's request body on its way to the upstream, watched for the
//! client's own errors (a malformed chunked body, a connection cut mid-body):
//! such a request is the client's fault (400), not the upstream's (502).

use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::task::{Context, Poll};

use axum::body::Body;
use bytes::Bytes;
use http_body::{Frame, SizeHint};
use pin_project_lite::pin_project;

pin_project! {
    /// The client's body, noting in `failed` when reading it failed.
    struct Watched {
        #[pin]
        inner: Body,
        failed: Arc<AtomicBool>,
    }
}

impl http_body::Body for Watched {
    type Data = Bytes;
    type Error = axum::Error;

    fn poll_frame(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, axum::Error>>> {
        let this = self.project();
        let frame = this.inner.poll_frame(cx);
        if let Poll::Ready(Some(Err(_))) = &frame {
            this.failed.store(true, Ordering::Relaxed);
        }
        frame
    }

    fn is_end_stream(&self) -> bool {
        self.inner.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        self.inner.size_hint()
    }
}

/// Whether the client's body failed to be read, for a request that has one.
#[derive(Debug, Default)]
pub(crate) struct ClientBody(Option<Arc<AtomicBool>>);

impl ClientBody {
    /// Watches `body` when it has anything to read (a request without a
    /// body costs nothing).
    pub(crate) fn watch(body: &mut Body) -> Self {
        use http_body::Body as _;
        if body.is_end_stream() {
            return ClientBody(None);
        }
        let failed = Arc::new(AtomicBool::new(false));
        let inner = std::mem::take(body);
        *body = Body::new(Watched {
            inner,
            failed: Arc::clone(&failed),
        });
        ClientBody(Some(failed))
    }

    /// Whether reading the client's body failed.
    pub(crate) fn failed(&self) -> bool {
        self.0
            .as_ref()
            .is_some_and(|failed| failed.load(Ordering::Relaxed))
    }
}
