//! Who the serving certificate is for, and the subject alternative names that follow.

use std::net::IpAddr;

use rcgen::SanType;
use x509_parser::time::ASN1Time;

use super::error::KeyMaterialError;

/// Who the serving certificate is for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ServingIdentity {
    /// The Node's name: the self-signed certificate's CN and a DNS name.
    pub node_name: String,
    /// The addresses the Node advertises; the apiserver dials one of them.
    pub addresses: Vec<IpAddr>,
    /// DNS names the Node advertises (its `Hostname` addresses).
    pub hostnames: Vec<String>,
}

impl ServingIdentity {
    /// IP SANs for every address, DNS SANs for every hostname plus the node name, without
    /// duplicates. A name that is not ASCII cannot be a DNS SAN: it is an error, since it
    /// would leave the apiserver unable to verify the name it dials.
    pub(crate) fn subject_alt_names(&self) -> Result<Vec<SanType>, rcgen::Error> {
        let mut sans: Vec<SanType> = Vec::new();
        for address in &self.addresses {
            let san = SanType::IpAddress(*address);
            if !sans.contains(&san) {
                sans.push(san);
            }
        }
        for name in self.hostnames.iter().chain([&self.node_name]) {
            if name.is_empty() || name.parse::<IpAddr>().is_ok() {
                // An address given as a hostname is already covered by (or belongs in) the
                // IP SANs; an IP in a DNS SAN matches nothing.
                continue;
            }
            let san = SanType::DnsName(name.as_str().try_into()?);
            if !sans.contains(&san) {
                sans.push(san);
            }
        }
        Ok(sans)
    }
}

/// Sets a certificate's validity from Unix times. x509-parser's `ASN1Time` converts to the
/// time type rcgen takes, which spares orca a direct dependency on `time` for two fields.
pub(crate) fn set_validity(
    params: &mut rcgen::CertificateParams,
    not_before: i64,
    not_after: i64,
) -> Result<(), KeyMaterialError> {
    let convert = |seconds: i64| {
        ASN1Time::from_timestamp(seconds)
            .map(|time| time.to_datetime())
            .map_err(|source| KeyMaterialError::TimeOutOfRange { seconds, source })
    };
    params.not_before = convert(not_before)?;
    params.not_after = convert(not_after)?;
    Ok(())
}
