//! The `selfSigned` source: a certificate generated in memory at startup.
//!
//! The apiserver accepts it unless started with `--kubelet-certificate-authority`, so it is the
//! fallback that always works, and what serves while a CSR waits for approval.

use rcgen::{
    CertificateParams, DnType, ExtendedKeyUsagePurpose, KeyPair, KeyUsagePurpose,
    PKCS_ECDSA_P256_SHA256,
};
use rustls::pki_types::{PrivateKeyDer, PrivatePkcs8KeyDer};
use rustls::sign::CertifiedKey;

use super::error::KeyMaterialError;
use super::identity::{ServingIdentity, set_validity};
use super::pem;

/// One year, as the kubelet's own self-signed serving certificate.
const LIFETIME_SECONDS: i64 = 365 * 24 * 60 * 60;
/// Backdated so a client whose clock is a little behind does not see a future notBefore.
const BACKDATE_SECONDS: i64 = 60;

/// An ECDSA P-256 leaf with CN = node name and SANs = the identity's addresses and names.
pub(crate) fn generate(identity: &ServingIdentity) -> Result<CertifiedKey, KeyMaterialError> {
    let key =
        KeyPair::generate_for(&PKCS_ECDSA_P256_SHA256).map_err(KeyMaterialError::Generation)?;
    let mut params = CertificateParams::default();
    params.distinguished_name = rcgen::DistinguishedName::new();
    params
        .distinguished_name
        .push(DnType::CommonName, identity.node_name.as_str());
    params.subject_alt_names = identity
        .subject_alt_names()
        .map_err(KeyMaterialError::Generation)?;
    params.key_usages = vec![KeyUsagePurpose::DigitalSignature];
    params.extended_key_usages = vec![ExtendedKeyUsagePurpose::ServerAuth];
    let now = jiff::Timestamp::now().as_second();
    set_validity(&mut params, now - BACKDATE_SECONDS, now + LIFETIME_SECONDS)?;
    let certificate = params
        .self_signed(&key)
        .map_err(KeyMaterialError::Generation)?;
    let key_der = PrivateKeyDer::Pkcs8(PrivatePkcs8KeyDer::from(key.serialize_der()));
    pem::certified_key(vec![certificate.der().clone()], key_der)
        .map_err(KeyMaterialError::KeyMismatch)
}

#[cfg(test)]
mod tests {
    use std::net::IpAddr;

    use x509_parser::prelude::{FromDer, GeneralName, X509Certificate};

    use super::*;
    use crate::kubelet_api::tls::validity::Validity;

    #[test]
    fn self_signed_certificate_names_the_node_and_carries_every_address_and_hostname() {
        let identity = ServingIdentity {
            node_name: "orca-node".to_owned(),
            addresses: vec![
                "10.0.0.7".parse().unwrap(),
                "fd00::7".parse().unwrap(),
                "10.0.0.7".parse().unwrap(),
            ],
            hostnames: vec!["orca-node.internal".to_owned(), "orca-node".to_owned()],
        };
        let key = generate(&identity).unwrap();
        let (_, cert) = X509Certificate::from_der(key.cert[0].as_ref()).unwrap();

        let cn: Vec<_> = cert
            .subject()
            .iter_common_name()
            .map(|cn| cn.as_str().unwrap().to_owned())
            .collect();
        assert_eq!(cn, ["orca-node"]);

        let sans = cert.subject_alternative_name().unwrap().unwrap();
        let mut ips = Vec::new();
        let mut dns = Vec::new();
        for name in &sans.value.general_names {
            match name {
                GeneralName::IPAddress(bytes) => ips.push(match bytes.len() {
                    4 => IpAddr::from(<[u8; 4]>::try_from(*bytes).unwrap()),
                    _ => IpAddr::from(<[u8; 16]>::try_from(*bytes).unwrap()),
                }),
                GeneralName::DNSName(name) => dns.push(name.to_string()),
                other => panic!("unexpected SAN {other:?}"),
            }
        }
        assert_eq!(
            ips,
            [
                "10.0.0.7".parse::<IpAddr>().unwrap(),
                "fd00::7".parse().unwrap()
            ]
        );
        assert_eq!(dns, ["orca-node.internal", "orca-node"]);

        let validity = Validity::of(&key.cert[0]).unwrap();
        let lifetime = validity.not_after.as_second() - validity.not_before.as_second();
        assert_eq!(lifetime, LIFETIME_SECONDS + BACKDATE_SECONDS);
    }
}
