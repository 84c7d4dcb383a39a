//! Controller errors, named after the step that failed.

use crate::api::ApiError;

/// Why a sync or operation did not finish. The next sync resumes from the state left behind.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// An API call failed.
    #[error("{step}: {source}")]
    Api {
        /// What the controller was doing (`saving volume claimRef`).
        step: &'static str,
        /// The API error.
        #[source]
        source: ApiError,
    },
    /// A volume plugin failed (or provisioning could not start: the message of its event).
    #[error(transparent)]
    Plugin(#[from] crate::plugin::PluginError),
    /// The objects are in a state the controller refuses to act on.
    #[error("{0}")]
    Invalid(String),
    /// Another claim's sync is binding the volume this one chose (a race between workers, not a
    /// fault): the claim is synced again with backoff and picks another volume.
    #[error("volume {0:?} is being bound to another claim")]
    Reserved(String),
    /// Another sync wrote the object after this one read it; nothing was sent, and the key is
    /// synced again at once from the newer object.
    #[error("{0}: the object changed meanwhile")]
    Stale(&'static str),
}

impl Error {
    /// Wraps an API error with the step it failed in.
    pub fn api(step: &'static str) -> impl FnOnce(ApiError) -> Error {
        move |source| Error::Api { step, source }
    }

    /// The API server's own message for an API error (as upstream prints a client-go error),
    /// else the error's text.
    pub fn api_message(&self) -> String {
        match self {
            Error::Api { source, .. } => source.message().to_string(),
            e => e.to_string(),
        }
    }

    /// True when the underlying API error is a 404.
    pub fn is_not_found(&self) -> bool {
        matches!(self, Error::Api { source, .. } if source.is_not_found())
    }

    /// True when the underlying API error is a 409 conflict (common and harmless).
    pub fn is_conflict(&self) -> bool {
        matches!(self, Error::Api { source, .. } if source.is_conflict())
    }

    /// True for the races between writers that retrying settles: a 409 conflict, or a volume
    /// another worker is binding. Logged at debug, not as warnings.
    pub fn is_race(&self) -> bool {
        self.is_conflict() || matches!(self, Error::Reserved(_))
    }
}

/// Result with an [`Error`].
pub type Result<T, E = Error> = std::result::Result<T, E>;
