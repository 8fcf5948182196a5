//! [`ResponseFuture`]: the inner service's response with the RateLimit headers
//! added, or tollgate's own response.

use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll, ready};

use bytes::Bytes;
use http::Response;
use http_body_util::{Either, Full};
use pin_project_lite::pin_project;

use crate::headers::RateLimitHeaders;
use crate::problem::Problem;

pin_project! {
    /// The response future of [`RateLimit`](super::RateLimit).
    pub struct ResponseFuture<F> {
        #[pin]
        state: State<F>,
    }
}

pin_project! {
    #[project = StateProjection]
    enum State<F> {
        Called {
            #[pin]
            future: F,
            headers: Option<RateLimitHeaders>,
        },
        Denied {
            response: Option<Response<Full<Bytes>>>,
        },
    }
}

impl<F> ResponseFuture<F> {
    pub(crate) fn called(future: F, headers: Option<RateLimitHeaders>) -> Self {
        ResponseFuture {
            state: State::Called { future, headers },
        }
    }

    pub(crate) fn denied(response: Response<Full<Bytes>>) -> Self {
        ResponseFuture {
            state: State::Denied {
                response: Some(response),
            },
        }
    }
}

impl<F, Body, Error> Future for ResponseFuture<F>
where
    F: Future<Output = Result<Response<Body>, Error>>,
{
    type Output = Result<Response<Either<Body, Full<Bytes>>>, Error>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        match self.project().state.project() {
            StateProjection::Called { future, headers } => {
                let mut response = ready!(future.poll(cx))?;
                if let Some(headers) = headers.take() {
                    headers.apply(response.headers_mut());
                }
                Poll::Ready(Ok(response.map(Either::Left)))
            }
            StateProjection::Denied { response } => {
                let response = response
                    .take()
                    .unwrap_or_else(|| Problem::internal("response already taken".to_owned()));
                Poll::Ready(Ok(response.map(Either::Right)))
            }
        }
    }
}
