//! A client connection asked to close gracefully once its listener stops
//! ([`close_when_stopped`]): hyper's HTTP/1 connection answers the request
//! it is serving with `Connection: close` and ends, an HTTP/2 connection
//! sends `GOAWAY` and ends once its streams have. hyper-util's
//! `GracefulShutdown` does the same for the connections it knows, but not
//! for hyper's own upgradeable HTTP/1 connection, which the gateway serves
//! when it needs no HTTP/2 detection, and it polls its stop signal at every
//! wake of the connection; here the stop is polled only on its own wakes.

use std::error::Error as StdError;
use std::future::Future;
use std::pin::Pin;

use hyper::body::{Body, Incoming};
use hyper::rt::{Read, Write};
use hyper::server::conn::http1;
use hyper::service::{HttpService, Service};
use hyper_util::server::conn::auto::{self, HttpServerConnExec};

use crate::own_wakes::OnOwnWakes;

/// A served connection that can be asked to end gracefully.
pub trait CloseGracefully: Future {
    /// Asks the connection to end once what it is serving is answered; it is
    /// still polled until it ends.
    fn close_gracefully(self: Pin<&mut Self>);
}

impl<I, S, B> CloseGracefully for http1::UpgradeableConnection<I, S>
where
    S: HttpService<Incoming, ResBody = B>,
    S::Error: Into<Box<dyn StdError + Send + Sync>>,
    I: Read + Write + Unpin + Send + 'static,
    B: Body + 'static,
    B::Error: Into<Box<dyn StdError + Send + Sync>>,
{
    fn close_gracefully(self: Pin<&mut Self>) {
        self.graceful_shutdown();
    }
}

impl<I, S, E, B> CloseGracefully for auto::UpgradeableConnection<'_, I, S, E>
where
    S: Service<http::Request<Incoming>, Response = http::Response<B>>,
    S::Future: 'static,
    S::Error: Into<Box<dyn StdError + Send + Sync>>,
    I: Read + Write + Unpin + Send + 'static,
    B: Body + 'static,
    B::Error: Into<Box<dyn StdError + Send + Sync>>,
    E: HttpServerConnExec<S::Future, B>,
{
    fn close_gracefully(self: Pin<&mut Self>) {
        self.graceful_shutdown();
    }
}

/// Polls `connection` to its end; once `stopped` resolves (the listener
/// stopped accepting), asks it to close gracefully first. `stopped` is
/// polled first, then only when its own waker is woken.
pub async fn close_when_stopped<Connection: CloseGracefully>(
    connection: Connection,
    stopped: impl Future<Output = ()>,
) -> Connection::Output {
    let mut connection = std::pin::pin!(connection);
    let stopped = std::pin::pin!(stopped);
    let mut stop = Some(OnOwnWakes::new(stopped));
    std::future::poll_fn(|context| {
        // The stop first, deliberately: a connection woken by both (its
        // upstream's answer and the stop) is asked to close before it
        // writes its response, which then says `Connection: close`.
        if let Some(waiting) = &mut stop
            && waiting.poll(context).is_ready()
        {
            stop = None;
            connection.as_mut().close_gracefully();
        }
        connection.as_mut().poll(context)
    })
    .await
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::task::Poll;
    use tokio::sync::Notify;

    /// A connection that ends at its poll after being asked to close, and
    /// counts its polls.
    struct Closing {
        asked: bool,
        polls: Arc<AtomicUsize>,
    }

    impl Future for Closing {
        type Output = &'static str;

        fn poll(self: Pin<&mut Self>, _: &mut std::task::Context<'_>) -> Poll<&'static str> {
            self.polls.fetch_add(1, Ordering::Relaxed);
            if self.asked {
                Poll::Ready("closed")
            } else {
                Poll::Pending
            }
        }
    }

    impl CloseGracefully for Closing {
        fn close_gracefully(mut self: Pin<&mut Self>) {
            self.asked = true;
        }
    }

    #[tokio::test]
    async fn a_stop_asks_the_connection_to_close_and_it_is_polled_to_its_end() {
        let stop = Arc::new(Notify::new());
        let polls = Arc::new(AtomicUsize::new(0));
        let connection = Closing {
            asked: false,
            polls: Arc::clone(&polls),
        };
        let stopped = {
            let stop = Arc::clone(&stop);
            async move { stop.notified().await }
        };
        let serving = tokio::spawn(close_when_stopped(connection, stopped));
        tokio::task::yield_now().await;
        // Nothing has asked it to close: the connection is polled once and
        // waits.
        assert!(!serving.is_finished());
        stop.notify_one();
        assert_eq!(serving.await.unwrap(), "closed");
        // Its first poll, then the one after the stop.
        assert_eq!(polls.load(Ordering::Relaxed), 2);
    }
}
