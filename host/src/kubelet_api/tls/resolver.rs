//! The certificate the listener presents, swappable while it runs.

use std::sync::Arc;

use arc_swap::ArcSwapOption;
use rustls::server::{ClientHello, ResolvesServerCert};
use rustls::sign::CertifiedKey;

use crate::config::TlsSource;

/// One slot per configured source, in priority order; a handshake gets the first filled slot.
///
/// Keeping every source's certificate (rather than one current certificate) is what lets a
/// CSR-issued certificate take over from the self-signed one the moment it arrives, and a
/// reloaded file replace only its own slot.
#[derive(Debug)]
pub(crate) struct ServingCertResolver {
    slots: Vec<(TlsSource, ArcSwapOption<CertifiedKey>)>,
}

impl ServingCertResolver {
    pub(crate) fn new(sources: &[TlsSource]) -> Self {
        ServingCertResolver {
            slots: sources
                .iter()
                .map(|source| (*source, ArcSwapOption::empty()))
                .collect(),
        }
    }

    /// Replaces `source`'s certificate. A source not in the configured list is ignored.
    pub(crate) fn install(&self, source: TlsSource, key: Arc<CertifiedKey>) {
        if let Some((_, slot)) = self.slots.iter().find(|(s, _)| *s == source) {
            slot.store(Some(key));
        }
    }

    /// The certificate handshakes get now, and the source it came from.
    pub(crate) fn current(&self) -> Option<(TlsSource, Arc<CertifiedKey>)> {
        self.slots
            .iter()
            .find_map(|(source, slot)| slot.load_full().map(|key| (*source, key)))
    }
}

impl ResolvesServerCert for ServingCertResolver {
    fn resolve(&self, _client_hello: ClientHello<'_>) -> Option<Arc<CertifiedKey>> {
        self.current().map(|(_, key)| key)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::kubelet_api::tls::{ServingIdentity, self_signed};

    fn key(name: &str) -> Arc<CertifiedKey> {
        let identity = ServingIdentity {
            node_name: name.to_owned(),
            addresses: vec![],
            hostnames: vec![],
        };
        Arc::new(self_signed::generate(&identity).unwrap())
    }

    #[test]
    fn the_first_filled_slot_in_source_order_serves() {
        let resolver = ServingCertResolver::new(&[TlsSource::Csr, TlsSource::SelfSigned]);
        assert!(resolver.current().is_none());
        let fallback = key("fallback");
        resolver.install(TlsSource::SelfSigned, fallback.clone());
        let (source, serving) = resolver.current().unwrap();
        assert_eq!(source, TlsSource::SelfSigned);
        assert!(Arc::ptr_eq(&serving, &fallback));

        let issued = key("issued");
        resolver.install(TlsSource::Csr, issued.clone());
        let (source, serving) = resolver.current().unwrap();
        assert_eq!(source, TlsSource::Csr);
        assert!(Arc::ptr_eq(&serving, &issued));
    }

    #[test]
    fn a_source_not_configured_is_ignored() {
        let resolver = ServingCertResolver::new(&[TlsSource::SelfSigned]);
        resolver.install(TlsSource::Files, key("files"));
        assert!(resolver.current().is_none());
    }
}
