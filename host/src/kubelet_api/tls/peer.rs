//! The identity a verified client certificate carries.

use rustls::ServerConnection;
use x509_parser::prelude::{FromDer, X509Certificate};

/// The identity a verified client certificate carries: CN is the user, O entries are groups
/// (as the kubelet's x509 authenticator).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CertIdentity {
    pub user: String,
    pub groups: Vec<String>,
}

/// The verified client identity of a finished handshake, if the client presented a
/// certificate.
///
/// # Guarantees
/// rustls only records peer certificates that the client-certificate verifier accepted, so a
/// `Some` here chains to the client CA as it was at handshake time.
///
/// # Caveats
/// `None` also when the certificate has no (or an empty, or non-UTF-8) CN: the kubelet rejects
/// such a certificate as carrying no user, and the caller then treats the client as anonymous.
pub fn client_identity(connection: &ServerConnection) -> Option<CertIdentity> {
    let leaf = connection.peer_certificates()?.first()?;
    identity_of(leaf.as_ref())
}

/// CN and O entries of a DER certificate's subject.
pub(crate) fn identity_of(der: &[u8]) -> Option<CertIdentity> {
    let (_, certificate) = X509Certificate::from_der(der).ok()?;
    let subject = certificate.subject();
    let user = subject.iter_common_name().next()?.as_str().ok()?.to_owned();
    if user.is_empty() {
        return None;
    }
    let groups = subject
        .iter_organization()
        .filter_map(|o| o.as_str().ok())
        .map(str::to_owned)
        .collect();
    Some(CertIdentity { user, groups })
}

#[cfg(test)]
mod tests {
    use rcgen::{CertificateParams, DistinguishedName, DnType, KeyPair};

    use super::*;

    fn certificate(subject: &[(DnType, &str)]) -> Vec<u8> {
        let mut params = CertificateParams::default();
        params.distinguished_name = DistinguishedName::new();
        for (ty, value) in subject {
            params.distinguished_name.push(ty.clone(), *value);
        }
        let key = KeyPair::generate().unwrap();
        params.self_signed(&key).unwrap().der().to_vec()
    }

    #[test]
    fn cn_is_the_user_and_every_o_is_a_group() {
        // rcgen keeps one value per attribute type, so this fixture comes from openssl.
        let pem = include_bytes!("testdata/multi-o.crt");
        let der = crate::kubelet_api::tls::pem::certificates(pem).unwrap();
        assert_eq!(
            identity_of(der[0].as_ref()),
            Some(CertIdentity {
                user: "kube-apiserver-kubelet-client".to_owned(),
                groups: vec![
                    "system:masters".to_owned(),
                    "kubeadm:cluster-admins".to_owned()
                ],
            })
        );
    }

    #[test]
    fn a_certificate_without_cn_carries_no_identity() {
        let der = certificate(&[(DnType::OrganizationName, "system:masters")]);
        assert_eq!(identity_of(&der), None);
        assert_eq!(identity_of(b"not der"), None);
    }
}
