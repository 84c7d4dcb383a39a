//! Accepting and serving connections within bounds.
//!
//! Why not `axum::serve`: it sets no timer, so a client that opens a connection and never
//! finishes its headers holds a descriptor for ever, and enough of them lock everyone out. Here
//! each connection:
//! - needs one of [`Limits::max_connections`] permits. When all are taken, the connection that
//!   has waited longest without completing a single request is closed to make room (a flood
//!   of connections that never send their headers cannot lock a real client out); when every
//!   connection has been served at least once, the new one waits for one to close;
//! - has [`Limits::tls_handshake_timeout`] to finish the TLS handshake;
//! - has [`Limits::header_read_timeout`] to send each request's headers, which also closes a
//!   keep-alive connection idle that long;
//! - is closed when a response makes no progress for [`Limits::write_stall_timeout`] (a client
//!   that stopped reading a watch or a large list);
//! - has its request dropped when the client hangs up (hyper stops polling it), so a read or a
//!   watch does no more work for nobody. Writes already handed to the store still finish.
//!
//! On shutdown the listener closes, every connection finishes its current request and closes,
//! and [`serve`] returns once they all have.

use crate::limits::Limits;
use axum::Router;
use hyper_util::rt::{TokioIo, TokioTimer};
use hyper_util::service::TowerToHyperService;
use std::collections::BTreeMap;
use std::future::Future;
use std::io;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};
use std::time::Duration;
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::TcpListener;
use tokio::sync::{watch, Notify, Semaphore};
use tokio_rustls::TlsAcceptor;
use tokio_util::task::TaskTracker;

/// Returns once the server is stopping (or its stop signal is gone).
async fn stopped(stop: &mut watch::Receiver<bool>) {
    let _ = stop.wait_for(|s| *s).await;
}

/// Serves `app` on `listener` (over TLS when `tls` is given) until `stop` turns true.
pub async fn serve(
    listener: TcpListener,
    tls: Option<TlsAcceptor>,
    app: Router,
    limits: Limits,
    mut stop: watch::Receiver<bool>,
) -> io::Result<()> {
    let permits = Arc::new(Semaphore::new(limits.max_connections.max(1)));
    let open = Arc::new(Open::default());
    let conns = TaskTracker::new();
    loop {
        let (tcp, peer) = tokio::select! {
            r = listener.accept() => match r {
                Ok(c) => c,
                Err(e) => {
                    // Out of descriptors, or a connection reset before it was accepted.
                    tracing::debug!(error = %e, "accept failed");
                    tokio::time::sleep(Duration::from_millis(50)).await;
                    continue;
                }
            },
            _ = stopped(&mut stop) => break,
        };
        let permit = match permits.clone().try_acquire_owned() {
            Ok(p) => p,
            Err(_) => {
                if open.evict_oldest_unserved() {
                    tracing::debug!(%peer, "connection limit reached: closed a connection that never sent a request");
                }
                tokio::select! {
                    p = permits.clone().acquire_owned() => match p {
                        Ok(p) => p,
                        Err(_) => break,
                    },
                    _ = stopped(&mut stop) => break,
                }
            }
        };
        let _ = tcp.set_nodelay(true);
        let (app, tls, stop) = (app.clone(), tls.clone(), stop.clone());
        let entry = open.register();
        conns.spawn(async move {
            let _permit = permit;
            let work = async {
                match tls {
                    None => serve_one(tcp, app, limits, stop, entry.served.clone()).await,
                    Some(acceptor) => {
                        match tokio::time::timeout(limits.tls_handshake_timeout, acceptor.accept(tcp)).await {
                            Ok(Ok(io)) => serve_one(io, app, limits, stop, entry.served.clone()).await,
                            Ok(Err(e)) => tracing::debug!(%peer, error = %e, "TLS handshake failed"),
                            Err(_) => tracing::debug!(%peer, "TLS handshake timed out"),
                        }
                    }
                }
            };
            tokio::select! {
                _ = work => {}
                _ = entry.evict.notified() => {}
            }
        });
    }
    drop(listener);
    conns.close();
    conns.wait().await;
    Ok(())
}

/// Whether a connection has completed a request, and how to close it.
type Handle = (Arc<AtomicBool>, Arc<Notify>);

/// The open connections by age (the last id handed out, and each connection by id).
#[derive(Default)]
struct Open {
    conns: Mutex<(u64, BTreeMap<u64, Handle>)>,
}

/// One connection's registration; dropping it unregisters.
struct Entry {
    id: u64,
    open: Arc<Open>,
    served: Arc<AtomicBool>,
    evict: Arc<Notify>,
}

impl Open {
    fn register(self: &Arc<Self>) -> Entry {
        let (served, evict) = (Arc::new(AtomicBool::new(false)), Arc::new(Notify::new()));
        let mut c = self.conns.lock().unwrap();
        c.0 += 1;
        let id = c.0;
        c.1.insert(id, (served.clone(), evict.clone()));
        Entry { id, open: self.clone(), served, evict }
    }

    /// Closes the oldest connection that has not completed a request; false when there is none.
    fn evict_oldest_unserved(&self) -> bool {
        let mut c = self.conns.lock().unwrap();
        let victim = c.1.iter().find(|(_, (served, _))| !served.load(Ordering::Relaxed)).map(|(id, _)| *id);
        match victim.and_then(|id| c.1.remove(&id)) {
            Some((_, evict)) => {
                evict.notify_one();
                true
            }
            None => false,
        }
    }
}

impl Drop for Entry {
    fn drop(&mut self) {
        self.open.conns.lock().unwrap().1.remove(&self.id);
    }
}

async fn serve_one<I>(io: I, app: Router, limits: Limits, mut stop: watch::Receiver<bool>, served: Arc<AtomicBool>)
where
    I: AsyncRead + AsyncWrite + Unpin + Send + 'static,
{
    let io = TokioIo::new(StallGuard::new(io, limits.write_stall_timeout));
    let mut http = hyper::server::conn::http1::Builder::new();
    http.timer(TokioTimer::new()).header_read_timeout(limits.header_read_timeout).keep_alive(true);
    let svc = TowerToHyperService::new(app);
    let svc = hyper::service::service_fn(move |req| {
        // Headers complete: this connection is a client's, no longer a candidate for eviction.
        served.store(true, Ordering::Relaxed);
        hyper::service::Service::call(&svc, req)
    });
    let conn = http.serve_connection(io, svc);
    tokio::pin!(conn);
    tokio::select! {
        r = conn.as_mut() => {
            if let Err(e) = r {
                tracing::debug!(error = %e, "connection ended");
            }
        }
        _ = stopped(&mut stop) => {
            conn.as_mut().graceful_shutdown();
            let _ = conn.await;
        }
    }
}

/// Passes reads and writes through, but fails a write that has made no progress for `limit`,
/// which makes hyper close the connection.
struct StallGuard<I> {
    io: I,
    limit: Duration,
    stalled: Option<Pin<Box<tokio::time::Sleep>>>,
}

impl<I> StallGuard<I> {
    fn new(io: I, limit: Duration) -> Self {
        StallGuard { io, limit, stalled: None }
    }

    /// Called when the inner write is pending: starts the clock, or fails once it has run out.
    fn pending<T>(&mut self, cx: &mut Context<'_>) -> Poll<io::Result<T>> {
        let limit = self.limit;
        let sleep = self.stalled.get_or_insert_with(|| Box::pin(tokio::time::sleep(limit)));
        match sleep.as_mut().poll(cx) {
            Poll::Ready(()) => Poll::Ready(Err(io::Error::new(
                io::ErrorKind::TimedOut,
                "the client read nothing of the response for too long",
            ))),
            Poll::Pending => Poll::Pending,
        }
    }

    fn progressed<T>(&mut self, r: Poll<io::Result<T>>, cx: &mut Context<'_>) -> Poll<io::Result<T>> {
        match r {
            Poll::Pending => self.pending(cx),
            ready => {
                self.stalled = None;
                ready
            }
        }
    }
}

impl<I: AsyncRead + Unpin> AsyncRead for StallGuard<I> {
    fn poll_read(mut self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &mut ReadBuf<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.io).poll_read(cx, buf)
    }
}

impl<I: AsyncWrite + Unpin> AsyncWrite for StallGuard<I> {
    fn poll_write(mut self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &[u8]) -> Poll<io::Result<usize>> {
        let r = Pin::new(&mut self.io).poll_write(cx, buf);
        self.progressed(r, cx)
    }

    fn poll_write_vectored(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        let r = Pin::new(&mut self.io).poll_write_vectored(cx, bufs);
        self.progressed(r, cx)
    }

    fn is_write_vectored(&self) -> bool {
        self.io.is_write_vectored()
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        let r = Pin::new(&mut self.io).poll_flush(cx);
        self.progressed(r, cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.io).poll_shutdown(cx)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tokio::io::AsyncWriteExt;

    #[tokio::test(start_paused = true)]
    async fn a_write_the_peer_never_reads_fails_after_the_stall_limit() {
        let (a, _b) = tokio::io::duplex(64);
        let mut g = StallGuard::new(a, Duration::from_secs(5));
        let big = vec![0u8; 1024];
        let err = g.write_all(&big).await.unwrap_err();
        assert_eq!(err.kind(), io::ErrorKind::TimedOut);
    }

    #[tokio::test(start_paused = true)]
    async fn a_slow_reader_that_keeps_reading_is_not_cut_off() {
        let (a, mut b) = tokio::io::duplex(64);
        let reader = tokio::spawn(async move {
            use tokio::io::AsyncReadExt;
            let mut got = 0;
            let mut buf = [0u8; 64];
            while got < 1024 {
                tokio::time::sleep(Duration::from_secs(4)).await;
                got += b.read(&mut buf).await.unwrap();
            }
            got
        });
        let mut g = StallGuard::new(a, Duration::from_secs(5));
        g.write_all(&[0u8; 1024]).await.unwrap();
        assert_eq!(reader.await.unwrap(), 1024);
    }
}
