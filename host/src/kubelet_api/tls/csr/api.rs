//! The two apiserver calls the CSR flow makes, behind a trait so tests can play the approver.

use std::time::Duration;

use async_trait::async_trait;
use k8s_openapi::api::certificates::v1::CertificateSigningRequest;
use kube::Api;
use kube::api::PostParams;

use crate::support::Backoff;

/// How a request ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum CsrOutcome {
    /// `status.certificate`: the PEM chain the signer issued.
    Issued(Vec<u8>),
    Denied {
        reason: String,
        message: String,
    },
    Failed {
        reason: String,
        message: String,
    },
}

#[derive(Debug, thiserror::Error)]
pub(crate) enum CsrApiError {
    #[error(
        "orca may not {verb} certificatesigningrequests (certificates.k8s.io); grant it in \
         orca's ClusterRole: {message}"
    )]
    Forbidden { verb: &'static str, message: String },
    #[error(
        "CertificateSigningRequest {name} disappeared before it was issued (the apiserver \
         deletes requests left pending for a day)"
    )]
    Gone { name: String },
    #[error("cannot {verb} CertificateSigningRequest: {source}")]
    Request {
        verb: &'static str,
        #[source]
        source: kube::Error,
    },
}

/// The CertificateSigningRequest calls the CSR flow needs, and nothing else.
#[async_trait]
pub(crate) trait CsrApi: Send + Sync {
    /// Creates the request; returns the name the apiserver generated.
    async fn create(&self, request: &CertificateSigningRequest) -> Result<String, CsrApiError>;
    /// Waits until the request is issued, denied or failed.
    async fn wait(&self, name: &str) -> Result<CsrOutcome, CsrApiError>;
}

/// How a request stands: `None` while pending (approved but not yet signed counts as pending).
pub(crate) fn outcome_of(request: &CertificateSigningRequest) -> Option<CsrOutcome> {
    let status = request.status.as_ref()?;
    for condition in status.conditions.iter().flatten() {
        if condition.status != "True" {
            continue;
        }
        let reason = condition.reason.clone().unwrap_or_default();
        let message = condition.message.clone().unwrap_or_default();
        match condition.type_.as_str() {
            "Denied" => return Some(CsrOutcome::Denied { reason, message }),
            "Failed" => return Some(CsrOutcome::Failed { reason, message }),
            _ => {}
        }
    }
    match &status.certificate {
        Some(certificate) if !certificate.0.is_empty() => {
            Some(CsrOutcome::Issued(certificate.0.clone()))
        }
        _ => None,
    }
}

/// The real apiserver.
pub(crate) struct KubeCsrApi {
    api: Api<CertificateSigningRequest>,
}

impl KubeCsrApi {
    pub(crate) fn new(client: kube::Client) -> Self {
        KubeCsrApi {
            api: Api::all(client),
        }
    }
}

/// Polls start quick (an auto-approver answers in a second) and slow down to one per 30 s,
/// since a request waiting for a human may wait for hours.
const POLL_BACKOFF: Backoff = Backoff::new(Duration::from_secs(1), Duration::from_secs(30));

fn classify(verb: &'static str, error: kube::Error) -> CsrApiError {
    match error {
        kube::Error::Api(status) if status.code == 403 => CsrApiError::Forbidden {
            verb,
            message: status.message,
        },
        source => CsrApiError::Request { verb, source },
    }
}

#[async_trait]
impl CsrApi for KubeCsrApi {
    async fn create(&self, request: &CertificateSigningRequest) -> Result<String, CsrApiError> {
        let created = self
            .api
            .create(&PostParams::default(), request)
            .await
            .map_err(|error| classify("create", error))?;
        Ok(created.metadata.name.unwrap_or_default())
    }

    async fn wait(&self, name: &str) -> Result<CsrOutcome, CsrApiError> {
        let mut polls = POLL_BACKOFF.delays();
        loop {
            let current = self
                .api
                .get_opt(name)
                .await
                .map_err(|error| classify("get", error))?;
            let Some(current) = current else {
                return Err(CsrApiError::Gone {
                    name: name.to_owned(),
                });
            };
            if let Some(outcome) = outcome_of(&current) {
                return Ok(outcome);
            }
            tokio::time::sleep(polls.next_delay()).await;
        }
    }
}

#[cfg(test)]
mod tests {
    use k8s_openapi::ByteString;
    use k8s_openapi::api::certificates::v1::{
        CertificateSigningRequestCondition, CertificateSigningRequestStatus,
    };

    use super::*;

    fn with_status(
        conditions: &[(&str, &str)],
        certificate: Option<&[u8]>,
    ) -> CertificateSigningRequest {
        CertificateSigningRequest {
            status: Some(CertificateSigningRequestStatus {
                conditions: Some(
                    conditions
                        .iter()
                        .map(|(type_, status)| CertificateSigningRequestCondition {
                            type_: (*type_).to_owned(),
                            status: (*status).to_owned(),
                            reason: Some("Because".to_owned()),
                            message: Some("policy".to_owned()),
                            ..Default::default()
                        })
                        .collect(),
                ),
                certificate: certificate.map(|bytes| ByteString(bytes.to_vec())),
            }),
            ..Default::default()
        }
    }

    #[test]
    fn approved_but_unsigned_is_pending_and_denied_wins_over_a_certificate() {
        assert_eq!(outcome_of(&CertificateSigningRequest::default()), None);
        assert_eq!(
            outcome_of(&with_status(&[("Approved", "True")], None)),
            None
        );
        assert_eq!(
            outcome_of(&with_status(&[("Approved", "True")], Some(b"PEM"))),
            Some(CsrOutcome::Issued(b"PEM".to_vec()))
        );
        assert_eq!(
            outcome_of(&with_status(&[("Denied", "True")], Some(b"PEM"))),
            Some(CsrOutcome::Denied {
                reason: "Because".to_owned(),
                message: "policy".to_owned()
            })
        );
        assert!(matches!(
            outcome_of(&with_status(&[("Failed", "True")], None)),
            Some(CsrOutcome::Failed { .. })
        ));
        assert_eq!(outcome_of(&with_status(&[("Denied", "False")], None)), None);
    }
}
