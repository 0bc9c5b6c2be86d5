//! Resolving and pulling plugin artifacts, every byte checked against its digest.

use std::path::{Path, PathBuf};

use crate::policy::wasm::sha256_hex;
use oci_client::client::{Certificate, CertificateEncoding, ClientConfig};
use oci_client::manifest::{
    OCI_IMAGE_MEDIA_TYPE, OciDescriptor, OciImageManifest, WASM_LAYER_MEDIA_TYPE,
};
use oci_client::secrets::RegistryAuth;
use oci_client::{Client, Reference};

use super::artifact::LAYER_MEDIA_TYPE;
use super::credentials::DockerConfig;
use super::reference::PluginReference;
use super::signature::{SignatureError, Signer};
use super::store::{ArtifactStore, Remembered};
use super::verifier::SignatureVerifier;

/// The largest component pulled: an interpreter's plugin is 12-20 MB.
const MAX_COMPONENT_BYTES: i64 = 256 << 20;

/// Why a plugin could not be resolved or pulled; the version serving keeps serving.
#[derive(Debug, thiserror::Error)]
pub enum PullError {
    #[error("{0}")]
    Credentials(String),
    #[error("the registry refused or failed: {0}")]
    Registry(String),
    #[error(
        "the {what} served does not match its digest: expected {expected}, got {got} (tampered with, or corrupted in transit)"
    )]
    DigestMismatch {
        what: &'static str,
        expected: String,
        got: String,
    },
    #[error("not a plugin artifact: {0}")]
    NotAPlugin(String),
    #[error(transparent)]
    Signature(#[from] SignatureError),
}

/// A verified plugin component.
#[derive(Debug, Clone)]
pub struct Pulled {
    pub manifest_digest: String,
    pub layer_digest: String,
    pub bytes: Vec<u8>,
    /// Who signed it, when `policy.registry.verify` covers its reference.
    pub signer: Option<Signer>,
}

pub struct Puller {
    client: Client,
    docker_config: Option<PathBuf>,
    /// Verified components kept on disk, when a directory is usable.
    store: Option<ArtifactStore>,
    /// The signatures a version needs before it is downloaded (`policy.registry.verify`).
    verifier: Option<SignatureVerifier>,
}

impl Puller {
    /// A puller that keeps what it pulls in `store_dir` (when given and usable).
    ///
    /// # Errors
    /// The CA file cannot be read.
    pub fn new(
        ca_file: Option<&Path>,
        docker_config: Option<PathBuf>,
        store_dir: Option<&Path>,
    ) -> Result<Puller, String> {
        let mut config = ClientConfig::default();
        if let Some(path) = ca_file {
            let data = std::fs::read(path)
                .map_err(|error| format!("reading the registry CA {}: {error}", path.display()))?;
            config.extra_root_certificates.push(Certificate {
                encoding: CertificateEncoding::Pem,
                data,
            });
        }
        Ok(Puller {
            client: Client::new(config),
            docker_config,
            store: store_dir.and_then(ArtifactStore::open),
            verifier: None,
        })
    }

    /// Checks every version's signatures with `verifier` before it is downloaded.
    #[must_use]
    pub fn with_verifier(mut self, verifier: SignatureVerifier) -> Puller {
        self.verifier = Some(verifier);
        self
    }

    /// What `plugin` last resolved to, with its verified component, from the disk; not when
    /// its signer no longer satisfies `policy.registry.verify` (or it has none and needs one).
    pub fn remembered(&self, plugin: &PluginReference) -> Option<Remembered> {
        let remembered = self.store.as_ref()?.remembered(&plugin.text)?;
        if let Some(verifier) = &self.verifier
            && !verifier
                .policy()
                .still_allows(plugin, remembered.signer.as_ref())
        {
            tracing::warn!(reference = %plugin.text, manifest = %remembered.manifest_digest, "the version kept on disk is not signed as policy.registry.verify requires; not loaded");
            return None;
        }
        Some(remembered)
    }

    pub fn client(&self) -> &Client {
        &self.client
    }

    /// The credentials for `reference`'s registry, read now (a rotated Secret applies).
    ///
    /// # Errors
    /// [`PullError::Credentials`] when the configured file cannot be used.
    pub fn auth(&self, reference: &Reference) -> Result<RegistryAuth, PullError> {
        match &self.docker_config {
            None => Ok(RegistryAuth::Anonymous),
            Some(path) => DockerConfig::read(path)
                .and_then(|config| config.auth_for(reference.resolve_registry()))
                .map_err(PullError::Credentials),
        }
    }

    /// The digest the reference names now: its own when pinned, else the tag's.
    ///
    /// # Errors
    /// [`PullError`] when the registry cannot say.
    pub async fn resolve(&self, plugin: &PluginReference) -> Result<String, PullError> {
        if let Some(digest) = plugin.reference.digest() {
            return Ok(digest.to_owned());
        }
        let auth = self.auth(&plugin.reference)?;
        self.client
            .fetch_manifest_digest(&plugin.reference, &auth)
            .await
            .map_err(|error| PullError::Registry(error.to_string()))
    }

    /// The component of the manifest `manifest_digest` in `plugin`'s repository: the
    /// manifest's bytes are checked against that digest and the component's against the
    /// digest the manifest names, so what loads is exactly what was pushed.
    ///
    /// # Errors
    /// [`PullError`] saying which step failed.
    pub async fn pull(
        &self,
        plugin: &PluginReference,
        manifest_digest: &str,
    ) -> Result<Pulled, PullError> {
        let reference = Reference::with_digest(
            plugin.reference.registry().to_owned(),
            plugin.reference.repository().to_owned(),
            manifest_digest.to_owned(),
        );
        let auth = self.auth(&reference)?;
        let (raw, _) = self
            .client
            .pull_manifest_raw(&reference, &auth, &[OCI_IMAGE_MEDIA_TYPE])
            .await
            .map_err(|error| PullError::Registry(error.to_string()))?;
        check_digest("manifest", manifest_digest, &raw)?;
        let manifest: OciImageManifest = serde_json::from_slice(&raw).map_err(|error| {
            PullError::NotAPlugin(format!("its manifest does not parse: {error}"))
        })?;
        let layer = plugin_layer(&manifest)?;
        // Who signed it, before a byte of the component is downloaded or kept.
        let signer = match &self.verifier {
            Some(verifier) => verifier.verify(plugin, manifest_digest, &auth).await?,
            None => None,
        };
        if layer.size > MAX_COMPONENT_BYTES {
            return Err(PullError::NotAPlugin(format!(
                "its component is {} bytes, more than the {MAX_COMPONENT_BYTES} a plugin may be",
                layer.size
            )));
        }
        let kept = self
            .store
            .as_ref()
            .and_then(|store| store.component(&layer.digest));
        let bytes = match kept {
            Some(bytes) => bytes,
            None => self.download(&reference, layer).await?,
        };
        if let Some(store) = &self.store {
            store.keep(
                &plugin.text,
                manifest_digest,
                &layer.digest,
                &bytes,
                signer.as_ref(),
            );
        }
        Ok(Pulled {
            manifest_digest: manifest_digest.to_owned(),
            layer_digest: layer.digest.clone(),
            bytes,
            signer,
        })
    }

    /// The layer's bytes from the registry, checked against its digest.
    async fn download(
        &self,
        reference: &Reference,
        layer: &OciDescriptor,
    ) -> Result<Vec<u8>, PullError> {
        let mut bytes = Vec::new();
        self.client
            .pull_blob(reference, layer, &mut bytes)
            .await
            .map_err(|error| match error {
                oci_client::errors::OciDistributionError::DigestError(_) => {
                    PullError::DigestMismatch {
                        what: "component",
                        expected: layer.digest.clone(),
                        got: error.to_string(),
                    }
                }
                other => PullError::Registry(other.to_string()),
            })?;
        // The client checks the stream against the digest; checked again here, on the bytes
        // that will load, whatever the client version does.
        check_digest("component", &layer.digest, &bytes)?;
        Ok(bytes)
    }
}

/// The manifest's one WebAssembly layer.
fn plugin_layer(manifest: &OciImageManifest) -> Result<&OciDescriptor, PullError> {
    let wasm: Vec<&OciDescriptor> = manifest
        .layers
        .iter()
        .filter(|l| l.media_type == LAYER_MEDIA_TYPE || l.media_type == WASM_LAYER_MEDIA_TYPE)
        .collect();
    match wasm.as_slice() {
        [layer] => Ok(layer),
        [] => Err(PullError::NotAPlugin(format!(
            "no layer of media type {LAYER_MEDIA_TYPE} (push it with `orca plugin push`)"
        ))),
        _ => Err(PullError::NotAPlugin(format!(
            "{} WebAssembly layers; a plugin artifact has one",
            wasm.len()
        ))),
    }
}

/// The OCI digest of `bytes` (`sha256:<hex>`), as manifests and references name content.
pub(super) fn digest_of(bytes: &[u8]) -> String {
    format!("sha256:{}", sha256_hex(bytes))
}

fn check_digest(what: &'static str, expected: &str, bytes: &[u8]) -> Result<(), PullError> {
    let got = digest_of(bytes);
    if got == expected {
        return Ok(());
    }
    Err(PullError::DigestMismatch {
        what,
        expected: expected.to_owned(),
        got,
    })
}
