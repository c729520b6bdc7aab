//! A connection that is closed when nothing arrives from its client for [`limits::IDLE_LIMIT`]: what
//! ends a client that connects and sends nothing, only the HTTP/2 preface, or half a TLS ClientHello
//! (neither hyper nor rustls time a handshake out). A live client is never that quiet: the server pings
//! it every [`limits::KEEPALIVE`] without a frame, and its answer is a read.
#![forbid(unsafe_code)]

use super::limits;
use std::future::Future;
use std::io;
use std::pin::Pin;
use std::task::{Context, Poll};
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::TcpStream;
use tokio::time::{Instant, Sleep};
use tonic::transport::server::{Connected, TcpConnectInfo};

/// A TCP connection with a read deadline that every byte from the client pushes back.
#[derive(Debug)]
pub struct Idle {
    inner: TcpStream,
    deadline: Pin<Box<Sleep>>,
}

impl Idle {
    pub fn new(inner: TcpStream) -> Idle {
        Idle {
            inner,
            deadline: Box::pin(tokio::time::sleep(limits::IDLE_LIMIT)),
        }
    }
}

impl AsyncRead for Idle {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let before = buf.filled().len();
        // The socket first: bytes that arrived while the runtime was busy count as in time.
        match Pin::new(&mut self.inner).poll_read(cx, buf) {
            Poll::Ready(r) => {
                if buf.filled().len() > before {
                    let next = Instant::now() + limits::IDLE_LIMIT;
                    self.deadline.as_mut().reset(next);
                }
                Poll::Ready(r)
            }
            Poll::Pending => match self.deadline.as_mut().poll(cx) {
                Poll::Ready(()) => Poll::Ready(Err(io::Error::new(
                    io::ErrorKind::TimedOut,
                    "nothing from the gNMI client within the idle limit",
                ))),
                Poll::Pending => Poll::Pending,
            },
        }
    }
}

impl AsyncWrite for Idle {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.inner).poll_write(cx, buf)
    }
    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.inner).poll_flush(cx)
    }
    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.inner).poll_shutdown(cx)
    }
    fn poll_write_vectored(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.inner).poll_write_vectored(cx, bufs)
    }
    fn is_write_vectored(&self) -> bool {
        self.inner.is_write_vectored()
    }
}

impl Connected for Idle {
    type ConnectInfo = TcpConnectInfo;
    fn connect_info(&self) -> TcpConnectInfo {
        self.inner.connect_info()
    }
}
