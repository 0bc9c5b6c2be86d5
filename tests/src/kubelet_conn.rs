//! Raw connections to orca's kubelet port, as a hostile or careless client makes them: TLS
//! handshakes that then send nothing, requests without credentials. The e2e of the connection
//! bounds and the flood bench both use them.

use std::sync::Arc;
use std::time::Duration;

use anyhow::{Context, Result};
use rustls::client::danger::{HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier};
use rustls::pki_types::{CertificateDer, ServerName, UnixTime};
use rustls::{DigitallySignedStruct, SignatureScheme};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio_rustls::TlsConnector;
use tokio_rustls::client::TlsStream;

/// Accepts any serving certificate, as `curl -k` does: the tests' orcas serve self-signed ones.
#[derive(Debug)]
struct AnyCertificate(Arc<rustls::crypto::CryptoProvider>);

impl ServerCertVerifier for AnyCertificate {
    fn verify_server_cert(
        &self,
        _end_entity: &CertificateDer<'_>,
        _intermediates: &[CertificateDer<'_>],
        _server_name: &ServerName<'_>,
        _ocsp_response: &[u8],
        _now: UnixTime,
    ) -> Result<ServerCertVerified, rustls::Error> {
        Ok(ServerCertVerified::assertion())
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls12_signature(
            message,
            cert,
            dss,
            &self.0.signature_verification_algorithms,
        )
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls13_signature(
            message,
            cert,
            dss,
            &self.0.signature_verification_algorithms,
        )
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.0.signature_verification_algorithms.supported_schemes()
    }
}

/// A TLS client for orca's kubelet port offering `alpn` (`http/1.1`, `h2`, or nothing).
pub fn connector(alpn: &[&[u8]]) -> TlsConnector {
    let provider = Arc::new(rustls::crypto::aws_lc_rs::default_provider());
    let mut config = rustls::ClientConfig::builder_with_provider(provider.clone())
        .with_safe_default_protocol_versions()
        .expect("aws-lc-rs supports the default TLS versions")
        .dangerous()
        .with_custom_certificate_verifier(Arc::new(AnyCertificate(provider)))
        .with_no_client_auth();
    config.alpn_protocols = alpn.iter().map(|protocol| protocol.to_vec()).collect();
    TlsConnector::from(Arc::new(config))
}

/// A TLS connection to 127.0.0.1:`port`, handshake done, nothing sent.
///
/// # Errors
/// The connection or the handshake failed (refused, or closed by orca at accept).
pub async fn open(connector: &TlsConnector, port: u16) -> Result<TlsStream<TcpStream>> {
    let tcp = TcpStream::connect(("127.0.0.1", port))
        .await
        .context("connecting")?;
    let name = ServerName::try_from("localhost").context("server name")?;
    tokio::time::timeout(Duration::from_secs(30), connector.connect(name, tcp))
        .await
        .context("TLS handshake timed out")?
        .context("TLS handshake")
}

/// Resolves once the peer has closed the connection (EOF, a TLS close, or an error), reading
/// and dropping anything it sends.
pub async fn closed_by_peer<S: tokio::io::AsyncRead + Unpin>(mut stream: S) {
    let mut buffer = [0u8; 1024];
    loop {
        match stream.read(&mut buffer).await {
            Ok(0) | Err(_) => return,
            Ok(_) => {}
        }
    }
}

/// One HTTP/1.1 `GET path` without credentials on `stream`, keeping the connection: the status
/// code of the answer. Reads the answer to its end (orca's refusals carry a Content-Length).
///
/// # Errors
/// The connection failed or closed before a whole answer.
pub async fn get_status<S>(stream: &mut S, path: &str) -> Result<u16>
where
    S: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin,
{
    let request = format!("GET {path} HTTP/1.1\r\nHost: orca\r\n\r\n");
    stream.write_all(request.as_bytes()).await?;
    let mut answer = Vec::new();
    let mut buffer = [0u8; 4096];
    loop {
        let read = stream.read(&mut buffer).await?;
        anyhow::ensure!(read > 0, "closed before a whole answer");
        answer.extend_from_slice(&buffer[..read]);
        let Some(end) = answer.windows(4).position(|w| w == b"\r\n\r\n") else {
            continue;
        };
        let head = String::from_utf8_lossy(&answer[..end]).into_owned();
        let length: usize = head
            .lines()
            .find_map(|line| {
                let (name, value) = line.split_once(':')?;
                name.eq_ignore_ascii_case("content-length")
                    .then(|| value.trim().parse().ok())?
            })
            .context("an answer without Content-Length")?;
        if answer.len() >= end + 4 + length {
            let status = head
                .split_whitespace()
                .nth(1)
                .and_then(|code| code.parse().ok())
                .context("status line")?;
            return Ok(status);
        }
    }
}
