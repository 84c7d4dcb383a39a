//! The finisher's queue: each namespace once however many writes name it, and the sweeps to
//! retry after a backoff. The store pushes to it; the finisher's thread takes from it.

use std::collections::{HashSet, VecDeque};
use std::sync::{Condvar, Mutex};
use std::time::{Duration, Instant};

#[derive(Default)]
pub(crate) struct Queue {
    state: Mutex<State>,
    cv: Condvar,
}

#[derive(Default)]
struct State {
    order: VecDeque<String>,
    queued: HashSet<String>,
    /// Failed sweeps, due again at their instant.
    later: Vec<(Instant, String)>,
    /// No finisher runs: `next` answers `None`.
    closed: bool,
}

impl Queue {
    /// Queues `ns` unless it is queued already.
    pub(crate) fn push(&self, ns: &str) {
        let mut s = self.state.lock().unwrap();
        if s.queued.insert(ns.to_string()) {
            s.order.push_back(ns.to_string());
            self.cv.notify_one();
        }
    }

    pub(super) fn retry(&self, ns: String, after: Duration) {
        self.state.lock().unwrap().later.push((Instant::now() + after, ns));
        self.cv.notify_one();
    }

    pub(super) fn set_closed(&self, closed: bool) {
        self.state.lock().unwrap().closed = closed;
        self.cv.notify_all();
    }

    /// The next namespace to sweep; blocks until there is one. `None` once closed.
    pub(super) fn next(&self) -> Option<String> {
        let mut s = self.state.lock().unwrap();
        loop {
            if s.closed {
                return None;
            }
            let now = Instant::now();
            let (due, waiting): (Vec<_>, Vec<_>) =
                std::mem::take(&mut s.later).into_iter().partition(|(t, _)| *t <= now);
            s.later = waiting;
            for (_, ns) in due {
                if s.queued.insert(ns.clone()) {
                    s.order.push_back(ns);
                }
            }
            if let Some(ns) = s.order.pop_front() {
                s.queued.remove(&ns);
                return Some(ns);
            }
            s = match s.later.iter().map(|(t, _)| *t).min() {
                Some(t) => self.cv.wait_timeout(s, t.saturating_duration_since(now)).unwrap().0,
                None => self.cv.wait(s).unwrap(),
            };
        }
    }

    /// Namespaces queued now (for tests).
    #[cfg(test)]
    pub(crate) fn queued(&self) -> Vec<String> {
        self.state.lock().unwrap().order.iter().cloned().collect()
    }
}
