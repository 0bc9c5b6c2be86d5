//! Why a request to the kubelet API was turned away, and the HTTP status that says so.

use axum::http::StatusCode;

/// A request the [`Gate`](super::Gate) did not let through.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Refusal {
    /// No usable credentials, or a token the apiserver did not accept: 401.
    #[error("{0}")]
    Unauthenticated(String),
    /// An authenticated user that RBAC (via SubjectAccessReview) does not allow: 403.
    #[error("{0}")]
    Forbidden(String),
    /// The apiserver could not be asked; the client may retry: 503.
    #[error("{0}")]
    Unavailable(String),
}

impl Refusal {
    pub fn status(&self) -> StatusCode {
        match self {
            Refusal::Unauthenticated(_) => StatusCode::UNAUTHORIZED,
            Refusal::Forbidden(_) => StatusCode::FORBIDDEN,
            Refusal::Unavailable(_) => StatusCode::SERVICE_UNAVAILABLE,
        }
    }

    /// The text for the response body, in the kubelet's words.
    pub fn message(&self) -> &str {
        match self {
            Refusal::Unauthenticated(message)
            | Refusal::Forbidden(message)
            | Refusal::Unavailable(message) => message,
        }
    }
}
