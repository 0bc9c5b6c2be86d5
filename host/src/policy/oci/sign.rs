//! Signing a pushed plugin as `cosign sign --key` does: a SimpleSigning payload naming the
//! manifest digest, signed with a cosign key pair and pushed to the digest's `.sig` tag, so
//! `cosign verify` and orca's own verification both accept it. The formats are the sigstore
//! crate's.

use std::path::{Path, PathBuf};

use oci_client::Reference;
use oci_client::secrets::RegistryAuth;
use sigstore::cosign::constraint::PrivateKeySigner;
use sigstore::cosign::{Constraint, CosignCapabilities, SignatureLayer};
use sigstore::crypto::SigningScheme;
use sigstore::crypto::signing_key::SigStoreKeyPair;
use sigstore::errors::SigstoreError;
use sigstore::registry::{Auth, OciReference};

use super::signature::{Signer, fingerprint};

/// The environment variable cosign reads a key's password from; orca reads the same one.
pub const PASSWORD_VARIABLE: &str = "COSIGN_PASSWORD";

/// Why a key could not be read or a signature made and pushed.
#[derive(Debug, thiserror::Error)]
pub enum SignError {
    #[error("reading the signing key {}: {source}", .path.display())]
    ReadFailed {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("{} is not a cosign private key {PASSWORD_VARIABLE} opens: {source}", .path.display())]
    NotAKey {
        path: PathBuf,
        #[source]
        source: SigstoreError,
    },
    #[error("{}: {source}", .path.display())]
    NoPublicKey {
        path: PathBuf,
        #[source]
        source: SigstoreError,
    },
    #[error(
        "{}: a {pair}; orca signs with ECDSA P-256 or P-384 and Ed25519 keys (cosign generate-key-pair makes P-256)",
        .path.display()
    )]
    UnsupportedKey {
        path: PathBuf,
        /// The key pair's kind, as sigstore names it.
        pair: String,
    },
    #[error("finding where the signature of {digest} goes: {source}")]
    LocateFailed {
        digest: String,
        #[source]
        source: SigstoreError,
    },
    #[error("building the signature payload: {source}")]
    PayloadFailed {
        #[source]
        source: SigstoreError,
    },
    #[error("signing {digest}: {source}")]
    SignFailed {
        digest: String,
        #[source]
        source: SigstoreError,
    },
    #[error("signing {digest}: the payload was already signed")]
    AlreadySigned { digest: String },
    #[error("pushing the signature to {tag}: {source}")]
    PushFailed {
        tag: String,
        #[source]
        source: SigstoreError,
    },
}

/// A cosign private key, decrypted.
pub struct SigningKey {
    signer: PrivateKeySigner,
    fingerprint: String,
}

impl SigningKey {
    /// Reads a key `cosign generate-key-pair` wrote (encrypted with `password`; an empty one
    /// for an unencrypted PKCS#8 key).
    ///
    /// # Errors
    /// [`SignError`]: the file cannot be read or decrypted, or its key type cannot sign.
    pub fn read(path: &Path, password: &[u8]) -> Result<SigningKey, SignError> {
        let pem = std::fs::read(path).map_err(|source| SignError::ReadFailed {
            path: path.to_path_buf(),
            source,
        })?;
        let pair = if password.is_empty() {
            SigStoreKeyPair::from_pem(&pem)
        } else {
            SigStoreKeyPair::from_encrypted_pem(&pem, password)
        }
        .map_err(|source| SignError::NotAKey {
            path: path.to_path_buf(),
            source,
        })?;
        let public = pair
            .public_key_to_der()
            .map_err(|source| SignError::NoPublicKey {
                path: path.to_path_buf(),
                source,
            })?;
        // The schemes cosign signs with, by key type; the key pair says which fits.
        let schemes = [
            SigningScheme::ECDSA_P256_SHA256_ASN1,
            SigningScheme::ECDSA_P384_SHA384_ASN1,
            SigningScheme::ED25519,
        ];
        let signer = schemes
            .iter()
            .find_map(|scheme| pair.to_sigstore_signer(scheme).ok())
            .ok_or_else(|| SignError::UnsupportedKey {
                path: path.to_path_buf(),
                pair: pair.to_string(),
            })?;
        Ok(SigningKey {
            signer: PrivateKeySigner::new_with_signer(signer),
            fingerprint: fingerprint(&public),
        })
    }

    /// Who a signature by this key is from.
    pub fn signer(&self) -> Signer {
        Signer::Key {
            fingerprint: self.fingerprint.clone(),
        }
    }

    /// Signs the manifest `digest` in `reference`'s repository and pushes the signature to
    /// cosign's `.sig` tag for it.
    ///
    /// # Errors
    /// [`SignError`]: signing failed or the registry refused the signature.
    pub async fn sign(
        &self,
        client: &mut sigstore::cosign::Client,
        reference: &Reference,
        auth: &RegistryAuth,
        digest: &str,
    ) -> Result<(), SignError> {
        let image = OciReference::with_digest(
            reference.registry().to_owned(),
            reference.repository().to_owned(),
            digest.to_owned(),
        );
        let auth = Auth::from(auth);
        let (signature_tag, _) =
            client
                .triangulate(&image, &auth)
                .await
                .map_err(|source| SignError::LocateFailed {
                    digest: digest.to_owned(),
                    source,
                })?;
        let mut layer = SignatureLayer::new_unsigned(&image, digest)
            .map_err(|source| SignError::PayloadFailed { source })?;
        let signed =
            self.signer
                .add_constraint(&mut layer)
                .map_err(|source| SignError::SignFailed {
                    digest: digest.to_owned(),
                    source,
                })?;
        if !signed {
            return Err(SignError::AlreadySigned {
                digest: digest.to_owned(),
            });
        }
        client
            .push_signature(None, &auth, &signature_tag, vec![layer])
            .await
            .map_err(|source| SignError::PushFailed {
                tag: signature_tag.to_string(),
                source,
            })?;
        Ok(())
    }
}
