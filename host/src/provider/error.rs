//! Provider errors carry a class that decides what the reconciler does next.

use std::fmt;

/// What kind of failure, and so what to do about it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ErrorClass {
    /// Retry with backoff; the pod stays Pending with the message.
    Transient,
    /// No capacity for this offering: try the next candidate or market, else fail the pod.
    Capacity,
    /// Retrying cannot help: the pod fails with the message.
    Permanent,
    /// A pod annotation the provider reads is invalid; nothing reached the backend. The pod
    /// fails `InvalidAnnotation`.
    InvalidAnnotation,
    /// The pod's instance was launched already and has ended (EC2's
    /// `IdempotentInstanceTerminated` for the pod's ClientToken): no other may be launched
    /// for it, and a listing tells how it ended.
    AlreadyEnded,
}

/// A provider failure with the backend's own code (e.g. `InsufficientInstanceCapacity`) and text.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub struct ProviderError {
    pub class: ErrorClass,
    pub code: String,
    pub message: String,
}

impl ProviderError {
    pub fn transient(code: impl Into<String>, message: impl Into<String>) -> ProviderError {
        Self::new(ErrorClass::Transient, code, message)
    }

    pub fn capacity(code: impl Into<String>, message: impl Into<String>) -> ProviderError {
        Self::new(ErrorClass::Capacity, code, message)
    }

    pub fn permanent(code: impl Into<String>, message: impl Into<String>) -> ProviderError {
        Self::new(ErrorClass::Permanent, code, message)
    }

    /// A pod annotation the provider reads is invalid.
    pub fn invalid_annotation(message: impl Into<String>) -> ProviderError {
        Self::new(ErrorClass::InvalidAnnotation, "InvalidAnnotation", message)
    }

    pub fn already_ended(code: impl Into<String>, message: impl Into<String>) -> ProviderError {
        Self::new(ErrorClass::AlreadyEnded, code, message)
    }

    fn new(
        class: ErrorClass,
        code: impl Into<String>,
        message: impl Into<String>,
    ) -> ProviderError {
        ProviderError {
            class,
            code: code.into(),
            message: message.into(),
        }
    }
}

impl fmt::Display for ProviderError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", self.code, self.message)
    }
}
