//! The CertificateSigningRequest orca sends, shaped like the kubelet's serving-certificate
//! request so the same approvers (kubelet-csr-approver, a cluster's own policy) accept it.

use std::collections::BTreeMap;

use k8s_openapi::ByteString;
use k8s_openapi::api::certificates::v1::{
    CertificateSigningRequest, CertificateSigningRequestSpec,
};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use rcgen::{CertificateParams, DistinguishedName, DnType, KeyPair, PKCS_ECDSA_P256_SHA256};

use crate::kubelet_api::tls::ServingIdentity;

pub(crate) const SIGNER: &str = "kubernetes.io/kubelet-serving";
/// What the kubelet asks for with an ECDSA key (key encipherment is for RSA key exchange).
pub(crate) const USAGES: [&str; 2] = ["digital signature", "server auth"];
pub(crate) const GENERATE_NAME: &str = "orca-serving-";
pub(crate) const MANAGED_BY_LABEL: &str = "app.kubernetes.io/managed-by";
pub(crate) const NODE_LABEL: &str = "orca.research/node";
/// Label values are at most 63 characters; node names may be longer.
const MAX_LABEL_VALUE: usize = 63;

/// A request ready to send, and the private key that stays with orca.
pub(crate) struct NewRequest {
    pub(crate) object: CertificateSigningRequest,
    pub(crate) key_pem: String,
}

/// A fresh ECDSA P-256 key and a request for CN=`system:node:<node>`, O=`system:nodes`, with
/// the identity's addresses and names as SANs: the subject the `kubelet-serving` signer
/// requires.
pub(crate) fn build(identity: &ServingIdentity) -> Result<NewRequest, rcgen::Error> {
    let key = KeyPair::generate_for(&PKCS_ECDSA_P256_SHA256)?;
    let mut params = CertificateParams::default();
    params.distinguished_name = DistinguishedName::new();
    params.distinguished_name.push(
        DnType::CommonName,
        format!("system:node:{}", identity.node_name),
    );
    params
        .distinguished_name
        .push(DnType::OrganizationName, "system:nodes");
    params.subject_alt_names = identity.subject_alt_names()?;
    let request_pem = params.serialize_request(&key)?.pem()?;

    let mut labels = BTreeMap::from([(MANAGED_BY_LABEL.to_owned(), "orca".to_owned())]);
    if identity.node_name.len() <= MAX_LABEL_VALUE {
        labels.insert(NODE_LABEL.to_owned(), identity.node_name.clone());
    }
    let object = CertificateSigningRequest {
        metadata: ObjectMeta {
            generate_name: Some(GENERATE_NAME.to_owned()),
            labels: Some(labels),
            ..ObjectMeta::default()
        },
        spec: CertificateSigningRequestSpec {
            request: ByteString(request_pem.into_bytes()),
            signer_name: SIGNER.to_owned(),
            usages: Some(USAGES.iter().map(|usage| (*usage).to_owned()).collect()),
            ..CertificateSigningRequestSpec::default()
        },
        status: None,
    };
    Ok(NewRequest {
        object,
        key_pem: key.serialize_pem(),
    })
}
