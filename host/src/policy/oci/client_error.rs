//! Why a client for the plugin registries could not be set up: the puller's, or the sigstore
//! client that verifies signatures.

use std::path::PathBuf;

/// Why a registry client could not be set up.
#[derive(Debug, thiserror::Error)]
pub enum ClientError {
    #[error("reading the registry CA {}: {source}", .path.display())]
    CaUnreadable {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("reading the registry CA: {source}")]
    CaRefused {
        #[source]
        source: reqwest::Error,
    },
    #[error("starting the registry client: {source}")]
    StartFailed {
        #[source]
        source: reqwest::Error,
    },
    #[error("setting up signature verification: {source}")]
    VerificationSetupFailed {
        #[source]
        source: sigstore::errors::SigstoreError,
    },
}
