//! `policy.registry.verify`: whose signatures a pulled plugin must carry before it loads, and
//! `policy.registry.sigstoreTrustRoot`, what keyless signatures are checked against.

use std::path::PathBuf;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// One entry of `policy.registry.verify`: the references it covers and the signers it allows.
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize, Serialize, JsonSchema)]
#[serde(deny_unknown_fields, rename_all = "camelCase", default)]
pub struct VerifyRuleConfig {
    /// Globs on `oci://REGISTRY/REPOSITORY` (or the whole configured reference, tag
    /// included); `*` is any run of characters. Empty: every reference.
    pub references: Vec<String>,
    /// Cosign public keys (PEM files); a signature by any one of them is accepted.
    pub keys: Vec<PathBuf>,
    /// Keyless (Fulcio certificate) identities; a signature by any one is accepted.
    pub keyless: Vec<KeylessIdentityConfig>,
}

/// A keyless signer: the OIDC issuer that vouched for it and the subject (an email, or a URI
/// such as a GitHub workflow's) its certificate names.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize, Serialize, JsonSchema)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct KeylessIdentityConfig {
    /// The OIDC issuer, such as `https://token.actions.githubusercontent.com`.
    pub issuer: String,
    /// The subject the certificate names: an email, or a URI such as a GitHub workflow's.
    pub subject: String,
}

/// The Sigstore instance keyless signatures come from: its Fulcio CA certificates and its
/// Rekor public keys, as files (orca fetches no trust root at run time).
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize, Serialize, JsonSchema)]
#[serde(deny_unknown_fields, rename_all = "camelCase", default)]
pub struct SigstoreTrustRootConfig {
    /// PEM files of Fulcio's root and intermediate certificates.
    pub fulcio_certs: Vec<PathBuf>,
    /// PEM files of Rekor's public keys.
    pub rekor_keys: Vec<PathBuf>,
}
