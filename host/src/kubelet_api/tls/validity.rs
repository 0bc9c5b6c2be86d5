//! A certificate's lifetime and when to renew it.

use jiff::Timestamp;
use rustls::pki_types::CertificateDer;
use x509_parser::prelude::{FromDer, X509Certificate};

use super::error::KeyMaterialError;

/// notBefore..notAfter of a certificate.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Validity {
    pub(crate) not_before: Timestamp,
    pub(crate) not_after: Timestamp,
}

impl Validity {
    /// Reads the validity of a DER certificate.
    pub(crate) fn of(certificate: &CertificateDer<'_>) -> Result<Self, KeyMaterialError> {
        let (_, parsed) =
            X509Certificate::from_der(certificate.as_ref()).map_err(KeyMaterialError::NotX509)?;
        let validity = parsed.validity();
        let timestamp = |seconds: i64| {
            Timestamp::from_second(seconds).map_err(KeyMaterialError::ValidityOutOfRange)
        };
        Ok(Validity {
            not_before: timestamp(validity.not_before.timestamp())?,
            not_after: timestamp(validity.not_after.timestamp())?,
        })
    }

    /// The moment `fraction` of the lifetime has passed. Like the kubelet, orca renews well
    /// before expiry so an approver that is slow (or down for a while) does not cost the
    /// apiserver its connection to the node.
    pub(crate) fn renewal_point(&self, fraction: f64) -> Timestamp {
        let lifetime = self.not_after.as_second() - self.not_before.as_second();
        // f64 to i64 saturates; the fraction is validated to lie in (0, 1).
        let elapsed = (lifetime as f64 * fraction.clamp(0.0, 1.0)) as i64;
        Timestamp::from_second(self.not_before.as_second().saturating_add(elapsed))
            .unwrap_or(self.not_after)
    }

    pub(crate) fn is_expired(&self, now: Timestamp) -> bool {
        now >= self.not_after
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn renewal_point_is_the_fraction_of_the_lifetime_after_not_before() {
        let validity = Validity {
            not_before: Timestamp::from_second(1_000).unwrap(),
            not_after: Timestamp::from_second(11_000).unwrap(),
        };
        assert_eq!(
            validity.renewal_point(0.8),
            Timestamp::from_second(9_000).unwrap()
        );
        assert_eq!(
            validity.renewal_point(0.5),
            Timestamp::from_second(6_000).unwrap()
        );
        assert!(!validity.is_expired(Timestamp::from_second(10_999).unwrap()));
        assert!(validity.is_expired(Timestamp::from_second(11_000).unwrap()));
    }

    #[test]
    fn garbage_is_not_a_certificate() {
        let error = Validity::of(&CertificateDer::from(vec![1, 2, 3])).unwrap_err();
        assert!(matches!(error, KeyMaterialError::NotX509(_)), "{error:?}");
        assert!(
            error.to_string().starts_with("not an X.509 certificate"),
            "{error}"
        );
    }
}
