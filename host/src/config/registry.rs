//! `policy.registry`: how plugins are pulled from OCI registries, and whose signatures they
//! must carry.

use std::path::PathBuf;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::Seconds;
use super::quantity_field::{QuantityString, quantity_bytes};
use super::verify::{SigstoreTrustRootConfig, VerifyRuleConfig};

/// How plugins are pulled from OCI registries.
#[derive(Debug, Clone, Deserialize, Serialize, JsonSchema)]
#[serde(deny_unknown_fields, rename_all = "camelCase", default)]
pub struct RegistryConfig {
    /// How often tags are resolved again.
    pub refresh_interval: Seconds,
    /// Registry credentials in Docker's config.json format: a mounted
    /// `kubernetes.io/dockerconfigjson` Secret's `.dockerconfigjson`. Read at every pull, so a
    /// rotated Secret is used without a restart. Absent: anonymous pulls.
    pub docker_config: Option<PathBuf>,
    /// PEM certificates trusted besides the system's, for a registry with a private CA.
    pub ca_file: Option<PathBuf>,
    /// Whose cosign signatures a pulled plugin must carry, per reference (the first entry
    /// covering a reference applies); a reference no entry covers loads unsigned.
    pub verify: Vec<VerifyRuleConfig>,
    /// What keyless signatures are checked against; required by any `keyless` entry.
    pub sigstore_trust_root: Option<SigstoreTrustRootConfig>,
    /// The largest component pulled (a Kubernetes quantity): a manifest declaring more is
    /// refused, and a download stops at the smaller of this and the size declared.
    #[schemars(with = "QuantityString")]
    pub max_component_size: String,
    /// The longest a registry may send nothing (while connecting, or in the middle of an
    /// answer) before the pull is given up.
    pub stall_timeout: Seconds,
    /// The longest one reference's resolve and pull may take together; the version serving
    /// keeps serving meanwhile, and other references are pulled on their own.
    pub pull_timeout: Seconds,
}

impl Default for RegistryConfig {
    fn default() -> Self {
        RegistryConfig {
            refresh_interval: Seconds::from_secs(60),
            docker_config: None,
            ca_file: None,
            verify: Vec::new(),
            sigstore_trust_root: None,
            max_component_size: "256Mi".to_owned(),
            stall_timeout: Seconds::from_secs(30),
            pull_timeout: Seconds::from_secs(300),
        }
    }
}

impl RegistryConfig {
    /// `maxComponentSize` in bytes (once validated).
    pub fn max_component_bytes(&self) -> u64 {
        quantity_bytes(&self.max_component_size).map_or(0, |bytes| bytes as u64)
    }
}
