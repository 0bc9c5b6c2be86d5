//! The `kubeletApi:` and `metrics:` sections: orca's two listeners.
//!
//! The kubelet API is HTTPS on `node.daemonPort` (the port the Node advertises), so the
//! apiserver can fetch logs from it. Metrics and health are plain HTTP on a separate port, so
//! probes and scrapers need no credentials.

use std::net::IpAddr;
use std::path::PathBuf;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::{ConfigError, Seconds};

/// The kubelet HTTPS API.
#[derive(Debug, Clone, Deserialize, Serialize, JsonSchema)]
#[serde(deny_unknown_fields, rename_all = "camelCase", default)]
pub struct KubeletApiConfig {
    /// The address to listen on; the port is `node.daemonPort`. Unset: the address the Node
    /// advertises (`node.internalIP`, else `$POD_IP`, else loopback), the one the apiserver
    /// is told to call, so no other interface is open to callers.
    pub bind_address: Option<IpAddr>,
    /// Where the serving certificate comes from.
    pub tls: ServingTlsConfig,
    /// PEM bundle of the CAs whose client certificates are accepted (the apiserver presents
    /// one for logs). Default: `client-ca-file` of the `kube-system/extension-apiserver-
    /// authentication` ConfigMap, which every apiserver publishes.
    pub client_ca_file: Option<PathBuf>,
    /// How long a TokenReview answer is reused.
    pub authentication_cache_ttl: Seconds,
    /// How long an allowing SubjectAccessReview answer is reused.
    pub authorization_allowed_ttl: Seconds,
    /// How long a denying SubjectAccessReview answer is reused.
    pub authorization_denied_ttl: Seconds,
    /// How often `kubectl logs -f` polls the provider for new lines.
    pub follow_poll_interval: Seconds,
    /// At most this many connections open at once, handshaking or served; more are closed as
    /// they are accepted.
    pub max_connections: usize,
    /// A TLS handshake that takes longer is dropped.
    pub handshake_timeout: Seconds,
    /// HTTP/1 request headers must have arrived this long after the connection began waiting
    /// for them: after the handshake, and again after each answer (hyper's own timeout).
    pub header_read_timeout: Seconds,
    /// A connection with no request in flight for this long is closed, whatever its protocol.
    /// A request streaming its answer (`kubectl logs -f`) is in flight until it ends.
    pub idle_timeout: Seconds,
    /// HTTP/2 connections are pinged this often; one whose ping goes unanswered for 20 s is
    /// dropped, with the streams it held.
    pub keep_alive_interval: Seconds,
}

impl Default for KubeletApiConfig {
    fn default() -> Self {
        // The kubelet's defaults for its webhook authentication and authorization caches.
        KubeletApiConfig {
            bind_address: None,
            tls: ServingTlsConfig::default(),
            client_ca_file: None,
            authentication_cache_ttl: Seconds::from_secs(120),
            authorization_allowed_ttl: Seconds::from_secs(300),
            authorization_denied_ttl: Seconds::from_secs(30),
            follow_poll_interval: Seconds::from_secs(2),
            max_connections: 1024,
            handshake_timeout: Seconds::from_secs(10),
            header_read_timeout: Seconds::from_secs(10),
            idle_timeout: Seconds::from_secs(60),
            keep_alive_interval: Seconds::from_secs(30),
        }
    }
}

/// Where the serving certificate comes from.
#[derive(Debug, Clone, Deserialize, Serialize, JsonSchema)]
#[serde(deny_unknown_fields, rename_all = "camelCase", default)]
pub struct ServingTlsConfig {
    /// Tried in order; the first that yields a certificate serves. `files` is skipped when
    /// `certFile`/`keyFile` are unset; `csr` serves the next source while its request waits
    /// for approval, then swaps in the issued certificate.
    pub sources: Vec<TlsSource>,
    /// PEM certificate chain and private key; re-read when they change (cert-manager, a
    /// mounted Secret).
    pub cert_file: Option<PathBuf>,
    /// The PEM private key of `certFile`; set both or neither.
    pub key_file: Option<PathBuf>,
    /// Where a certificate issued through the CSR API is kept, so a restart reuses it rather
    /// than asking for approval again. Unset: kept in memory only.
    pub cert_dir: Option<PathBuf>,
    /// Renew a CSR-issued certificate once this fraction of its lifetime has passed.
    pub renew_fraction: f64,
}

impl Default for ServingTlsConfig {
    fn default() -> Self {
        ServingTlsConfig {
            sources: vec![TlsSource::Files, TlsSource::Csr, TlsSource::SelfSigned],
            cert_file: None,
            key_file: None,
            cert_dir: None,
            renew_fraction: 0.8,
        }
    }
}

/// One place a serving certificate can come from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Deserialize, Serialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub enum TlsSource {
    /// `certFile` and `keyFile`.
    Files,
    /// A CertificateSigningRequest with signer `kubernetes.io/kubelet-serving`.
    Csr,
    /// Generated in memory at startup: the apiserver accepts it unless it is started with
    /// `--kubelet-certificate-authority`.
    SelfSigned,
}

/// The plain-HTTP listener for `/metrics`, `/healthz` and `/readyz`.
#[derive(Debug, Clone, Deserialize, Serialize, JsonSchema)]
#[serde(deny_unknown_fields, rename_all = "camelCase", default)]
pub struct MetricsConfig {
    /// The address to listen on; `0.0.0.0`: every interface.
    pub bind_address: IpAddr,
    /// The port; another than `node.daemonPort`, which serves the kubelet API.
    pub port: u16,
}

impl Default for MetricsConfig {
    fn default() -> Self {
        MetricsConfig {
            bind_address: IpAddr::from([0, 0, 0, 0]),
            port: 10255,
        }
    }
}

impl KubeletApiConfig {
    pub(super) fn validate(&self) -> Result<(), ConfigError> {
        let tls = &self.tls;
        if tls.sources.is_empty() {
            return Err(ConfigError::invalid(
                "kubeletApi.tls.sources",
                "[]",
                "at least one of files, csr, selfSigned",
            ));
        }
        for (index, source) in tls.sources.iter().enumerate() {
            if tls.sources[..index].contains(source) {
                return Err(ConfigError::invalid(
                    format!("kubeletApi.tls.sources[{index}]"),
                    format!("{source:?}"),
                    "each source at most once",
                ));
            }
        }
        match (&tls.cert_file, &tls.key_file) {
            (Some(_), None) => {
                return Err(ConfigError::invalid(
                    "kubeletApi.tls.keyFile",
                    "(unset)",
                    "a PEM private key file, since certFile is set",
                ));
            }
            (None, Some(_)) => {
                return Err(ConfigError::invalid(
                    "kubeletApi.tls.certFile",
                    "(unset)",
                    "a PEM certificate file, since keyFile is set",
                ));
            }
            _ => {}
        }
        if tls.cert_file.is_some() && !tls.sources.contains(&TlsSource::Files) {
            return Err(ConfigError::invalid(
                "kubeletApi.tls.sources",
                format!("{:?}", tls.sources),
                "a list including files, since certFile and keyFile are set",
            ));
        }
        if tls.sources == [TlsSource::Files] && tls.cert_file.is_none() {
            return Err(ConfigError::invalid(
                "kubeletApi.tls.certFile",
                "(unset)",
                "a PEM certificate file, since files is the only source",
            ));
        }
        if !(tls.renew_fraction > 0.0 && tls.renew_fraction < 1.0) {
            return Err(ConfigError::invalid(
                "kubeletApi.tls.renewFraction",
                tls.renew_fraction,
                "a fraction between 0 and 1, such as 0.8",
            ));
        }
        for (field, value, example) in [
            ("followPollInterval", self.follow_poll_interval, "2s"),
            ("handshakeTimeout", self.handshake_timeout, "10s"),
            ("headerReadTimeout", self.header_read_timeout, "10s"),
            ("idleTimeout", self.idle_timeout, "60s"),
            ("keepAliveInterval", self.keep_alive_interval, "30s"),
        ] {
            if value.get().is_zero() {
                return Err(ConfigError::invalid(
                    format!("kubeletApi.{field}"),
                    value,
                    &format!("a duration above zero, such as {example}"),
                ));
            }
        }
        if self.max_connections == 0 {
            return Err(ConfigError::invalid(
                "kubeletApi.maxConnections",
                0,
                "a number of connections above zero, such as 1024",
            ));
        }
        Ok(())
    }
}
