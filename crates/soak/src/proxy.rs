//! A loopback TCP proxy that breaks connections on command: added latency, resets, graceful
//! drops, stalled streams and refused connections.
//!
//! It forwards bytes only (TLS passes through untouched), so the client cannot tell it from a
//! flaky network. A stall stops forwarding what the server sends on one connection while the
//! connection stays open: for a watch, events stop arriving and nothing says so — the client
//! must notice by itself (timeouts, bookmarks) or wait until the stall ends in a reset.

use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::watch;

/// What a connection is told to do.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Cmd {
    /// Forward both ways.
    Run,
    /// Stop forwarding server-to-client bytes; keep the connection open.
    Stall,
    /// Abort both sides with a TCP reset.
    Reset,
    /// Close both sides gracefully (FIN).
    Close,
}

/// Faults injected so far.
#[derive(Default, Debug)]
pub struct ProxyStats {
    /// Connections accepted.
    pub connections: AtomicU64,
    /// Connections reset.
    pub resets: AtomicU64,
    /// Connections closed gracefully mid-stream.
    pub drops: AtomicU64,
    /// Connections stalled.
    pub stalls: AtomicU64,
    /// Connections refused (reset at accept).
    pub refused: AtomicU64,
    /// Latency windows.
    pub latency_windows: AtomicU64,
}

struct Conn {
    opened: Instant,
    cmd: watch::Sender<Cmd>,
}

/// The proxy's shared state; cheap to clone.
#[derive(Clone)]
pub struct Proxy {
    conns: Arc<Mutex<HashMap<u64, Conn>>>,
    latency_ms: Arc<AtomicU64>,
    refuse_until: Arc<Mutex<Option<Instant>>>,
    /// Faults injected so far.
    pub stats: Arc<ProxyStats>,
    /// Where clients connect.
    pub addr: SocketAddr,
}

impl Proxy {
    /// Listens on a free loopback port and forwards every connection to `upstream`.
    pub async fn start(upstream: SocketAddr) -> anyhow::Result<Proxy> {
        let listener = TcpListener::bind("127.0.0.1:0").await?;
        let p = Proxy {
            conns: Arc::default(),
            latency_ms: Arc::default(),
            refuse_until: Arc::default(),
            stats: Arc::default(),
            addr: listener.local_addr()?,
        };
        let q = p.clone();
        tokio::spawn(async move {
            let mut next = 0u64;
            loop {
                let Ok((client, _)) = listener.accept().await else { continue };
                q.stats.connections.fetch_add(1, Ordering::Relaxed);
                let refusing = q.refuse_until.lock().unwrap().is_some_and(|t| Instant::now() < t);
                if refusing {
                    q.stats.refused.fetch_add(1, Ordering::Relaxed);
                    reset(&client);
                    continue;
                }
                next += 1;
                let (tx, rx) = watch::channel(Cmd::Run);
                q.conns.lock().unwrap().insert(next, Conn { opened: Instant::now(), cmd: tx });
                let (q2, id) = (q.clone(), next);
                tokio::spawn(async move {
                    if let Ok(Ok(server)) =
                        tokio::time::timeout(Duration::from_secs(5), TcpStream::connect(upstream)).await
                    {
                        pump(client, server, rx, &q2.latency_ms).await;
                    }
                    q2.conns.lock().unwrap().remove(&id);
                });
            }
        });
        Ok(p)
    }

    fn send(&self, id: u64, cmd: Cmd) -> bool {
        self.conns.lock().unwrap().get(&id).is_some_and(|c| c.cmd.send(cmd).is_ok())
    }

    /// Open connections, oldest first, with their age.
    fn open(&self) -> Vec<(u64, Duration)> {
        let mut v: Vec<(u64, Duration)> =
            self.conns.lock().unwrap().iter().map(|(id, c)| (*id, c.opened.elapsed())).collect();
        v.sort_by_key(|(_, age)| std::cmp::Reverse(*age));
        v
    }

    /// Resets one open connection chosen by `pick` (an index into the open ones); false when
    /// none is open.
    pub fn reset_one(&self, pick: usize) -> bool {
        let open = self.open();
        if open.is_empty() {
            return false;
        }
        let ok = self.send(open[pick % open.len()].0, Cmd::Reset);
        if ok {
            self.stats.resets.fetch_add(1, Ordering::Relaxed);
        }
        ok
    }

    /// Resets every open connection; returns how many.
    pub fn reset_all(&self) -> usize {
        let n = self.open().into_iter().filter(|(id, _)| self.send(*id, Cmd::Reset)).count();
        self.stats.resets.fetch_add(n as u64, Ordering::Relaxed);
        n
    }

    /// Closes one open connection gracefully.
    pub fn drop_one(&self, pick: usize) -> bool {
        let open = self.open();
        if open.is_empty() {
            return false;
        }
        let ok = self.send(open[pick % open.len()].0, Cmd::Close);
        if ok {
            self.stats.drops.fetch_add(1, Ordering::Relaxed);
        }
        ok
    }

    /// Stalls a long-lived connection (a watch, most likely: open for 10 s or more; else any),
    /// then after `for_` resets it or lets it go on. Returns false when none is open.
    pub fn stall(&self, pick: usize, for_: Duration, then_reset: bool) -> bool {
        let open = self.open();
        let long: Vec<u64> =
            open.iter().filter(|(_, age)| *age >= Duration::from_secs(10)).map(|(id, _)| *id).collect();
        let pool: Vec<u64> = if long.is_empty() { open.iter().map(|(id, _)| *id).collect() } else { long };
        if pool.is_empty() {
            return false;
        }
        let id = pool[pick % pool.len()];
        if !self.send(id, Cmd::Stall) {
            return false;
        }
        self.stats.stalls.fetch_add(1, Ordering::Relaxed);
        let p = self.clone();
        tokio::spawn(async move {
            tokio::time::sleep(for_).await;
            let next = if then_reset { Cmd::Reset } else { Cmd::Run };
            if p.send(id, next) && then_reset {
                p.stats.resets.fetch_add(1, Ordering::Relaxed);
            }
        });
        true
    }

    /// Adds `ms` of latency before every forwarded chunk, for `for_`.
    pub fn latency(&self, ms: u64, for_: Duration) {
        self.stats.latency_windows.fetch_add(1, Ordering::Relaxed);
        self.latency_ms.store(ms, Ordering::Relaxed);
        let l = self.latency_ms.clone();
        tokio::spawn(async move {
            tokio::time::sleep(for_).await;
            l.store(0, Ordering::Relaxed);
        });
    }

    /// Resets every new connection for `for_`.
    pub fn refuse(&self, for_: Duration) {
        *self.refuse_until.lock().unwrap() = Some(Instant::now() + for_);
    }

    /// Ends every fault: no latency, no refusal, stalled connections reset.
    pub fn heal(&self) {
        self.latency_ms.store(0, Ordering::Relaxed);
        *self.refuse_until.lock().unwrap() = None;
        for (id, _) in self.open() {
            let stalled = self.conns.lock().unwrap().get(&id).is_some_and(|c| *c.cmd.borrow() == Cmd::Stall);
            if stalled && self.send(id, Cmd::Reset) {
                self.stats.resets.fetch_add(1, Ordering::Relaxed);
            }
        }
    }
}

/// Closes `s` with a TCP reset (SO_LINGER 0) instead of a FIN.
fn reset(s: &TcpStream) {
    #[allow(deprecated)]
    let _ = s.set_linger(Some(Duration::ZERO));
}

/// Forwards between `client` and `server` until both sides are done or a command ends it.
async fn pump(mut client: TcpStream, mut server: TcpStream, mut cmd: watch::Receiver<Cmd>, latency: &AtomicU64) {
    let (mut cbuf, mut sbuf) = (vec![0u8; 16 * 1024], vec![0u8; 16 * 1024]);
    let (mut client_done, mut server_done, mut stalled) = (false, false, false);
    while !(client_done && server_done) {
        tokio::select! {
            r = cmd.changed() => {
                if r.is_err() {
                    return;
                }
                let c = *cmd.borrow();
                match c {
                    Cmd::Run => stalled = false,
                    Cmd::Stall => stalled = true,
                    Cmd::Reset => {
                        reset(&client);
                        reset(&server);
                        return;
                    }
                    Cmd::Close => {
                        let _ = client.shutdown().await;
                        let _ = server.shutdown().await;
                        return;
                    }
                }
            }
            r = client.read(&mut cbuf), if !client_done => match r {
                Ok(0) | Err(_) => {
                    client_done = true;
                    let _ = server.shutdown().await;
                }
                Ok(n) => {
                    delay(latency).await;
                    if server.write_all(&cbuf[..n]).await.is_err() {
                        return;
                    }
                }
            },
            r = server.read(&mut sbuf), if !server_done && !stalled => match r {
                Ok(0) | Err(_) => {
                    server_done = true;
                    let _ = client.shutdown().await;
                }
                Ok(n) => {
                    delay(latency).await;
                    if client.write_all(&sbuf[..n]).await.is_err() {
                        return;
                    }
                }
            },
        }
    }
}

async fn delay(latency: &AtomicU64) {
    let ms = latency.load(Ordering::Relaxed);
    if ms > 0 {
        tokio::time::sleep(Duration::from_millis(ms)).await;
    }
}
