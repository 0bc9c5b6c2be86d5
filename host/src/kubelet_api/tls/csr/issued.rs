//! An issued certificate with its key: what the CSR flow serves, stores and renews.

use std::sync::Arc;

use rustls::sign::CertifiedKey;

use crate::kubelet_api::tls::error::KeyMaterialError;
use crate::kubelet_api::tls::pem;
use crate::kubelet_api::tls::validity::Validity;

#[derive(Debug, Clone)]
pub(crate) struct Issued {
    pub(crate) key: Arc<CertifiedKey>,
    pub(crate) validity: Validity,
    /// The PEM as received and generated, kept to write to `certDir` unchanged.
    pub(crate) chain_pem: String,
    pub(crate) key_pem: String,
}

impl Issued {
    /// Pairs a PEM chain with its PEM key, checking they belong together.
    pub(crate) fn from_pem(chain_pem: &[u8], key_pem: &str) -> Result<Issued, KeyMaterialError> {
        let chain = pem::certificates(chain_pem)?;
        let validity = Validity::of(&chain[0])?;
        let key = pem::private_key(key_pem.as_bytes())?;
        let key = pem::certified_key(chain, key).map_err(KeyMaterialError::KeyMismatch)?;
        Ok(Issued {
            key: Arc::new(key),
            validity,
            chain_pem: String::from_utf8_lossy(chain_pem).into_owned(),
            key_pem: key_pem.to_owned(),
        })
    }
}
