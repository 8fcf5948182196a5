//! Serving a plain HTTP listener (HTTP/1.1, or HTTP/2 with prior knowledge)
//! with the rules every tollgate listener keeps: accepting through
//! [`accept`](crate::accept()) (its error policy, `TCP_NODELAY`), each
//! connection closed once idle ([`race_idle`](crate::race_idle())), a stop that lets
//! requests in flight finish and a forced end that closes what is left. The
//! listeners this serves: the gateway's admin listener, and `tollgate rls`'s
//! HTTP, debug and Prometheus listeners. (The gateway's proxy listener and
//! the gRPC listener serve their connections their own way, on the same
//! mechanisms.)

use std::convert::Infallible;
use std::error::Error;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use hyper::body::Incoming;
use hyper::service::{Service as _, service_fn};
use hyper_util::rt::{TokioExecutor, TokioIo, TokioTimer};
use hyper_util::server::conn::auto;
use hyper_util::service::TowerToHyperService;
use tokio::net::TcpListener;
use tokio::task::JoinSet;

use crate::graceful::close_when_stopped;
use crate::idle::{Activity, InFlight, Tracked};
use crate::idle_race::race_idle;
use crate::in_flight_body::InFlightBody;
use crate::shed::Connections;
use crate::shutdown::Stopping;

/// Serves `listener` until `stopping` says stop, each connection from `peer`
/// answered by `service_for(peer)` (a tower service, such as an axum
/// `Router`); then waits for the connections' requests in flight, or until
/// `stopping` forces the end, when every connection still open is closed.
/// A connection that moves no byte for `idle_timeout` with no request in
/// flight is closed, whatever its phase (before its first byte, between
/// requests, an HTTP/2 connection sending none). Its connections are listed
/// in `listed`, the process's list, for shedding when it runs out of
/// file descriptors.
pub async fn serve_http<Make, Service, ResponseBody>(
    listener: TcpListener,
    service_for: Make,
    stopping: Stopping,
    idle_timeout: Duration,
    listed: Arc<Connections>,
) where
    Make: Fn(SocketAddr) -> Service,
    Service: tower_service::Service<
            http::Request<Incoming>,
            Response = http::Response<ResponseBody>,
            Error = Infallible,
        > + Clone
        + Send
        + 'static,
    Service::Future: Send + 'static,
    ResponseBody: http_body::Body + Unpin + Send + 'static,
    ResponseBody::Data: Send,
    ResponseBody::Error: Into<Box<dyn Error + Send + Sync>>,
{
    let mut builder = auto::Builder::new(TokioExecutor::new());
    builder.http1().timer(TokioTimer::new());
    let mut connections = JoinSet::new();
    loop {
        tokio::select! {
            accepted = crate::accept(&listener, &stopping, &listed) => {
                let Some((stream, peer)) = accepted else { break };
                let activity = Activity::new();
                listed.register_for(&activity, &stopping);
                let io = TokioIo::new(Tracked::new(stream, &activity));
                let service = TowerToHyperService::new(service_for(peer));
                let requests = Arc::clone(&activity);
                let service = service_fn(move |request: http::Request<Incoming>| {
                    // In flight until the response's body has been handed on whole.
                    let in_flight = InFlight::start(&requests);
                    let answering = service.call(request);
                    async move {
                        let response = answering.await?;
                        Ok::<_, Infallible>(
                            response.map(|body| InFlightBody::new(body, in_flight)),
                        )
                    }
                });
                // Asked to close once its requests are answered at a stop.
                let connection = close_when_stopped(
                    builder.serve_connection_with_upgrades(io, service).into_owned(),
                    stopping.stopped(),
                );
                connections.spawn(async move {
                    match race_idle(connection, &activity, idle_timeout).await {
                        Some(Err(error)) => tracing::debug!(%error, "HTTP connection ended"),
                        Some(Ok(())) => {}
                        None => tracing::debug!(?idle_timeout, "idle HTTP connection closed"),
                    }
                });
            }
            Some(_) = connections.join_next(), if !connections.is_empty() => {}
        }
    }
    drop(listener);
    tokio::select! {
        () = async { while connections.join_next().await.is_some() {} } => {}
        () = stopping.forced() => {}
    }
    // What is left is closed as the set drops.
    connections.abort_all();
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::shutdown::Shutdown;
    use tokio::io::{AsyncReadExt, AsyncWriteExt};

    fn hello(
        _peer: SocketAddr,
    ) -> impl tower_service::Service<
        http::Request<Incoming>,
        Response = http::Response<String>,
        Error = Infallible,
        Future = std::future::Ready<Result<http::Response<String>, Infallible>>,
    > + Clone {
        #[derive(Clone)]
        struct Hello;
        impl tower_service::Service<http::Request<Incoming>> for Hello {
            type Response = http::Response<String>;
            type Error = Infallible;
            type Future = std::future::Ready<Result<Self::Response, Infallible>>;
            fn poll_ready(
                &mut self,
                _: &mut std::task::Context<'_>,
            ) -> std::task::Poll<Result<(), Infallible>> {
                std::task::Poll::Ready(Ok(()))
            }
            fn call(&mut self, _: http::Request<Incoming>) -> Self::Future {
                std::future::ready(Ok(http::Response::new("hello".to_owned())))
            }
        }
        Hello
    }

    #[tokio::test]
    async fn a_connection_that_sends_nothing_is_closed_after_the_idle_timeout() {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let address = listener.local_addr().unwrap();
        let (shutdown, stopping) = Shutdown::new();
        // Shorter than hyper's own 30 s for a request's headers.
        let timeout = Duration::from_millis(300);
        tokio::spawn(serve_http(
            listener,
            hello,
            stopping,
            timeout,
            Connections::new(),
        ));
        let mut silent = tokio::net::TcpStream::connect(address).await.unwrap();
        let start = std::time::Instant::now();
        let mut byte = [0];
        // Closed by the server: the read ends (0 bytes), no sooner than the
        // timeout (the wait is bounded at 20 s).
        let read = tokio::time::timeout(Duration::from_secs(20), silent.read(&mut byte)).await;
        assert_eq!(read.unwrap().unwrap(), 0);
        assert!(start.elapsed() >= timeout);
        // A request on a new connection is still answered.
        let mut client = tokio::net::TcpStream::connect(address).await.unwrap();
        client
            .write_all(b"GET / HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
            .await
            .unwrap();
        let mut answer = String::new();
        client.read_to_string(&mut answer).await.unwrap();
        assert!(answer.starts_with("HTTP/1.1 200 OK"), "{answer}");
        assert!(answer.ends_with("hello"), "{answer}");
        drop(shutdown);
    }

    #[tokio::test]
    async fn a_request_in_flight_at_a_stop_is_answered_with_connection_close() {
        use std::sync::atomic::{AtomicBool, Ordering};
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let address = listener.local_addr().unwrap();
        let (shutdown, stopping) = Shutdown::new();
        let entered = Arc::new(AtomicBool::new(false));
        let release = Arc::new(tokio::sync::Notify::new());
        let service = {
            let (entered, release) = (Arc::clone(&entered), Arc::clone(&release));
            move |_peer: SocketAddr| {
                let (entered, release) = (Arc::clone(&entered), Arc::clone(&release));
                tower_service_fn(move || {
                    let (entered, release) = (Arc::clone(&entered), Arc::clone(&release));
                    async move {
                        entered.store(true, Ordering::SeqCst);
                        release.notified().await;
                        Ok::<_, Infallible>(http::Response::new("finally".to_owned()))
                    }
                })
            }
        };
        let serving = tokio::spawn(serve_http(
            listener,
            service,
            stopping,
            Duration::from_secs(60),
            Connections::new(),
        ));
        let mut client = tokio::net::TcpStream::connect(address).await.unwrap();
        client
            .write_all(b"GET / HTTP/1.1\r\nHost: x\r\n\r\n")
            .await
            .unwrap();
        tokio::time::timeout(Duration::from_secs(20), async {
            while !entered.load(Ordering::SeqCst) {
                tokio::task::yield_now().await;
            }
        })
        .await
        .expect("the request reaches the service");
        // The stop wakes the connection's task before the release does:
        // it is asked to close first, then answers.
        shutdown.stop();
        release.notify_one();
        let mut answer = String::new();
        tokio::time::timeout(Duration::from_secs(20), client.read_to_string(&mut answer))
            .await
            .expect("the connection closes after its answer")
            .unwrap();
        assert!(answer.starts_with("HTTP/1.1 200 OK"), "{answer}");
        assert!(
            answer
                .to_ascii_lowercase()
                .contains("\r\nconnection: close\r\n"),
            "{answer}"
        );
        assert!(answer.ends_with("finally"), "{answer}");
        tokio::time::timeout(Duration::from_secs(20), serving)
            .await
            .expect("the listener ends once its connection has")
            .unwrap();
    }

    /// A tower service answering each request with `answer()`'s future.
    fn tower_service_fn<Answer, Answering>(
        answer: Answer,
    ) -> impl tower_service::Service<
        http::Request<Incoming>,
        Response = http::Response<String>,
        Error = Infallible,
        Future = Answering,
    > + Clone
    + Send
    + 'static
    where
        Answer: Fn() -> Answering + Clone + Send + 'static,
        Answering: Future<Output = Result<http::Response<String>, Infallible>> + Send + 'static,
    {
        #[derive(Clone)]
        struct Answers<Answer>(Answer);
        impl<Answer, Answering> tower_service::Service<http::Request<Incoming>> for Answers<Answer>
        where
            Answer: Fn() -> Answering,
            Answering: Future<Output = Result<http::Response<String>, Infallible>>,
        {
            type Response = http::Response<String>;
            type Error = Infallible;
            type Future = Answering;
            fn poll_ready(
                &mut self,
                _: &mut std::task::Context<'_>,
            ) -> std::task::Poll<Result<(), Infallible>> {
                std::task::Poll::Ready(Ok(()))
            }
            fn call(&mut self, _: http::Request<Incoming>) -> Answering {
                (self.0)()
            }
        }
        Answers(answer)
    }
}
