//! Upstream's `VolumeReactor` error injection: each listed error is answered once, to the first
//! request whose verb and resource match (`*` matches any), in the list's order.

use crate::case::ReactorError;
use pv_core::{ApiError, Call, Intercepted, Interceptor};
use pv_local::MemApi;
use std::sync::Mutex;

/// The controller's API with a case's errors answered before requests reach the store.
pub type Injecting = Intercepted<MemApi, Errors>;

/// The case's errors still to answer.
pub struct Errors(Mutex<Vec<ReactorError>>);

/// `api`, with `errors` to answer.
pub fn injecting(api: MemApi, errors: Vec<ReactorError>) -> Injecting {
    Intercepted { inner: api, interceptor: Errors(Mutex::new(errors)) }
}

impl Interceptor for Errors {
    /// Upstream's reactor injects into volume and claim requests only.
    fn before(&self, call: Call) -> Result<(), ApiError> {
        if !matches!(call.resource, "persistentvolumes" | "persistentvolumeclaims") {
            return Ok(());
        }
        let mut errors = self.0.lock().unwrap();
        let hit = errors
            .iter()
            .position(|e| (e.verb == call.verb || e.verb == "*") && (e.resource == call.resource || e.resource == "*"));
        match hit {
            Some(i) => {
                let e = errors.remove(i);
                Err(match e.reason.as_str() {
                    "AlreadyExists" => ApiError::AlreadyExists(e.message),
                    "NotFound" => ApiError::NotFound(e.message),
                    "Conflict" => ApiError::Conflict(e.message),
                    "Invalid" => ApiError::Invalid(e.message),
                    _ => ApiError::other(e.message),
                })
            }
            None => Ok(()),
        }
    }
}
