//! The client-certificate verifier, swappable while the listener runs.

use std::sync::Arc;

use arc_swap::ArcSwap;
use rustls::client::danger::HandshakeSignatureValid;
use rustls::crypto::WebPkiSupportedAlgorithms;
use rustls::pki_types::{CertificateDer, UnixTime};
use rustls::server::WebPkiClientVerifier;
use rustls::server::danger::{ClientCertVerified, ClientCertVerifier};
use rustls::{
    CertificateError, DigitallySignedStruct, DistinguishedName, RootCertStore, SignatureScheme,
};

use super::error::KeyMaterialError;
use super::pem;

/// Offers client authentication without requiring it: the apiserver presents a client
/// certificate, `kubectl` through a proxy or a scraper presents a bearer token instead, which
/// the HTTP layer checks.
///
/// The CA behind it is swapped when the client CA file or ConfigMap changes. With no CA, client
/// authentication is not offered and any certificate presented anyway is rejected.
#[derive(Debug)]
pub(crate) struct SwappableClientVerifier {
    current: ArcSwap<Current>,
    algorithms: WebPkiSupportedAlgorithms,
}

#[derive(Debug)]
pub(crate) struct Current {
    verifier: Option<Arc<dyn ClientCertVerifier>>,
}

impl SwappableClientVerifier {
    /// Starts with no CA: no client certificate is accepted until [`Self::set_ca`].
    pub(crate) fn new() -> Self {
        SwappableClientVerifier {
            current: ArcSwap::from_pointee(Current { verifier: None }),
            algorithms: pem::provider().signature_verification_algorithms,
        }
    }

    /// Trusts the CA certificates in `bundle` from the next handshake on; `None` trusts none.
    pub(crate) fn set_ca(
        &self,
        bundle: Option<&[CertificateDer<'static>]>,
    ) -> Result<(), KeyMaterialError> {
        let verifier = match bundle {
            None => None,
            Some(bundle) => Some(build(bundle)?),
        };
        self.current.store(Arc::new(Current { verifier }));
        Ok(())
    }

    pub(crate) fn has_ca(&self) -> bool {
        self.current.load().verifier.is_some()
    }

    /// What handshakes use now, to tell in tests whether a reload swapped it.
    #[cfg(test)]
    pub(crate) fn current_for_tests(&self) -> Arc<Current> {
        self.current.load_full()
    }
}

/// A WebPKI verifier over `bundle` that lets clients without a certificate through.
fn build(
    bundle: &[CertificateDer<'static>],
) -> Result<Arc<dyn ClientCertVerifier>, KeyMaterialError> {
    let mut roots = RootCertStore::empty();
    let (added, _ignored) = roots.add_parsable_certificates(bundle.iter().cloned());
    if added == 0 {
        return Err(KeyMaterialError::NoUsableCa);
    }
    WebPkiClientVerifier::builder_with_provider(Arc::new(roots), pem::provider())
        .allow_unauthenticated()
        .build()
        .map_err(KeyMaterialError::Verifier)
}

impl ClientCertVerifier for SwappableClientVerifier {
    fn offer_client_auth(&self) -> bool {
        self.has_ca()
    }

    fn client_auth_mandatory(&self) -> bool {
        false
    }

    /// Always empty: the hints would borrow from a value that can be swapped underneath, and
    /// an empty list asks the client to send whatever certificate it has, which is what the
    /// apiserver's kubelet client does anyway.
    fn root_hint_subjects(&self) -> &[DistinguishedName] {
        &[]
    }

    fn verify_client_cert(
        &self,
        end_entity: &CertificateDer<'_>,
        intermediates: &[CertificateDer<'_>],
        now: UnixTime,
    ) -> Result<ClientCertVerified, rustls::Error> {
        match &self.current.load().verifier {
            Some(verifier) => verifier.verify_client_cert(end_entity, intermediates, now),
            None => Err(rustls::Error::InvalidCertificate(
                CertificateError::UnknownIssuer,
            )),
        }
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls12_signature(message, cert, dss, &self.algorithms)
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls13_signature(message, cert, dss, &self.algorithms)
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.algorithms.supported_schemes()
    }
}
