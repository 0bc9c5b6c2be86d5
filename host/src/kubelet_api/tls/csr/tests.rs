//! The CSR flow against a fake apiserver that plays approver and signer with a test CA.

use std::collections::{HashMap, VecDeque};
use std::sync::Mutex;

use k8s_openapi::api::certificates::v1::CertificateSigningRequest;
use rcgen::{
    BasicConstraints, CertificateParams, CertificateSigningRequestParams, DnType, IsCa, Issuer,
    KeyPair, KeyUsagePurpose, SanType,
};
use x509_parser::prelude::{FromDer, X509Certificate};

use super::api::{CsrApi, CsrApiError, CsrOutcome};
use super::*;
use crate::config::ServingTlsConfig;
use crate::kubelet_api::tls::identity::set_validity;
use crate::kubelet_api::tls::sources::{self, SourceDeps};

/// What the fake does with the next created request.
#[derive(Debug, Clone, Copy)]
enum Behaviour {
    /// Signs it, valid from `now + .0` to `now + .1` seconds.
    Issue(i64, i64),
    Deny,
    Fail,
    /// Refuses the create, as an apiserver without the RBAC grant.
    Forbid,
}

/// A fake apiserver. Requests beyond the scripted behaviours are denied, so an unexpected
/// extra request shows up as a failure rather than a certificate.
struct FakeCsrApi {
    ca: Issuer<'static, KeyPair>,
    behaviours: Mutex<VecDeque<Behaviour>>,
    created: Mutex<Vec<CertificateSigningRequest>>,
    outcomes: Mutex<HashMap<String, CsrOutcome>>,
    /// `wait` blocks while this is false: a request pending approval.
    approver: watch::Sender<bool>,
}

impl FakeCsrApi {
    fn new(behaviours: &[Behaviour]) -> Arc<Self> {
        let mut params = CertificateParams::default();
        params.distinguished_name = rcgen::DistinguishedName::new();
        params
            .distinguished_name
            .push(DnType::CommonName, "test kubelet-serving CA");
        params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        params.key_usages = vec![KeyUsagePurpose::KeyCertSign];
        let key = KeyPair::generate().unwrap();
        Arc::new(FakeCsrApi {
            ca: Issuer::new(params, key),
            behaviours: Mutex::new(behaviours.iter().copied().collect()),
            created: Mutex::new(Vec::new()),
            outcomes: Mutex::new(HashMap::new()),
            approver: watch::channel(true).0,
        })
    }

    fn hold(&self) {
        self.approver.send_replace(false);
    }

    fn release(&self) {
        self.approver.send_replace(true);
    }

    fn created(&self) -> Vec<CertificateSigningRequest> {
        self.created.lock().unwrap().clone()
    }

    /// Signs a CSR PEM as the `kubelet-serving` signer would.
    fn sign(&self, request_pem: &str, from: i64, until: i64) -> String {
        let mut request = CertificateSigningRequestParams::from_pem(request_pem).unwrap();
        let now = Timestamp::now().as_second();
        set_validity(&mut request.params, now + from, now + until).unwrap();
        request.signed_by(&self.ca).unwrap().pem()
    }

    /// A certificate as if issued earlier, for the store tests.
    fn issued(&self, identity: &ServingIdentity, from: i64, until: i64) -> Issued {
        let request = request::build(identity).unwrap();
        let pem = String::from_utf8(request.object.spec.request.0.clone()).unwrap();
        let chain = self.sign(&pem, from, until);
        Issued::from_pem(chain.as_bytes(), &request.key_pem).unwrap()
    }
}

#[async_trait::async_trait]
impl CsrApi for FakeCsrApi {
    async fn create(&self, request: &CertificateSigningRequest) -> Result<String, CsrApiError> {
        let behaviour = self
            .behaviours
            .lock()
            .unwrap()
            .pop_front()
            .unwrap_or(Behaviour::Deny);
        let outcome = match behaviour {
            Behaviour::Forbid => {
                return Err(CsrApiError::Forbidden {
                    verb: "create",
                    message: "forbidden".to_owned(),
                });
            }
            Behaviour::Issue(from, until) => {
                let pem = String::from_utf8(request.spec.request.0.clone()).unwrap();
                CsrOutcome::Issued(self.sign(&pem, from, until).into_bytes())
            }
            Behaviour::Deny => CsrOutcome::Denied {
                reason: "NotAllowed".to_owned(),
                message: "not this node".to_owned(),
            },
            Behaviour::Fail => CsrOutcome::Failed {
                reason: "SignerError".to_owned(),
                message: "signer down".to_owned(),
            },
        };
        let mut created = self.created.lock().unwrap();
        created.push(request.clone());
        let name = format!("orca-serving-{}", created.len());
        self.outcomes.lock().unwrap().insert(name.clone(), outcome);
        Ok(name)
    }

    async fn wait(&self, name: &str) -> Result<CsrOutcome, CsrApiError> {
        let mut approver = self.approver.subscribe();
        let _ = approver.wait_for(|released| *released).await;
        self.outcomes
            .lock()
            .unwrap()
            .get(name)
            .cloned()
            .ok_or_else(|| CsrApiError::Gone {
                name: name.to_owned(),
            })
    }
}

fn identity() -> ServingIdentity {
    ServingIdentity {
        node_name: "orca-node".to_owned(),
        addresses: vec!["10.1.2.3".parse().unwrap()],
        hostnames: vec!["orca-node.internal".to_owned()],
    }
}

fn fast() -> CsrTiming {
    CsrTiming {
        retry: Backoff::new(Duration::from_millis(10), Duration::from_millis(40)),
        max_sleep: Duration::from_millis(50),
    }
}

fn tls(sources: &[TlsSource], cert_dir: Option<&std::path::Path>) -> ServingTlsConfig {
    ServingTlsConfig {
        sources: sources.to_vec(),
        cert_dir: cert_dir.map(|dir| dir.to_owned()),
        ..ServingTlsConfig::default()
    }
}

async fn start(
    tls: &ServingTlsConfig,
    fake: &Arc<FakeCsrApi>,
    shutdown: &CancellationToken,
) -> Result<Arc<ServingCertResolver>, crate::kubelet_api::tls::TlsError> {
    let deps = SourceDeps {
        csr_api: fake.clone(),
        file_poll: Duration::from_millis(20),
        csr_timing: fast(),
    };
    sources::start(tls, &identity(), deps, shutdown).await
}

fn issuer_cn(resolver: &ServingCertResolver) -> (TlsSource, String) {
    let (source, key) = resolver.current().unwrap();
    let (_, cert) = X509Certificate::from_der(key.cert[0].as_ref()).unwrap();
    let cn = cert.issuer().iter_common_name().next().unwrap();
    (source, cn.as_str().unwrap().to_owned())
}

/// Polls `condition` for up to five seconds.
async fn eventually(what: &str, mut condition: impl FnMut() -> bool) {
    let deadline = tokio::time::Instant::now() + Duration::from_secs(5);
    while !condition() {
        assert!(
            tokio::time::Instant::now() < deadline,
            "timed out waiting: {what}"
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

#[tokio::test]
async fn the_request_has_the_kubelet_serving_subject_sans_usages_and_signer() {
    let fake = FakeCsrApi::new(&[Behaviour::Issue(-60, 3600)]);
    let source = CsrSource {
        api: fake.clone(),
        identity: identity(),
        resolver: Arc::new(ServingCertResolver::new(&[TlsSource::Csr])),
        store: None,
        renew_fraction: 0.8,
        timing: fast(),
    };
    let issued = source.request_once().await.unwrap();
    assert_eq!(
        issued.validity.not_after.as_second() - issued.validity.not_before.as_second(),
        3660
    );

    let created = fake.created();
    assert_eq!(created.len(), 1);
    let object = &created[0];
    assert_eq!(
        object.metadata.generate_name.as_deref(),
        Some("orca-serving-")
    );
    assert_eq!(object.spec.signer_name, "kubernetes.io/kubelet-serving");
    assert_eq!(
        object.spec.usages.as_deref(),
        Some(&["digital signature".to_owned(), "server auth".to_owned()][..])
    );
    let labels = object.metadata.labels.as_ref().unwrap();
    assert_eq!(labels[request::MANAGED_BY_LABEL], "orca");
    assert_eq!(labels[request::NODE_LABEL], "orca-node");

    let pem = String::from_utf8(object.spec.request.0.clone()).unwrap();
    assert!(
        pem.starts_with("-----BEGIN CERTIFICATE REQUEST-----"),
        "{pem}"
    );
    let request = CertificateSigningRequestParams::from_pem(&pem).unwrap();
    let subject: Vec<_> = request
        .params
        .distinguished_name
        .iter()
        .map(|(ty, value)| (ty.clone(), format!("{value:?}")))
        .collect();
    assert_eq!(subject.len(), 2, "{subject:?}");
    assert!(subject[0].0 == DnType::CommonName && subject[0].1.contains("system:node:orca-node"));
    assert!(subject[1].0 == DnType::OrganizationName && subject[1].1.contains("system:nodes"));
    assert_eq!(
        request.params.subject_alt_names,
        vec![
            SanType::IpAddress("10.1.2.3".parse().unwrap()),
            SanType::DnsName("orca-node.internal".try_into().unwrap()),
            SanType::DnsName("orca-node".try_into().unwrap()),
        ]
    );
}

#[tokio::test]
async fn the_next_source_serves_while_pending_and_the_issued_certificate_is_swapped_in_and_stored()
{
    let dir = tempfile::tempdir().unwrap();
    let fake = FakeCsrApi::new(&[Behaviour::Issue(-60, 3600)]);
    fake.hold();
    let shutdown = CancellationToken::new();
    let tls = tls(&[TlsSource::Csr, TlsSource::SelfSigned], Some(dir.path()));
    let resolver = start(&tls, &fake, &shutdown).await.unwrap();
    assert_eq!(
        issuer_cn(&resolver),
        (TlsSource::SelfSigned, "orca-node".to_owned())
    );

    fake.release();
    eventually("the issued certificate serves", || {
        resolver.current().unwrap().0 == TlsSource::Csr
    })
    .await;
    assert_eq!(
        issuer_cn(&resolver),
        (TlsSource::Csr, "test kubelet-serving CA".to_owned())
    );

    let stored = dir.path().join(store::FILE_NAME);
    eventually("the certificate is stored", || stored.exists()).await;
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        let mode = std::fs::metadata(&stored).unwrap().permissions().mode();
        assert_eq!(mode & 0o777, 0o600);
    }
    let reloaded = CertStore::new(dir.path()).load(Timestamp::now()).unwrap();
    assert_eq!(reloaded.key.cert[0], resolver.current().unwrap().1.cert[0]);
    shutdown.cancel();
}

#[tokio::test]
async fn a_denied_failed_or_forbidden_request_falls_back_and_is_retried() {
    let fake = FakeCsrApi::new(&[
        Behaviour::Forbid,
        Behaviour::Deny,
        Behaviour::Fail,
        Behaviour::Issue(-60, 3600),
    ]);
    fake.hold();
    let shutdown = CancellationToken::new();
    let tls = tls(&[TlsSource::Csr, TlsSource::SelfSigned], None);
    let resolver = start(&tls, &fake, &shutdown).await.unwrap();
    assert_eq!(resolver.current().unwrap().0, TlsSource::SelfSigned);

    fake.release();
    eventually("the fourth request is issued", || {
        resolver.current().unwrap().0 == TlsSource::Csr
    })
    .await;
    // The forbidden create leaves no object; denied, failed and issued do.
    assert_eq!(fake.created().len(), 3);
    shutdown.cancel();
}

#[tokio::test]
async fn a_certificate_past_its_renewal_point_is_renewed_while_it_keeps_serving() {
    // 0.8 of a 10 s lifetime that began 9 s ago: the renewal point has passed.
    let fake = FakeCsrApi::new(&[Behaviour::Issue(-9, 1), Behaviour::Issue(-60, 3600)]);
    let shutdown = CancellationToken::new();
    let tls = tls(&[TlsSource::Csr], None);
    let resolver = start(&tls, &fake, &shutdown).await.unwrap();
    eventually("a renewal request", || fake.created().len() == 2).await;
    eventually("the renewed certificate serves", || {
        let (_, key) = resolver.current().unwrap();
        let validity = Validity::of(&key.cert[0]).unwrap();
        validity.not_after.as_second() - validity.not_before.as_second() == 3660
    })
    .await;
    shutdown.cancel();
}

#[tokio::test]
async fn a_stored_certificate_is_reused_without_a_request() {
    let dir = tempfile::tempdir().unwrap();
    let fake = FakeCsrApi::new(&[]);
    let stored = fake.issued(&identity(), -60, 3600);
    CertStore::new(dir.path()).save(&stored).unwrap();
    fake.hold();

    let shutdown = CancellationToken::new();
    // csr alone: without the stored certificate this would wait for issuance.
    let tls = tls(&[TlsSource::Csr], Some(dir.path()));
    let resolver = tokio::time::timeout(Duration::from_secs(5), start(&tls, &fake, &shutdown))
        .await
        .unwrap()
        .unwrap();
    let (source, key) = resolver.current().unwrap();
    assert_eq!(source, TlsSource::Csr);
    assert_eq!(key.cert[0], stored.key.cert[0]);
    tokio::time::sleep(Duration::from_millis(100)).await;
    assert!(
        fake.created().is_empty(),
        "a valid stored certificate needs no request"
    );
    shutdown.cancel();
}

#[tokio::test]
async fn a_stored_certificate_past_its_renewal_point_serves_and_is_renewed_at_once() {
    let dir = tempfile::tempdir().unwrap();
    let fake = FakeCsrApi::new(&[Behaviour::Issue(-60, 3600)]);
    // 0.8 of 1000 s passed 10 s ago; 190 s of validity left.
    let stored = fake.issued(&identity(), -810, 190);
    CertStore::new(dir.path()).save(&stored).unwrap();
    fake.hold();

    let shutdown = CancellationToken::new();
    let tls = tls(&[TlsSource::Csr, TlsSource::SelfSigned], Some(dir.path()));
    let resolver = start(&tls, &fake, &shutdown).await.unwrap();
    assert_eq!(resolver.current().unwrap().1.cert[0], stored.key.cert[0]);
    eventually("a renewal request", || fake.created().len() == 1).await;
    // Still pending: the stored certificate keeps serving.
    assert_eq!(resolver.current().unwrap().1.cert[0], stored.key.cert[0]);
    fake.release();
    eventually("the renewed certificate serves", || {
        resolver.current().unwrap().1.cert[0] != stored.key.cert[0]
    })
    .await;
    shutdown.cancel();
}

#[tokio::test]
async fn an_expired_stored_certificate_is_not_reused() {
    let dir = tempfile::tempdir().unwrap();
    let fake = FakeCsrApi::new(&[]);
    CertStore::new(dir.path())
        .save(&fake.issued(&identity(), -100, -10))
        .unwrap();
    assert!(CertStore::new(dir.path()).load(Timestamp::now()).is_none());
}

#[tokio::test]
async fn csr_as_the_last_source_waits_for_issuance_or_shutdown() {
    let fake = FakeCsrApi::new(&[Behaviour::Issue(-60, 3600)]);
    fake.hold();
    let shutdown = CancellationToken::new();
    let tls = tls(&[TlsSource::Files, TlsSource::Csr], None);
    let waiting = start(&tls, &fake, &shutdown);
    tokio::pin!(waiting);
    assert!(
        tokio::time::timeout(Duration::from_millis(100), &mut waiting)
            .await
            .is_err(),
        "returned before the request was issued"
    );
    fake.release();
    let resolver = waiting.await.unwrap();
    assert_eq!(resolver.current().unwrap().0, TlsSource::Csr);
    shutdown.cancel();

    let fake = FakeCsrApi::new(&[]);
    fake.hold();
    let shutdown = CancellationToken::new();
    let tls = tls_only_csr();
    let waiting = tokio::spawn({
        let fake = fake.clone();
        let shutdown = shutdown.clone();
        async move { start(&tls, &fake, &shutdown).await.map(|_| ()) }
    });
    tokio::time::sleep(Duration::from_millis(50)).await;
    shutdown.cancel();
    let error = waiting.await.unwrap().unwrap_err();
    assert!(
        matches!(
            error,
            crate::kubelet_api::tls::TlsError::ShutdownBeforeIssued
        ),
        "{error}"
    );
}

fn tls_only_csr() -> ServingTlsConfig {
    tls(&[TlsSource::Csr], None)
}
