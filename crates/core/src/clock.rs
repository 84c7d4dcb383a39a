//! Time, only through a clock that can be simulated.
//!
//! [`SystemClock`] is wall time with tokio timers. [`SimClock`] is virtual: `now` moves only when
//! the simulation driver advances it or when an operation sleeps — a simulated sleep advances the
//! clock and returns at once, which is exact in a single-threaded deterministic run.

use jiff::{SignedDuration, Timestamp};
use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

/// A boxed future of `()`.
pub type Sleep = Pin<Box<dyn Future<Output = ()> + Send>>;

/// The controller's view of time.
pub trait Clock: Send + Sync {
    /// Current time.
    fn now(&self) -> Timestamp;
    /// Milliseconds since an arbitrary origin, for timers and backoff.
    fn now_ms(&self) -> u64;
    /// Waits `d`.
    fn sleep(&self, d: Duration) -> Sleep;
}

/// Wall-clock time.
#[derive(Debug)]
pub struct SystemClock {
    origin: std::time::Instant,
}

impl SystemClock {
    /// A wall clock.
    pub fn new() -> Arc<Self> {
        Arc::new(SystemClock { origin: std::time::Instant::now() })
    }
}

impl Clock for SystemClock {
    fn now(&self) -> Timestamp {
        Timestamp::now()
    }
    fn now_ms(&self) -> u64 {
        self.origin.elapsed().as_millis() as u64
    }
    fn sleep(&self, d: Duration) -> Sleep {
        Box::pin(tokio::time::sleep(d))
    }
}

/// Virtual time for simulations and tests.
#[derive(Debug)]
pub struct SimClock {
    base: Timestamp,
    offset_ms: AtomicU64,
}

impl SimClock {
    /// A virtual clock starting at `base`.
    pub fn new(base: Timestamp) -> Arc<Self> {
        Arc::new(SimClock { base, offset_ms: AtomicU64::new(0) })
    }

    /// Moves time forward.
    pub fn advance(&self, d: Duration) {
        self.offset_ms.fetch_add(d.as_millis() as u64, Ordering::SeqCst);
    }

    /// Moves time forward to `ms` (never back).
    pub fn advance_to(&self, ms: u64) {
        self.offset_ms.fetch_max(ms, Ordering::SeqCst);
    }
}

impl Clock for SimClock {
    fn now(&self) -> Timestamp {
        self.base
            .saturating_add(SignedDuration::from_millis(self.offset_ms.load(Ordering::SeqCst) as i64))
            .unwrap_or(self.base)
    }
    fn now_ms(&self) -> u64 {
        self.offset_ms.load(Ordering::SeqCst)
    }
    fn sleep(&self, d: Duration) -> Sleep {
        self.advance(d);
        Box::pin(std::future::ready(()))
    }
}
