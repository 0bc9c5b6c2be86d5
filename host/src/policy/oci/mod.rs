//! Plugins delivered as OCI artifacts (`oci://` in `policy.plugins`), as Istio's `WasmPlugin`
//! and Kubewarden's policies are: every byte checked against the digest that names it, every
//! digest checked for form before use, every answer bounded in bytes and time, tags resolved
//! again on an interval, and a failure leaving the version already serving in place.

mod artifact;
mod client_error;
mod credentials;
mod digest;
mod http;
mod manifest;
mod pull_error;
mod puller;
mod reference;
mod refresh;
mod sign;
mod signature;
mod store;
mod verifier;

pub use artifact::{CONFIG_MEDIA_TYPE, LAYER_MEDIA_TYPE, PushError, push};
pub use client_error::ClientError;
pub use credentials::{CredentialsError, DockerConfig};
pub use digest::{ContentDigest, DigestError};
pub use pull_error::PullError;
pub use puller::{PullLimits, Pulled, Puller};
pub use reference::{PluginReference, ReferenceError};
pub use refresh::{RefreshSettings, spawn_refresh};
pub use sign::{PASSWORD_VARIABLE, SignError, SigningKey};
pub use signature::{SignatureError, SignatureManifest, Signer, TrustPolicy, judge};
pub use verifier::{SignatureVerifier, cosign_client};
