//! Why a plugin could not be resolved or pulled, and the words its messages use: what was
//! being fetched, and where a refused digest came from.

use std::time::Duration;

use super::credentials::CredentialsError;
use super::digest::{ContentDigest, DigestError};
use super::signature::SignatureError;

/// What a request fetches, for limits and messages.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Fetched {
    /// A tag's digest (`HEAD` of the manifest).
    Tag,
    Manifest,
    Component,
}

impl std::fmt::Display for Fetched {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Fetched::Tag => "the tag's digest",
            Fetched::Manifest => "the manifest",
            Fetched::Component => "the component",
        })
    }
}

/// Where a digest that was refused came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DigestSource {
    /// The registry's `Docker-Content-Digest` answer for a tag.
    TagHeader,
    /// The manifest's layer.
    Layer,
    /// The manifest's config.
    Config,
}

impl std::fmt::Display for DigestSource {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            DigestSource::TagHeader => "digest the registry gives for the tag",
            DigestSource::Layer => "manifest's layer digest",
            DigestSource::Config => "manifest's config digest",
        })
    }
}

/// Why a plugin could not be resolved or pulled; the version serving keeps serving.
#[derive(Debug, thiserror::Error)]
pub enum PullError {
    #[error(transparent)]
    Credentials(#[from] CredentialsError),
    #[error("the registry refused or failed ({what}): {message}")]
    Registry { what: Fetched, message: String },
    #[error(
        "the registry sent nothing for {} while sending {what} (policy.registry.stallTimeout)",
        humantime::format_duration(*.after)
    )]
    Stalled { what: Fetched, after: Duration },
    #[error("{}", oversized(*.what, *.limit))]
    Oversized { what: Fetched, limit: u64 },
    #[error(
        "its manifest declares a component of {size} bytes, more than policy.registry.maxComponentSize ({limit} bytes)"
    )]
    DeclaredTooLarge { size: u64, limit: u64 },
    #[error("the registry sent {got} of the {declared} bytes its manifest declares")]
    Truncated { got: u64, declared: u64 },
    #[error("the {which} is refused: {error}")]
    BadDigest {
        which: DigestSource,
        error: DigestError,
    },
    #[error(
        "{what} served does not match its digest: expected {expected}, got {got} (tampered with, or corrupted in transit)"
    )]
    DigestMismatch {
        what: Fetched,
        expected: ContentDigest,
        got: ContentDigest,
    },
    #[error("not a plugin artifact: {0}")]
    NotAPlugin(String),
    #[error(transparent)]
    Signature(#[from] SignatureError),
}

fn oversized(what: Fetched, limit: u64) -> String {
    match what {
        Fetched::Component => {
            format!(
                "the registry sent more than the {limit} bytes its manifest declares for {what}"
            )
        }
        Fetched::Tag | Fetched::Manifest => {
            format!("the registry sent more than {limit} bytes for {what}")
        }
    }
}
