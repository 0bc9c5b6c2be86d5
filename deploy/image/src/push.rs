//! Pushing an [`Image`] to a registry with oci-client, through the client orca itself pushes
//! plugins with (`orca plugin push`): the same CA file and Docker config.json credentials.

use std::path::PathBuf;

use oci_client::client::{Config, ImageLayer};
use oci_client::errors::OciDistributionError;
use oci_client::manifest::{
    IMAGE_CONFIG_MEDIA_TYPE, IMAGE_LAYER_GZIP_MEDIA_TYPE, OciImageManifest,
};
use oci_client::{ParseError, Reference};
use orca::policy::oci::{ClientError, PullError, PullLimits, Puller};

use crate::image::Image;

/// Why the image was not pushed.
#[derive(Debug, thiserror::Error)]
pub enum PushError {
    #[error("{text} is not an image reference (REGISTRY/REPOSITORY:TAG): {source}")]
    NotAReference {
        text: String,
        #[source]
        source: ParseError,
    },
    #[error(transparent)]
    Client(#[from] ClientError),
    #[error("the registry credentials: {0}")]
    Credentials(#[source] PullError),
    #[error("pushing to {reference}: {source}")]
    Refused {
        reference: String,
        #[source]
        source: OciDistributionError,
    },
}

/// Where to push, and how to reach it.
#[derive(Debug, Clone, Default)]
pub struct Registry {
    /// PEM certificates trusted besides the system's.
    pub ca_file: Option<PathBuf>,
    /// Docker's config.json with the registry's credentials.
    pub docker_config: Option<PathBuf>,
}

/// Pushes `image` to `reference` and returns the reference pinned to the manifest's digest
/// (`REGISTRY/REPOSITORY@sha256:…`).
///
/// # Errors
/// [`PushError`]: a malformed reference, unusable CA or credentials, the registry's refusal.
pub async fn push(
    image: &Image,
    reference: &str,
    registry: &Registry,
) -> Result<String, PushError> {
    let target: Reference = reference
        .parse()
        .map_err(|source| PushError::NotAReference {
            text: reference.to_owned(),
            source,
        })?;
    let puller = Puller::new(
        registry.ca_file.as_deref(),
        registry.docker_config.clone(),
        None,
        PullLimits::default(),
    )?;
    let auth = puller.auth(&target).map_err(PushError::Credentials)?;
    let layers: Vec<ImageLayer> = image
        .layers
        .iter()
        .map(|layer| {
            ImageLayer::new(
                layer.blob.clone(),
                IMAGE_LAYER_GZIP_MEDIA_TYPE.to_owned(),
                None,
            )
        })
        .collect();
    let config = Config::new(
        image.config.clone(),
        IMAGE_CONFIG_MEDIA_TYPE.to_owned(),
        None,
    );
    let manifest = OciImageManifest::build(&layers, &config, None);
    let refused = |source| PushError::Refused {
        reference: reference.to_owned(),
        source,
    };
    puller
        .client()
        .push(&target, &layers, config, &auth, Some(manifest))
        .await
        .map_err(refused)?;
    let digest = puller
        .client()
        .fetch_manifest_digest(&target, &auth)
        .await
        .map_err(refused)?;
    Ok(format!(
        "{}/{}@{digest}",
        target.registry(),
        target.repository()
    ))
}
