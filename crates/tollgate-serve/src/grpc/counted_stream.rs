//! A gRPC connection as a worker serves it: it counts itself among its
//! worker's open connections while it is open ([`Live`], for
//! `FewestOpen`), closes itself once idle ([`ClosedWhenIdle`]),
//! and gives tonic the connection's activity, so that a call can count
//! itself in flight ([`Connection`]).

use std::io;
use std::pin::Pin;
use std::task::{Context, Poll};

use std::sync::Arc;
use std::time::Duration;
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};

use crate::{Activity, ClosedWhenIdle, Connections, Live, Stopping};
use tokio::net::TcpStream;
use tonic::transport::server::Connected;

/// A [`TcpStream`] counted while it lives and closed once idle; reads and
/// writes are the stream's.
#[derive(Debug)]
pub(crate) struct CountedStream {
    stream: ClosedWhenIdle<TcpStream>,
    activity: Arc<Activity>,
    _live: Live,
}

impl CountedStream {
    /// `stream`, counted by `live`, closed once it has moved no byte for
    /// `idle_timeout` with no call in flight, listed in `connections` (shed
    /// at once if its listener, `stopping`'s, has stopped).
    pub(crate) fn new(
        stream: TcpStream,
        live: Live,
        (idle_timeout, connections): (Duration, &Connections),
        stopping: &Stopping,
    ) -> Self {
        let activity = Activity::new();
        connections.register_for(&activity, stopping);
        CountedStream {
            stream: ClosedWhenIdle::new(stream, &activity, idle_timeout),
            activity,
            _live: live,
        }
    }
}

/// What tonic puts in each call's extensions: the connection's activity (a
/// call holds an [`InFlight`](crate::InFlight) on it).
#[derive(Clone, Debug)]
pub(crate) struct Connection {
    pub(crate) activity: Arc<Activity>,
}

impl Connected for CountedStream {
    type ConnectInfo = Connection;

    fn connect_info(&self) -> Connection {
        Connection {
            activity: Arc::clone(&self.activity),
        }
    }
}

impl AsyncRead for CountedStream {
    fn poll_read(
        mut self: Pin<&mut Self>,
        context: &mut Context<'_>,
        buffer: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        Pin::new(&mut self.stream).poll_read(context, buffer)
    }
}

impl AsyncWrite for CountedStream {
    fn poll_write(
        mut self: Pin<&mut Self>,
        context: &mut Context<'_>,
        bytes: &[u8],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.stream).poll_write(context, bytes)
    }

    fn poll_write_vectored(
        mut self: Pin<&mut Self>,
        context: &mut Context<'_>,
        buffers: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.stream).poll_write_vectored(context, buffers)
    }

    fn is_write_vectored(&self) -> bool {
        self.stream.is_write_vectored()
    }

    fn poll_flush(mut self: Pin<&mut Self>, context: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.stream).poll_flush(context)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, context: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.stream).poll_shutdown(context)
    }
}
