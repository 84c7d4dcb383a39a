//! Fault injection: a fraction of write requests fail the way a real API server fails.
//!
//! One model serves tests and `simulate --inject-faults`. `lost-response` is the fault that breaks
//! naive controllers: the write *is* applied, but the client is told it failed.

use crate::error::StoreError;
use rand::rngs::SmallRng;
use rand::{RngExt, SeedableRng};

/// One kind of injected fault.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum FaultKind {
    /// 409 Conflict, nothing written.
    Conflict,
    /// 500, nothing written.
    Error,
    /// No answer, nothing written.
    Timeout,
    /// Written, but the client gets an error.
    LostResponse,
}

/// Probabilities of each fault per write request.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct FaultSpec {
    /// P(409).
    pub conflict: f64,
    /// P(500).
    pub error: f64,
    /// P(timeout).
    pub timeout: f64,
    /// P(lost response).
    pub lost_response: f64,
    /// P(an informer's watch stream drops before an event), for clients that watch (simulate).
    pub watch_drop: f64,
    /// P(a re-watch is answered 410 Gone, forcing a relist).
    pub watch_gone: f64,
    /// P(an informer delivers a batch of events one step late: its cache lags the server).
    pub stale: f64,
}

impl FaultSpec {
    /// Parses `conflict=0.2,error=0.1,timeout=0.05,lost-response=0.05`.
    pub fn parse(s: &str) -> Result<Self, String> {
        let mut spec = FaultSpec::default();
        for part in s.split(',').map(str::trim).filter(|p| !p.is_empty()) {
            let (k, v) = part.split_once('=').ok_or_else(|| format!("fault {part:?} is not NAME=PROBABILITY"))?;
            let p: f64 = v.trim().parse().map_err(|_| format!("fault {k:?}: {v:?} is not a number"))?;
            if !(0.0..=1.0).contains(&p) {
                return Err(format!("fault {k:?}: probability {p} is not between 0 and 1"));
            }
            match k.trim() {
                "conflict" => spec.conflict = p,
                "error" => spec.error = p,
                "timeout" => spec.timeout = p,
                "lost-response" => spec.lost_response = p,
                "watch-drop" => spec.watch_drop = p,
                "watch-gone" => spec.watch_gone = p,
                "stale" => spec.stale = p,
                other => {
                    return Err(format!(
                        "unknown fault {other:?}: known faults are conflict, error, timeout, lost-response, watch-drop, watch-gone, stale"
                    ))
                }
            }
        }
        if spec.total() > 1.0 {
            return Err(format!("fault probabilities add up to {} (more than 1)", spec.total()));
        }
        Ok(spec)
    }

    /// True when any watch-side fault is set.
    pub fn has_watch_faults(&self) -> bool {
        self.watch_drop + self.watch_gone + self.stale > 0.0
    }

    fn total(&self) -> f64 {
        self.conflict + self.error + self.timeout + self.lost_response
    }
}

/// A seeded source of faults.
#[derive(Debug)]
pub struct FaultInjector {
    spec: FaultSpec,
    rng: SmallRng,
    /// Faults injected so far, by kind.
    pub injected: [u64; 4],
}

impl FaultInjector {
    /// A new injector.
    pub fn new(spec: FaultSpec, seed: u64) -> Self {
        FaultInjector { spec, rng: SmallRng::seed_from_u64(seed), injected: [0; 4] }
    }

    /// Draws the fate of one write request.
    pub fn draw(&mut self) -> Option<FaultKind> {
        if self.spec.total() == 0.0 {
            return None;
        }
        let x: f64 = self.rng.random();
        let s = &self.spec;
        let kind = if x < s.conflict {
            FaultKind::Conflict
        } else if x < s.conflict + s.error {
            FaultKind::Error
        } else if x < s.conflict + s.error + s.timeout {
            FaultKind::Timeout
        } else if x < s.total() {
            FaultKind::LostResponse
        } else {
            return None;
        };
        self.injected[kind as usize] += 1;
        Some(kind)
    }
}

impl FaultKind {
    /// The error a client sees for this fault.
    pub fn error(self, resource: &str, name: &str) -> StoreError {
        match self {
            FaultKind::Conflict => StoreError::Conflict {
                resource: resource.to_string(),
                name: name.to_string(),
                message: "the object has been modified; please apply your changes to the latest version and try again (injected)".into(),
            },
            FaultKind::Error => StoreError::Internal("injected fault".into()),
            FaultKind::Timeout | FaultKind::LostResponse => StoreError::Timeout,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn spec_parses_every_kind_and_rejects_unknown_ones() {
        let s = FaultSpec::parse("conflict=0.2,error=0.1,timeout=0.05,lost-response=0.05").unwrap();
        assert_eq!(s.conflict, 0.2);
        assert_eq!(s.lost_response, 0.05);
        assert!(FaultSpec::parse("explode=0.1").unwrap_err().contains("unknown fault"));
        assert!(FaultSpec::parse("conflict=2").is_err());
        assert!(FaultSpec::parse("conflict=0.7,error=0.7").is_err());
    }

    #[test]
    fn same_seed_draws_the_same_faults() {
        let spec = FaultSpec::parse("conflict=0.3,lost-response=0.3").unwrap();
        let mut a = FaultInjector::new(spec.clone(), 7);
        let mut b = FaultInjector::new(spec, 7);
        let da: Vec<_> = (0..100).map(|_| a.draw()).collect();
        let db: Vec<_> = (0..100).map(|_| b.draw()).collect();
        assert_eq!(da, db);
        assert!(da.iter().any(Option::is_some));
    }
}

#[cfg(test)]
mod distribution_tests {
    use super::*;

    #[test]
    fn draws_follow_the_given_probabilities() {
        let spec = FaultSpec::parse("conflict=0.2,error=0.1,timeout=0.05,lost-response=0.05").unwrap();
        let mut f = FaultInjector::new(spec, 42);
        let n = 100_000;
        for _ in 0..n {
            f.draw();
        }
        let expect = [0.2, 0.1, 0.05, 0.05];
        for (i, p) in expect.iter().enumerate() {
            let got = f.injected[i] as f64 / n as f64;
            assert!((got - p).abs() < 0.01, "kind {i}: {got} vs {p}");
        }
    }
}
