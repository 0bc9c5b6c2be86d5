//! Resolving and pulling plugin artifacts: every byte checked against its digest, every digest
//! checked for form before it is used, and every answer bounded in bytes and time.
//!
//! A pull ends in [`Pulled`]: bytes verified against the digests that name them, not loaded
//! yet. Whatever else must hold before a plugin loads (a signature) is checked between
//! [`Puller::pull`] and the load.

use std::path::{Path, PathBuf};
use std::time::Duration;

use base64::Engine as _;
use oci_client::client::{Certificate, CertificateEncoding, ClientConfig};
use oci_client::manifest::OCI_IMAGE_MEDIA_TYPE;
use oci_client::secrets::RegistryAuth;
use oci_client::{Client, Reference, RegistryOperation};
use reqwest::header::HeaderValue;

use super::client_error::ClientError;
use super::credentials::{CredentialsError, DockerConfig};
use super::digest::ContentDigest;
use super::http::RegistryHttp;
use super::manifest::PluginManifest;
use super::pull_error::{DigestSource, Fetched, PullError};
use super::reference::PluginReference;
use super::signature::Signer;
use super::store::{ArtifactStore, Remembered};
use super::verifier::SignatureVerifier;

/// The largest manifest read: the OCI distribution spec has registries accept manifests up to
/// 4 MiB, and a plugin's is under 1 KiB.
pub const MAX_MANIFEST_BYTES: u64 = 4 << 20;

/// How much a pull may take: `policy.registry`'s `maxComponentSize` and `stallTimeout`.
#[derive(Debug, Clone, Copy)]
pub struct PullLimits {
    pub max_component_bytes: u64,
    pub stall_timeout: Duration,
}

impl PullLimits {
    /// The bounds `policy.registry` sets.
    pub fn of(registry: &crate::config::RegistryConfig) -> PullLimits {
        PullLimits {
            max_component_bytes: registry.max_component_bytes(),
            stall_timeout: registry.stall_timeout.get(),
        }
    }
}

impl Default for PullLimits {
    /// `policy.registry`'s defaults.
    fn default() -> Self {
        PullLimits {
            max_component_bytes: 256 << 20,
            stall_timeout: Duration::from_secs(30),
        }
    }
}

/// A verified plugin component.
#[derive(Debug, Clone)]
pub struct Pulled {
    pub manifest_digest: ContentDigest,
    pub layer_digest: ContentDigest,
    pub bytes: Vec<u8>,
    /// Who signed it, when `policy.registry.verify` covers its reference.
    pub signer: Option<Signer>,
}

pub struct Puller {
    /// For credentials (the registry's token exchange) and `orca plugin push`.
    client: Client,
    /// Every pull's requests, bounded.
    http: RegistryHttp,
    limits: PullLimits,
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
    /// [`ClientError`]: the CA file cannot be read or holds no certificate.
    pub fn new(
        ca_file: Option<&Path>,
        docker_config: Option<PathBuf>,
        store_dir: Option<&Path>,
        limits: PullLimits,
    ) -> Result<Puller, ClientError> {
        let mut config = ClientConfig {
            connect_timeout: Some(limits.stall_timeout),
            read_timeout: Some(limits.stall_timeout),
            ..ClientConfig::default()
        };
        let ca = match ca_file {
            Some(path) => {
                Some(
                    std::fs::read(path).map_err(|source| ClientError::CaUnreadable {
                        path: path.to_path_buf(),
                        source,
                    })?,
                )
            }
            None => None,
        };
        if let Some(data) = &ca {
            config.extra_root_certificates.push(Certificate {
                encoding: CertificateEncoding::Pem,
                data: data.clone(),
            });
        }
        Ok(Puller {
            client: Client::new(config),
            http: RegistryHttp::new(ca.as_deref(), limits.stall_timeout)?,
            limits,
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

    /// The `Authorization` a pull from `reference`'s repository carries: a bearer token when
    /// the registry asks for one (oci-client exchanges the credentials for it), else the
    /// credentials themselves. `what`: the request they are for, for messages.
    async fn authorization(
        &self,
        reference: &Reference,
        what: Fetched,
    ) -> Result<Option<HeaderValue>, PullError> {
        let auth = self.auth(reference)?;
        let token = self
            .client
            .auth(reference, &auth, RegistryOperation::Pull)
            .await
            .map_err(|error| PullError::Registry {
                what,
                message: format!("authenticating: {error}"),
            })?;
        let value = match (token, auth) {
            (Some(token), _) => format!("Bearer {token}"),
            (None, RegistryAuth::Basic(user, password)) => format!(
                "Basic {}",
                base64::engine::general_purpose::STANDARD.encode(format!("{user}:{password}"))
            ),
            (None, _) => return Ok(None),
        };
        HeaderValue::from_str(&value)
            .map(Some)
            .map_err(|_| PullError::Credentials(CredentialsError::NotPrintable))
    }

    fn url(reference: &Reference, kind: &str, name: &str) -> String {
        format!(
            "https://{}/v2/{}/{kind}/{name}",
            reference.resolve_registry(),
            reference.repository()
        )
    }

    /// The digest the reference names now: its own when pinned, else the tag's.
    ///
    /// # Errors
    /// [`PullError`] when the registry cannot say, or says something that is not a digest.
    pub async fn resolve(&self, plugin: &PluginReference) -> Result<ContentDigest, PullError> {
        if let Some(pinned) = &plugin.pinned {
            return Ok(pinned.clone());
        }
        let reference = &plugin.reference;
        let tag = reference.tag().unwrap_or("latest");
        let url = Self::url(reference, "manifests", tag);
        let authorization = self.authorization(reference, Fetched::Tag).await?;
        let headers = self
            .http
            .head(
                &url,
                OCI_IMAGE_MEDIA_TYPE,
                authorization.as_ref(),
                Fetched::Tag,
            )
            .await?;
        if let Some(value) = headers.get("docker-content-digest") {
            let text = String::from_utf8_lossy(value.as_bytes());
            return ContentDigest::parse(&text).map_err(|error| PullError::BadDigest {
                which: DigestSource::TagHeader,
                error,
            });
        }
        // A registry that does not name the digest: the manifest's own bytes do.
        let (_, raw) = self
            .http
            .get(
                &url,
                OCI_IMAGE_MEDIA_TYPE,
                authorization.as_ref(),
                Fetched::Manifest,
                MAX_MANIFEST_BYTES,
            )
            .await?;
        Ok(ContentDigest::of(&raw))
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
        manifest_digest: &ContentDigest,
    ) -> Result<Pulled, PullError> {
        let reference = &plugin.reference;
        let authorization = self.authorization(reference, Fetched::Manifest).await?;
        let (_, raw) = self
            .http
            .get(
                &Self::url(reference, "manifests", manifest_digest.as_str()),
                OCI_IMAGE_MEDIA_TYPE,
                authorization.as_ref(),
                Fetched::Manifest,
                MAX_MANIFEST_BYTES,
            )
            .await?;
        check_digest(Fetched::Manifest, manifest_digest, &raw)?;
        let manifest = PluginManifest::parse(&raw, self.limits.max_component_bytes)?;
        // Who signed it, before a byte of the component is downloaded or kept.
        let signer = match &self.verifier {
            Some(verifier) => {
                let auth = self.auth(reference)?;
                verifier
                    .verify(plugin, manifest_digest.as_str(), &auth)
                    .await?
            }
            None => None,
        };
        let kept = self
            .store
            .as_ref()
            .and_then(|store| store.component(&manifest.layer_digest));
        let bytes = match kept {
            Some(bytes) => bytes,
            None => {
                self.download(reference, &manifest, authorization.as_ref())
                    .await?
            }
        };
        if let Some(store) = &self.store {
            store.keep(
                &plugin.text,
                manifest_digest,
                &manifest.layer_digest,
                &bytes,
                signer.as_ref(),
            );
        }
        Ok(Pulled {
            manifest_digest: manifest_digest.clone(),
            layer_digest: manifest.layer_digest,
            bytes,
            signer,
        })
    }

    /// The layer's bytes from the registry: no more than the manifest declares (itself at
    /// most the limit), checked against its digest. Only the registry's own blob URL is
    /// asked: a descriptor's `urls` are not followed.
    async fn download(
        &self,
        reference: &Reference,
        manifest: &PluginManifest,
        authorization: Option<&HeaderValue>,
    ) -> Result<Vec<u8>, PullError> {
        let (_, bytes) = self
            .http
            .get(
                &Self::url(reference, "blobs", manifest.layer_digest.as_str()),
                "application/octet-stream, */*",
                authorization,
                Fetched::Component,
                manifest.layer_size,
            )
            .await?;
        if bytes.len() as u64 != manifest.layer_size {
            return Err(PullError::Truncated {
                got: bytes.len() as u64,
                declared: manifest.layer_size,
            });
        }
        check_digest(Fetched::Component, &manifest.layer_digest, &bytes)?;
        Ok(bytes)
    }
}

fn check_digest(what: Fetched, expected: &ContentDigest, bytes: &[u8]) -> Result<(), PullError> {
    let got = ContentDigest::of(bytes);
    if &got == expected {
        return Ok(());
    }
    Err(PullError::DigestMismatch {
        what,
        expected: expected.clone(),
        got,
    })
}
