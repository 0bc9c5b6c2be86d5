//! Who may have built a pulled plugin: `policy.registry.verify` as a [`TrustPolicy`], and the
//! pure judgement of the cosign signatures found for one manifest digest against it.
//!
//! Signatures are read and checked by the `sigstore` crate (what Kubewarden verifies policies
//! with): its cosign client finds the signature layers of a digest (the `.sig` tag, and
//! Sigstore bundles among the OCI referrers), keeps only layers that are signatures of that
//! digest, and trusts a layer's certificate only when it chains to the configured Fulcio
//! certificates with a Rekor entry signed by a configured Rekor key. [`judge`] then asks which
//! allowed signer, if any, made one of them.

use std::collections::BTreeMap;
use std::fmt;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};
use sigstore::cosign::SignatureLayer;
use sigstore::cosign::verification_constraint::cert_subject_email_verifier::StringVerifier;
use sigstore::cosign::verification_constraint::{
    CertSubjectEmailVerifier, CertSubjectUrlVerifier, PublicKeyVerifier, VerificationConstraint,
};
use sigstore::crypto::Signature;

use super::reference::PluginReference;
use crate::config::{
    ConfigError, KeylessIdentityConfig, RegistryConfig, SigstoreTrustRootConfig, VerifyRuleConfig,
};
use crate::policy::wasm::sha256_hex;

/// Who signed a plugin version, as decisions, Events and `orca plugin check` name it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", tag = "kind")]
pub enum Signer {
    /// A cosign key pair, by the sha256 of its public key (DER SubjectPublicKeyInfo).
    Key { fingerprint: String },
    /// A Fulcio certificate naming `subject`, vouched for by `issuer`.
    Keyless { issuer: String, subject: String },
}

impl fmt::Display for Signer {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Signer::Key { fingerprint } => write!(f, "key {fingerprint}"),
            Signer::Keyless { issuer, subject } => {
                write!(f, "keyless {subject} (issuer {issuer})")
            }
        }
    }
}

/// Why a pulled version is refused; the version serving keeps serving. Each names what was
/// expected (the allowed signers) and what was found.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SignatureError {
    #[error("no cosign signature of {digest}; expected one by {expected}")]
    Missing { digest: String, expected: String },
    #[error(
        "a cosign signature manifest for {digest} is there, but none of its layers is a valid signature of that digest; expected one by {expected}"
    )]
    Invalid { digest: String, expected: String },
    #[error("{digest} is signed, but not by an allowed signer: found {found}; expected {expected}")]
    SignerNotAllowed {
        digest: String,
        expected: String,
        found: String,
    },
    #[error("looking up the signatures of {digest} failed: {error}")]
    Unreachable { digest: String, error: String },
}

/// Whether the `.sig` tag cosign signs to is in the repository.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SignatureManifest {
    Absent,
    Present,
}

/// An allowed cosign public key.
#[derive(Debug)]
struct AllowedKey {
    path: PathBuf,
    fingerprint: String,
    verifier: PublicKeyVerifier,
}

/// One `verify` entry, its keys read and parsed.
#[derive(Debug)]
pub struct TrustRule {
    references: Vec<glob::Pattern>,
    keys: Vec<AllowedKey>,
    identities: Vec<KeylessIdentityConfig>,
}

/// The Fulcio certificates (DER) and Rekor keys (DER, by log id) keyless signatures are
/// checked against.
#[derive(Debug, Default)]
pub struct TrustRoot {
    pub fulcio_certs: Vec<Vec<u8>>,
    pub rekor_keys: BTreeMap<String, Vec<u8>>,
}

/// `policy.registry.verify`, read and parsed.
#[derive(Debug, Default)]
pub struct TrustPolicy {
    rules: Vec<TrustRule>,
    trust_root: Option<TrustRoot>,
}

impl TrustPolicy {
    /// Reads the keys and certificates `config` names.
    ///
    /// # Errors
    /// [`ConfigError`] naming the field and value that cannot be used.
    pub fn from_config(config: &RegistryConfig) -> Result<TrustPolicy, ConfigError> {
        Self::build(
            &config.verify,
            config.sigstore_trust_root.as_ref(),
            "policy.registry.verify",
        )
    }

    /// A policy of one rule over every reference allowing the keys in `keys` (`orca plugin
    /// check --key`).
    ///
    /// # Errors
    /// [`ConfigError`] naming the key that cannot be used.
    pub fn keys(keys: &[PathBuf]) -> Result<TrustPolicy, ConfigError> {
        let rule = VerifyRuleConfig {
            references: Vec::new(),
            keys: keys.to_vec(),
            keyless: Vec::new(),
        };
        Self::build(std::slice::from_ref(&rule), None, "--key")
    }

    fn build(
        rules: &[VerifyRuleConfig],
        trust_root: Option<&SigstoreTrustRootConfig>,
        field: &str,
    ) -> Result<TrustPolicy, ConfigError> {
        let mut built = Vec::new();
        for (index, rule) in rules.iter().enumerate() {
            let field = format!("{field}[{index}]");
            if rule.keys.is_empty() && rule.keyless.is_empty() {
                return Err(ConfigError::invalid(
                    &field,
                    "no keys and no keyless identities",
                    "at least one cosign public key (keys) or keyless identity (keyless: {issuer, subject})",
                ));
            }
            let mut references = Vec::new();
            for (i, text) in rule.references.iter().enumerate() {
                let pattern = glob::Pattern::new(text)
                    .ok()
                    .filter(|_| text.starts_with("oci://"));
                match pattern {
                    Some(pattern) => references.push(pattern),
                    None => {
                        return Err(ConfigError::invalid(
                            format!("{field}.references[{i}]"),
                            text,
                            "a glob on oci://REGISTRY/REPOSITORY, such as oci://registry.example.com/team/*",
                        ));
                    }
                }
            }
            let mut keys = Vec::new();
            for (i, path) in rule.keys.iter().enumerate() {
                let key = read_key(path).map_err(|error| {
                    ConfigError::invalid(
                        format!("{field}.keys[{i}]"),
                        path.display(),
                        &format!("a cosign public key PEM file ({error})"),
                    )
                })?;
                keys.push(key);
            }
            for (i, identity) in rule.keyless.iter().enumerate() {
                if identity.issuer.trim().is_empty() || identity.subject.trim().is_empty() {
                    return Err(ConfigError::invalid(
                        format!("{field}.keyless[{i}]"),
                        format!("{identity:?}"),
                        "an issuer and a subject, such as {issuer: https://token.actions.githubusercontent.com, subject: https://github.com/org/repo/.github/workflows/release.yml@refs/heads/main}",
                    ));
                }
            }
            built.push(TrustRule {
                references,
                keys,
                identities: rule.keyless.clone(),
            });
        }
        let keyless = built.iter().any(|rule| !rule.identities.is_empty());
        let trust_root = match (keyless, trust_root) {
            (false, _) => None,
            (true, None) => {
                return Err(ConfigError::invalid(
                    "policy.registry.sigstoreTrustRoot",
                    "absent",
                    "the Fulcio certificates and Rekor keys keyless signatures are checked against (fulcioCerts, rekorKeys), since verify names keyless identities",
                ));
            }
            (true, Some(config)) => Some(read_trust_root(config)?),
        };
        Ok(TrustPolicy {
            rules: built,
            trust_root,
        })
    }

    /// Whether no reference needs a signature.
    pub fn is_empty(&self) -> bool {
        self.rules.is_empty()
    }

    /// The rule that applies to `plugin`: the first whose references match it (none: every
    /// reference). `None`: it loads unsigned.
    pub fn rule_for(&self, plugin: &PluginReference) -> Option<&TrustRule> {
        let repository = format!(
            "oci://{}/{}",
            plugin.reference.registry(),
            plugin.reference.repository()
        );
        self.rules.iter().find(|rule| {
            rule.references.is_empty()
                || rule
                    .references
                    .iter()
                    .any(|p| p.matches(&repository) || p.matches(&plugin.text))
        })
    }

    /// Whether `signer` still satisfies the rule for `plugin` (a version verified before,
    /// kept on disk, under the policy of now); true when no rule applies.
    pub fn still_allows(&self, plugin: &PluginReference, signer: Option<&Signer>) -> bool {
        let Some(rule) = self.rule_for(plugin) else {
            return true;
        };
        match signer {
            None => false,
            Some(Signer::Key { fingerprint }) => {
                rule.keys.iter().any(|key| &key.fingerprint == fingerprint)
            }
            Some(Signer::Keyless { issuer, subject }) => rule
                .identities
                .iter()
                .any(|id| &id.issuer == issuer && &id.subject == subject),
        }
    }

    pub fn trust_root(&self) -> Option<&TrustRoot> {
        self.trust_root.as_ref()
    }
}

impl TrustRule {
    /// The allowed signers, for messages: `key /etc/orca/cosign.pub (sha256:…)`, …
    pub fn expected(&self) -> String {
        let mut all: Vec<String> = self
            .keys
            .iter()
            .map(|key| format!("key {} ({})", key.path.display(), key.fingerprint))
            .chain(
                self.identities
                    .iter()
                    .map(|id| format!("keyless {} (issuer {})", id.subject, id.issuer)),
            )
            .collect();
        // Events carry 1 KiB: a long list is cut, the count kept.
        if all.len() > 3 {
            let more = all.len() - 3;
            all.truncate(3);
            all.push(format!("{more} more"));
        }
        all.join(" or ")
    }
}

/// Which allowed signer made one of `layers` (the signature layers the sigstore client found
/// for `digest` and kept as signatures of it); when none did, why the version is refused.
///
/// # Errors
/// [`SignatureError::Missing`], [`SignatureError::Invalid`] or
/// [`SignatureError::SignerNotAllowed`].
pub fn judge(
    rule: &TrustRule,
    digest: &str,
    layers: &[SignatureLayer],
    manifest: SignatureManifest,
) -> Result<Signer, SignatureError> {
    for layer in layers {
        if let Some(signer) = allowed_signer(rule, layer) {
            return Ok(signer);
        }
    }
    let expected = rule.expected();
    let digest = digest.to_owned();
    if layers.is_empty() {
        return Err(match manifest {
            SignatureManifest::Absent => SignatureError::Missing { digest, expected },
            SignatureManifest::Present => SignatureError::Invalid { digest, expected },
        });
    }
    let found: Vec<String> = layers.iter().map(describe).collect();
    Err(SignatureError::SignerNotAllowed {
        digest,
        expected,
        found: found.join("; "),
    })
}

fn allowed_signer(rule: &TrustRule, layer: &SignatureLayer) -> Option<Signer> {
    // A constraint that cannot be evaluated is not met.
    let met = |constraint: &dyn VerificationConstraint| constraint.verify(layer).unwrap_or(false);
    if let Some(key) = rule.keys.iter().find(|key| met(&key.verifier)) {
        return Some(Signer::Key {
            fingerprint: key.fingerprint.clone(),
        });
    }
    // The crate sets a certificate only once it chains to the trust root; its subject and
    // issuer are then compared, and the signature checked against the certificate's key.
    let certificate = layer.certificate_signature.as_ref()?;
    let signed_by_certificate = layer.signature.as_ref().is_some_and(|signature| {
        certificate
            .verification_key
            .verify_signature(
                Signature::Base64Encoded(signature.as_bytes()),
                &layer.raw_data,
            )
            .is_ok()
    });
    if !signed_by_certificate {
        return None;
    }
    rule.identities
        .iter()
        .find(|id| {
            met(&CertSubjectUrlVerifier {
                url: id.subject.clone(),
                issuer: id.issuer.clone(),
            }) || met(&CertSubjectEmailVerifier {
                email: StringVerifier::ExactMatch(id.subject.clone()),
                issuer: Some(StringVerifier::ExactMatch(id.issuer.clone())),
            })
        })
        .map(|id| Signer::Keyless {
            issuer: id.issuer.clone(),
            subject: id.subject.clone(),
        })
}

/// What one refused signature layer is, for the message.
fn describe(layer: &SignatureLayer) -> String {
    match &layer.certificate_signature {
        Some(certificate) => {
            let subject = match &certificate.subject {
                sigstore::cosign::signature_layers::CertificateSubject::Email(s)
                | sigstore::cosign::signature_layers::CertificateSubject::Uri(s) => s.as_str(),
            };
            format!(
                "keyless {subject} (issuer {})",
                certificate.issuer.as_deref().unwrap_or("none")
            )
        }
        None => "a signature no allowed key verifies".to_owned(),
    }
}

/// Why a public key's PEM file could not be used.
#[derive(Debug, thiserror::Error)]
enum KeyFileError {
    #[error("reading it: {0}")]
    ReadFailed(#[source] std::io::Error),
    #[error("{0}")]
    NotAKey(#[source] sigstore::errors::SigstoreError),
    #[error("not PEM: {0}")]
    NotPem(#[source] x509_parser::nom::Err<x509_parser::error::PEMError>),
}

fn read_key(path: &Path) -> Result<AllowedKey, KeyFileError> {
    let pem = std::fs::read(path).map_err(KeyFileError::ReadFailed)?;
    let verifier = PublicKeyVerifier::try_from(&pem).map_err(KeyFileError::NotAKey)?;
    let der = pem_contents(&pem)?;
    Ok(AllowedKey {
        path: path.to_path_buf(),
        fingerprint: fingerprint(&der),
        verifier,
    })
}

/// How a public key is named: `sha256:` and the hex sha256 of its DER.
pub fn fingerprint(der: &[u8]) -> String {
    format!("sha256:{}", sha256_hex(der))
}

/// The first PEM block's contents.
fn pem_contents(pem: &[u8]) -> Result<Vec<u8>, KeyFileError> {
    let (_, block) = x509_parser::pem::parse_x509_pem(pem).map_err(KeyFileError::NotPem)?;
    Ok(block.contents)
}

fn read_trust_root(config: &SigstoreTrustRootConfig) -> Result<TrustRoot, ConfigError> {
    let field = "policy.registry.sigstoreTrustRoot";
    if config.fulcio_certs.is_empty() || config.rekor_keys.is_empty() {
        return Err(ConfigError::invalid(
            field,
            format!(
                "{} Fulcio certificates, {} Rekor keys",
                config.fulcio_certs.len(),
                config.rekor_keys.len()
            ),
            "at least one of each (fulcioCerts, rekorKeys: PEM files)",
        ));
    }
    let mut root = TrustRoot::default();
    for (i, path) in config.fulcio_certs.iter().enumerate() {
        // Why a file is refused is not told: the field's expectation says it.
        let der = std::fs::read(path).ok().and_then(|pem| {
            x509_parser::pem::Pem::iter_from_buffer(&pem)
                .map(|block| {
                    let block = block.ok()?;
                    block.parse_x509().ok()?;
                    Some(block.contents)
                })
                .collect::<Option<Vec<_>>>()
        });
        match der {
            Some(blocks) if !blocks.is_empty() => root.fulcio_certs.extend(blocks),
            Some(_) | None => {
                return Err(ConfigError::invalid(
                    format!("{field}.fulcioCerts[{i}]"),
                    path.display(),
                    "a readable PEM file of X.509 certificates",
                ));
            }
        }
    }
    for (i, path) in config.rekor_keys.iter().enumerate() {
        let der = std::fs::read(path)
            .map_err(|error| error.to_string())
            .and_then(|pem| pem_contents(&pem).map_err(|error| error.to_string()));
        match der {
            // Rekor names the key that signed an entry by the sha256 of its DER.
            Ok(der) => {
                root.rekor_keys.insert(sha256_hex(&der), der);
            }
            Err(error) => {
                return Err(ConfigError::invalid(
                    format!("{field}.rekorKeys[{i}]"),
                    path.display(),
                    &format!("a readable PEM public key ({error})"),
                ));
            }
        }
    }
    Ok(root)
}

#[cfg(test)]
mod tests;
