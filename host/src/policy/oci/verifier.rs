//! Finding the cosign signatures of a pulled manifest digest and judging them against
//! `policy.registry.verify`, before any of the component's bytes are downloaded.

use std::path::Path;

use oci_client::errors::{OciDistributionError, OciErrorCode};
use oci_client::secrets::RegistryAuth;
use oci_client::{Client, Reference};
use rustls::pki_types::CertificateDer;
use sigstore::cosign::{CosignCapabilities, SignatureLayer};
use sigstore::registry::{Auth, OciReference};
use sigstore::trust::ManualTrustRoot;
use tokio::sync::Mutex;

use super::client_error::ClientError;
use super::reference::PluginReference;
use super::signature::{SignatureError, SignatureManifest, Signer, TrustPolicy, judge};

/// Checks pulled versions against a [`TrustPolicy`].
pub struct SignatureVerifier {
    policy: TrustPolicy,
    /// The sigstore crate's cosign client (its calls take `&mut self`).
    cosign: Mutex<sigstore::cosign::Client>,
    /// For asking whether the `.sig` tag is there at all.
    registry: Client,
}

impl SignatureVerifier {
    /// A verifier of `policy` reaching registries as `registry` does (`ca_file`: a private CA).
    ///
    /// # Errors
    /// [`ClientError`]: the CA file or the trust root cannot be used.
    pub fn new(
        policy: TrustPolicy,
        registry: Client,
        ca_file: Option<&Path>,
    ) -> Result<SignatureVerifier, ClientError> {
        let cosign = cosign_client(ca_file, &policy)?;
        Ok(SignatureVerifier {
            policy,
            cosign: Mutex::new(cosign),
            registry,
        })
    }

    pub fn policy(&self) -> &TrustPolicy {
        &self.policy
    }

    /// Who signed the manifest `digest` of `plugin`'s repository, when the policy covers
    /// `plugin` (`None`: it does not, and loads unsigned).
    ///
    /// # Errors
    /// [`SignatureError`]: no signature, none valid, none by an allowed signer, or the registry
    /// could not be asked.
    pub async fn verify(
        &self,
        plugin: &PluginReference,
        digest: &str,
        auth: &RegistryAuth,
    ) -> Result<Option<Signer>, SignatureError> {
        let Some(rule) = self.policy.rule_for(plugin) else {
            return Ok(None);
        };
        let (layers, manifest) = self.signatures(plugin, digest, auth).await?;
        judge(rule, digest, &layers, manifest).map(Some)
    }

    /// The signature layers of `digest` the sigstore client trusts as signatures of it, and
    /// whether cosign's `.sig` tag for it exists.
    ///
    /// # Errors
    /// [`SignatureError::Unreachable`] when the registry cannot say.
    pub async fn signatures(
        &self,
        plugin: &PluginReference,
        digest: &str,
        auth: &RegistryAuth,
    ) -> Result<(Vec<SignatureLayer>, SignatureManifest), SignatureError> {
        let unreachable = |error: String| SignatureError::Unreachable {
            digest: digest.to_owned(),
            error,
        };
        let image = OciReference::with_digest(
            plugin.reference.registry().to_owned(),
            plugin.reference.repository().to_owned(),
            digest.to_owned(),
        );
        let sigstore_auth = Auth::from(auth);
        let mut cosign = self.cosign.lock().await;
        let (signature_tag, _) = cosign
            .triangulate(&image, &sigstore_auth)
            .await
            .map_err(|error| unreachable(error.to_string()))?;
        // Asked first: a signature pushed between the two requests then counts as found, not
        // as a tag whose layers are all invalid.
        let tag = Reference::with_tag(
            signature_tag.registry().to_owned(),
            signature_tag.repository().to_owned(),
            signature_tag.tag().unwrap_or_default().to_owned(),
        );
        let manifest = match self.registry.fetch_manifest_digest(&tag, auth).await {
            Ok(_) => SignatureManifest::Present,
            Err(error) if is_not_found(&error) => SignatureManifest::Absent,
            Err(error) => return Err(unreachable(error.to_string())),
        };
        let layers = cosign
            .trusted_signature_layers(&sigstore_auth, &image)
            .await
            .map_err(|error| unreachable(error.to_string()))?;
        drop(cosign);
        Ok((layers, manifest))
    }
}

/// Whether the registry answered that the manifest is not there.
fn is_not_found(error: &OciDistributionError) -> bool {
    match error {
        OciDistributionError::ImageManifestNotFoundError(_) => true,
        OciDistributionError::ServerError { code, .. } => *code == 404,
        OciDistributionError::RegistryError { envelope, .. } => envelope.errors.iter().any(|e| {
            matches!(
                e.code,
                OciErrorCode::ManifestUnknown | OciErrorCode::NameUnknown | OciErrorCode::NotFound
            )
        }),
        _ => false,
    }
}

/// The sigstore crate's cosign client: the registry's CA, and for keyless signatures the
/// policy's Fulcio certificates and Rekor keys.
///
/// # Errors
/// [`ClientError::CaUnreadable`], or [`ClientError::VerificationSetupFailed`] when the trust
/// root is refused.
pub fn cosign_client(
    ca_file: Option<&Path>,
    policy: &TrustPolicy,
) -> Result<sigstore::cosign::Client, ClientError> {
    let mut config = sigstore::registry::ClientConfig::default();
    if let Some(path) = ca_file {
        let data = std::fs::read(path).map_err(|source| ClientError::CaUnreadable {
            path: path.to_path_buf(),
            source,
        })?;
        config
            .extra_root_certificates
            .push(sigstore::registry::Certificate {
                encoding: sigstore::registry::CertificateEncoding::Pem,
                data,
            });
    }
    let mut trust_root = ManualTrustRoot::default();
    if let Some(root) = policy.trust_root() {
        trust_root.fulcio_certs = root
            .fulcio_certs
            .iter()
            .map(|der| CertificateDer::from(der.clone()))
            .collect();
        trust_root.rekor_keys = root.rekor_keys.clone();
    }
    sigstore::cosign::ClientBuilder::default()
        .with_oci_client_config(config)
        .with_trust_repository(&trust_root)
        .and_then(sigstore::cosign::ClientBuilder::build)
        .map_err(|source| ClientError::VerificationSetupFailed { source })
}
