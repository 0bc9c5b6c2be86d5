//! Plugins delivered as OCI artifacts (`oci://` in `policy.plugins`), as Istio's `WasmPlugin`
//! and Kubewarden's policies are: pulled with a well-kept OCI client, every byte checked
//! against the digest that names it, tags resolved again on an interval, and a failure
//! leaving the version already serving in place.

mod artifact;
mod credentials;
mod puller;
mod reference;
mod refresh;
mod sign;
mod signature;
mod store;
mod verifier;

pub use artifact::{CONFIG_MEDIA_TYPE, LAYER_MEDIA_TYPE, push};
pub use credentials::DockerConfig;
pub use puller::{PullError, Pulled, Puller};
pub use reference::{PluginReference, ReferenceError};
pub use refresh::spawn_refresh;
pub use sign::{PASSWORD_VARIABLE, SigningKey};
pub use signature::{SignatureError, SignatureManifest, Signer, TrustPolicy, judge};
pub use verifier::{SignatureVerifier, cosign_client};
