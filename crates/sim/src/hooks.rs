//! The simulation's hooks around the controller's API: a crash after a given number of writes
//! (crash-step tests), the count of writes (quiescence), and a call after each write, before its
//! answer reaches the controller (watch events delivered first, as a network may). An
//! [`Interceptor`] around `MemApi`, so the adapter `up` runs has none of them.

use pv_core::{ApiError, Call, Intercepted, Interceptor};
use pv_local::MemApi;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::OnceLock;

/// The controller's API in a simulation.
pub type SimApi = Intercepted<MemApi, Hooks>;

/// See the module note.
pub struct Hooks {
    /// Write requests made (Events excluded), successful or not.
    pub write_attempts: AtomicU64,
    /// After this many write attempts every call fails: the controller process "dies" there.
    crash_after: AtomicU64,
    /// Called after every write, before its answer reaches the controller.
    after_write: OnceLock<Box<dyn Fn() + Send + Sync>>,
}

impl Default for Hooks {
    fn default() -> Self {
        Hooks { write_attempts: AtomicU64::new(0), crash_after: AtomicU64::new(u64::MAX), after_write: OnceLock::new() }
    }
}

impl Hooks {
    /// Runs `f` after every write, before the write's answer is returned (once; later calls are
    /// ignored).
    pub fn set_after_write(&self, f: Box<dyn Fn() + Send + Sync>) {
        let _ = self.after_write.set(f);
    }

    /// Stops serving after `n` more write attempts.
    pub fn crash_after(&self, n: u64) {
        self.crash_after.store(self.write_attempts.load(Ordering::SeqCst) + n, Ordering::SeqCst);
    }

    /// True once the crash point is reached.
    pub fn crashed(&self) -> bool {
        self.write_attempts.load(Ordering::SeqCst) >= self.crash_after.load(Ordering::SeqCst)
    }
}

impl Interceptor for Hooks {
    fn before(&self, call: Call) -> Result<(), ApiError> {
        if self.crashed() {
            return Err(ApiError::other("controller stopped (crash-step test)"));
        }
        if call.writes_an_object() {
            self.write_attempts.fetch_add(1, Ordering::SeqCst);
        }
        Ok(())
    }

    fn after(&self, call: Call) {
        if call.writes_an_object() {
            if let Some(f) = self.after_write.get() {
                f();
            }
        }
    }
}
