//! [`InFlightBody`]: a response body that keeps its request counted in
//! flight ([`InFlight`]) until the body has been handed on whole (or
//! dropped), passing on its frames, its end and its size unchanged, so that
//! a body of known length is still sent with `Content-Length`.

use std::pin::Pin;
use std::task::{Context, Poll};

use http_body::{Body, Frame, SizeHint};

use crate::idle::InFlight;

/// `body`, its request in flight while it lives.
#[derive(Debug)]
pub struct InFlightBody<Inner> {
    body: Inner,
    _in_flight: InFlight,
}

impl<Inner> InFlightBody<Inner> {
    /// `body`, holding `in_flight` until it is dropped.
    pub fn new(body: Inner, in_flight: InFlight) -> Self {
        InFlightBody {
            body,
            _in_flight: in_flight,
        }
    }
}

impl<Inner: Body + Unpin> Body for InFlightBody<Inner> {
    type Data = Inner::Data;
    type Error = Inner::Error;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        context: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Self::Data>, Self::Error>>> {
        Pin::new(&mut self.body).poll_frame(context)
    }

    fn is_end_stream(&self) -> bool {
        self.body.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        self.body.size_hint()
    }
}
