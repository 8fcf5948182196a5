//! A TCP connection that counts itself among its worker's live connections
//! while it is open ([`Live`]), so that the accepting task can hand the next
//! connection to the worker with the fewest.

use std::io;
use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::task::{Context, Poll};

use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::TcpStream;
use tonic::transport::server::{Connected, TcpConnectInfo};

/// One connection counted in a worker's count of live connections, from
/// when it is handed to the worker until it is dropped (closed, or never
/// taken).
#[derive(Debug)]
pub(crate) struct Live(Arc<AtomicUsize>);

impl Live {
    /// Counts one more connection in `count`.
    pub(crate) fn count_in(count: &Arc<AtomicUsize>) -> Live {
        count.fetch_add(1, Ordering::Relaxed);
        Live(Arc::clone(count))
    }
}

impl Drop for Live {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::Relaxed);
    }
}

/// A [`TcpStream`] counted while it lives; reads, writes and connection
/// information are the stream's.
#[derive(Debug)]
pub(crate) struct CountedStream {
    stream: TcpStream,
    _live: Live,
}

impl CountedStream {
    pub(crate) fn new(stream: TcpStream, live: Live) -> Self {
        CountedStream {
            stream,
            _live: live,
        }
    }
}

impl Connected for CountedStream {
    type ConnectInfo = TcpConnectInfo;

    fn connect_info(&self) -> TcpConnectInfo {
        self.stream.connect_info()
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_connection_counts_until_it_is_dropped() {
        let count = Arc::new(AtomicUsize::new(0));
        let first = Live::count_in(&count);
        let second = Live::count_in(&count);
        assert_eq!(count.load(Ordering::Relaxed), 2);
        drop(first);
        assert_eq!(count.load(Ordering::Relaxed), 1);
        drop(second);
        assert_eq!(count.load(Ordering::Relaxed), 0);
    }
}
