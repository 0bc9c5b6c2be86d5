//! The artifact a plugin is published as: the CNCF layout for WebAssembly components (one
//! `application/wasm` layer, a `application/vnd.wasm.config.v0+json` config), which `wkg`
//! and other Wasm tooling read and write too.

use oci_client::client::{Config, ImageLayer};
use oci_client::errors::OciDistributionError;
use oci_client::manifest::OciImageManifest;
use oci_client::secrets::RegistryAuth;
use oci_client::{Client, Reference};

use super::digest::ContentDigest;

pub const LAYER_MEDIA_TYPE: &str = "application/wasm";
pub const CONFIG_MEDIA_TYPE: &str = "application/vnd.wasm.config.v0+json";

/// Why a plugin could not be pushed.
#[derive(Debug, thiserror::Error)]
pub enum PushError {
    #[error("{0}")]
    ConfigFailed(#[source] serde_json::Error),
    #[error("{0}")]
    Refused(#[source] OciDistributionError),
    #[error("reading back the pushed manifest's digest: {0}")]
    DigestUnread(#[source] OciDistributionError),
}

/// Pushes `component` to `reference` and returns the manifest's digest.
///
/// # Errors
/// [`PushError`]: the registry's refusal.
pub async fn push(
    client: &Client,
    reference: &Reference,
    auth: &RegistryAuth,
    component: Vec<u8>,
) -> Result<String, PushError> {
    let layer_digest = ContentDigest::of(&component).to_string();
    let config = serde_json::json!({
        "architecture": "wasm",
        "os": "wasip2",
        "layerDigests": [layer_digest],
    });
    let config = Config::new(
        serde_json::to_vec(&config).map_err(PushError::ConfigFailed)?,
        CONFIG_MEDIA_TYPE.to_owned(),
        None,
    );
    let layers = [ImageLayer::new(
        component,
        LAYER_MEDIA_TYPE.to_owned(),
        None,
    )];
    let manifest = OciImageManifest::build(&layers, &config, None);
    client
        .push(reference, &layers, config, auth, Some(manifest))
        .await
        .map_err(PushError::Refused)?;
    client
        .fetch_manifest_digest(reference, auth)
        .await
        .map_err(PushError::DigestUnread)
}
