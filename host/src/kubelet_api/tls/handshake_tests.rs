//! Real TLS handshakes against the config [`build`](super::build) returns: which clients get
//! in and what identity a client certificate yields.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use rcgen::{
    BasicConstraints, CertificateParams, DnType, ExtendedKeyUsagePurpose, IsCa, Issuer, KeyPair,
    KeyUsagePurpose,
};
use rustls::pki_types::{ServerName, UnixTime};
use rustls::server::danger::ClientCertVerifier;
use tokio_rustls::{TlsAcceptor, TlsConnector};
use tokio_util::sync::CancellationToken;

use super::client_ca::ClientCaSource;
use super::csr::CsrTiming;
use super::csr::api::{CsrApi, CsrApiError, CsrOutcome};
use super::sources::SourceDeps;
use super::verifier::SwappableClientVerifier;
use super::*;
use crate::config::{KubeletApiConfig, TlsSource};

/// The CSR API is not used by these tests; any call is refused.
struct NoCsrApi;

#[async_trait::async_trait]
impl CsrApi for NoCsrApi {
    async fn create(
        &self,
        _request: &k8s_openapi::api::certificates::v1::CertificateSigningRequest,
    ) -> Result<String, CsrApiError> {
        Err(CsrApiError::Forbidden {
            verb: "create",
            message: "not in this test".to_owned(),
        })
    }

    async fn wait(&self, name: &str) -> Result<CsrOutcome, CsrApiError> {
        Err(CsrApiError::Gone {
            name: name.to_owned(),
        })
    }
}

struct TestCa {
    issuer: Issuer<'static, KeyPair>,
    pem: String,
}

impl TestCa {
    fn new(name: &str) -> Self {
        let mut params = CertificateParams::default();
        params.distinguished_name = rcgen::DistinguishedName::new();
        params.distinguished_name.push(DnType::CommonName, name);
        params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        params.key_usages = vec![KeyUsagePurpose::KeyCertSign];
        let key = KeyPair::generate().unwrap();
        let pem = params.self_signed(&key).unwrap().pem();
        TestCa {
            issuer: Issuer::new(params, key),
            pem,
        }
    }

    /// A leaf signed by this CA: (certificate PEM, key PEM).
    fn leaf(&self, params: CertificateParams) -> (String, String) {
        let key = KeyPair::generate().unwrap();
        let cert = params.signed_by(&key, &self.issuer).unwrap();
        (cert.pem(), key.serialize_pem())
    }

    fn client(&self, user: &str, group: &str) -> (String, String) {
        let mut params = CertificateParams::default();
        params.distinguished_name = rcgen::DistinguishedName::new();
        params.distinguished_name.push(DnType::CommonName, user);
        params
            .distinguished_name
            .push(DnType::OrganizationName, group);
        params.extended_key_usages = vec![ExtendedKeyUsagePurpose::ClientAuth];
        self.leaf(params)
    }
}

fn write(dir: &Path, name: &str, contents: &str) -> PathBuf {
    let path = dir.join(name);
    std::fs::write(&path, contents).unwrap();
    path
}

/// A server config serving a certificate for `orca-node` from `server_ca`, accepting client
/// certificates from `client_ca`.
async fn server(
    dir: &Path,
    server_ca: &TestCa,
    client_ca: &TestCa,
    shutdown: &CancellationToken,
) -> Arc<rustls::ServerConfig> {
    let (cert, key) = server_ca.leaf(CertificateParams::new(vec!["orca-node".to_owned()]).unwrap());
    let mut config = KubeletApiConfig::default();
    config.tls.sources = vec![TlsSource::Files, TlsSource::SelfSigned];
    config.tls.cert_file = Some(write(dir, "tls.crt", &cert));
    config.tls.key_file = Some(write(dir, "tls.key", &key));
    let client_ca_file = write(dir, "client-ca.pem", &client_ca.pem);
    let deps = SourceDeps {
        csr_api: Arc::new(NoCsrApi),
        file_poll: Duration::from_secs(60),
        csr_timing: CsrTiming::default(),
    };
    let identity = ServingIdentity {
        node_name: "orca-node".to_owned(),
        addresses: vec![],
        hostnames: vec![],
    };
    build(
        &config,
        ClientCaSource::File(client_ca_file),
        deps,
        identity,
        shutdown.clone(),
    )
    .await
    .unwrap()
}

fn client(server_ca: &TestCa, certificate: Option<&(String, String)>) -> TlsConnector {
    let mut roots = rustls::RootCertStore::empty();
    for ca in pem::certificates(server_ca.pem.as_bytes()).unwrap() {
        roots.add(ca).unwrap();
    }
    let builder = rustls::ClientConfig::builder_with_provider(pem::provider())
        .with_safe_default_protocol_versions()
        .unwrap()
        .with_root_certificates(roots);
    let mut config = match certificate {
        None => builder.with_no_client_auth(),
        Some((cert, key)) => builder
            .with_client_auth_cert(
                pem::certificates(cert.as_bytes()).unwrap(),
                pem::private_key(key.as_bytes()).unwrap(),
            )
            .unwrap(),
    };
    config.alpn_protocols = vec![b"h2".to_vec()];
    TlsConnector::from(Arc::new(config))
}

/// Runs one handshake; the server side's outcome: the client identity and ALPN protocol.
async fn handshake(
    server: Arc<rustls::ServerConfig>,
    client: TlsConnector,
) -> Result<(Option<CertIdentity>, Option<Vec<u8>>), std::io::Error> {
    let (client_io, server_io) = tokio::io::duplex(64 * 1024);
    let name = ServerName::try_from("orca-node").unwrap();
    let (accepted, _connected) = tokio::join!(
        TlsAcceptor::from(server).accept(server_io),
        client.connect(name, client_io)
    );
    let stream = accepted?;
    let connection = stream.get_ref().1;
    Ok((
        client_identity(connection),
        connection.alpn_protocol().map(<[u8]>::to_vec),
    ))
}

#[tokio::test]
async fn anonymous_clients_get_in_and_client_certificates_from_the_client_ca_carry_cn_and_o() {
    let dir = tempfile::tempdir().unwrap();
    let (server_ca, client_ca, other_ca) = (
        TestCa::new("server CA"),
        TestCa::new("client CA"),
        TestCa::new("another CA"),
    );
    let shutdown = CancellationToken::new();
    let config = server(dir.path(), &server_ca, &client_ca, &shutdown).await;

    let (identity, alpn) = handshake(config.clone(), client(&server_ca, None))
        .await
        .unwrap();
    assert_eq!(identity, None);
    assert_eq!(alpn.as_deref(), Some(&b"h2"[..]));

    let apiserver = client_ca.client("kube-apiserver-kubelet-client", "system:masters");
    let (identity, _) = handshake(config.clone(), client(&server_ca, Some(&apiserver)))
        .await
        .unwrap();
    assert_eq!(
        identity,
        Some(CertIdentity {
            user: "kube-apiserver-kubelet-client".to_owned(),
            groups: vec!["system:masters".to_owned()],
        })
    );

    let stranger = other_ca.client("system:admin", "system:masters");
    let refused = handshake(config, client(&server_ca, Some(&stranger))).await;
    assert!(
        refused.is_err(),
        "a certificate from another CA was accepted"
    );
    shutdown.cancel();
}

#[test]
fn without_a_client_ca_no_client_auth_is_offered_and_any_certificate_is_refused() {
    let verifier = SwappableClientVerifier::new();
    assert!(!verifier.offer_client_auth());
    assert!(!verifier.client_auth_mandatory());
    assert!(verifier.root_hint_subjects().is_empty());

    let ca = TestCa::new("client CA");
    let (cert, _) = ca.client("someone", "group");
    let leaf = pem::certificates(cert.as_bytes()).unwrap().remove(0);
    assert!(
        verifier
            .verify_client_cert(&leaf, &[], UnixTime::now())
            .is_err()
    );

    let bundle = pem::certificates(ca.pem.as_bytes()).unwrap();
    verifier.set_ca(Some(&bundle)).unwrap();
    assert!(verifier.offer_client_auth());
    assert!(!verifier.client_auth_mandatory());
    assert!(
        verifier
            .verify_client_cert(&leaf, &[], UnixTime::now())
            .is_ok()
    );

    verifier.set_ca(None).unwrap();
    assert!(
        verifier
            .verify_client_cert(&leaf, &[], UnixTime::now())
            .is_err()
    );
}

#[tokio::test]
async fn alpn_offers_h2_then_http1_and_no_yielding_source_is_an_error_naming_the_sources() {
    let shutdown = CancellationToken::new();
    let dir = tempfile::tempdir().unwrap();
    let ca = TestCa::new("client CA");
    let mut config = KubeletApiConfig::default();
    config.tls.sources = vec![TlsSource::Files, TlsSource::SelfSigned];
    let deps = SourceDeps {
        csr_api: Arc::new(NoCsrApi),
        file_poll: Duration::from_secs(60),
        csr_timing: CsrTiming::default(),
    };
    let identity = ServingIdentity {
        node_name: "orca-node".to_owned(),
        addresses: vec!["127.0.0.1".parse().unwrap()],
        hostnames: vec![],
    };
    let client_ca = ClientCaSource::File(write(dir.path(), "ca.pem", &ca.pem));
    let server = build(&config, client_ca, deps, identity, shutdown.clone())
        .await
        .unwrap();
    assert_eq!(
        server.alpn_protocols,
        [b"h2".to_vec(), b"http/1.1".to_vec()]
    );

    // files without certFile/keyFile is skipped, leaving nothing to serve.
    config.tls.sources = vec![TlsSource::Files];
    let deps = SourceDeps {
        csr_api: Arc::new(NoCsrApi),
        file_poll: Duration::from_secs(60),
        csr_timing: CsrTiming::default(),
    };
    let identity = ServingIdentity {
        node_name: "orca-node".to_owned(),
        addresses: vec![],
        hostnames: vec![],
    };
    let client_ca = ClientCaSource::File(write(dir.path(), "ca.pem", &ca.pem));
    let error = build(&config, client_ca, deps, identity, shutdown.clone())
        .await
        .unwrap_err()
        .to_string();
    assert!(
        error.starts_with("kubeletApi.tls.sources [Files]: no source"),
        "{error}"
    );
    shutdown.cancel();
}
