//! [`InFlightBody`]: a response body holding a concurrency slot.

use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};

use http_body::{Body, Frame, SizeHint};
use tollgate_core::{SlotLease, SlotStore};

/// A slot held; given back when dropped.
pub(crate) struct SlotGuard {
    pub(crate) slots: Arc<dyn SlotStore>,
    pub(crate) lease: Option<SlotLease>,
}

impl Drop for SlotGuard {
    fn drop(&mut self) {
        if let Some(lease) = self.lease.take() {
            self.slots.release(lease);
        }
    }
}

pin_project_lite::pin_project! {
    /// The inner service's response body, holding the request's slot until
    /// it is dropped: a server drops it once sent, or when the client goes.
    pub struct InFlightBody<B> {
        #[pin]
        inner: B,
        slot: Option<SlotGuard>,
    }
}

impl<B> InFlightBody<B> {
    pub(crate) fn new(inner: B, slot: Option<SlotGuard>) -> Self {
        InFlightBody { inner, slot }
    }
}

impl<B: std::fmt::Debug> std::fmt::Debug for InFlightBody<B> {
    fn fmt(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        formatter
            .debug_struct("InFlightBody")
            .field("inner", &self.inner)
            .field("holds_slot", &self.slot.is_some())
            .finish()
    }
}

impl<B: Body> Body for InFlightBody<B> {
    type Data = B::Data;
    type Error = B::Error;

    fn poll_frame(
        self: Pin<&mut Self>,
        context: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<B::Data>, B::Error>>> {
        self.project().inner.poll_frame(context)
    }

    fn is_end_stream(&self) -> bool {
        self.inner.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        self.inner.size_hint()
    }
}
