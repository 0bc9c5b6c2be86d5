//! PEM text to the rustls types, shared by every source that reads or receives PEM.

use std::sync::Arc;

use rustls::crypto::CryptoProvider;
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};
use rustls::sign::CertifiedKey;

use super::error::KeyMaterialError;

/// The crypto provider orca's TLS uses; the same backend `crate::support::tls` installs process-wide,
/// passed explicitly so nothing here depends on the global having been set first.
pub(super) fn provider() -> Arc<CryptoProvider> {
    Arc::new(rustls::crypto::aws_lc_rs::default_provider())
}

/// Every `CERTIFICATE` block, in order (leaf first for a chain).
pub(super) fn certificates(pem: &[u8]) -> Result<Vec<CertificateDer<'static>>, KeyMaterialError> {
    let chain = CertificateDer::pem_slice_iter(pem)
        .collect::<Result<Vec<_>, _>>()
        .map_err(KeyMaterialError::MalformedPem)?;
    if chain.is_empty() {
        return Err(KeyMaterialError::NoCertificate);
    }
    Ok(chain)
}

/// The first private key block: PKCS#8, SEC1 (`EC PRIVATE KEY`) or PKCS#1 (`RSA PRIVATE KEY`).
pub(super) fn private_key(pem: &[u8]) -> Result<PrivateKeyDer<'static>, KeyMaterialError> {
    PrivateKeyDer::from_pem_slice(pem).map_err(|error| match error {
        rustls::pki_types::pem::Error::NoItemsFound => KeyMaterialError::NoPrivateKey,
        other => KeyMaterialError::MalformedPem(other),
    })
}

/// Pairs a chain with its key, checking that the key is the leaf's (a mismatched pair would
/// only fail later, in every handshake).
pub(super) fn certified_key(
    chain: Vec<CertificateDer<'static>>,
    key: PrivateKeyDer<'static>,
) -> Result<CertifiedKey, rustls::Error> {
    CertifiedKey::from_der(chain, key, &provider())
}
