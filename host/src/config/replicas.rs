//! The `replicas:` section: several orca processes sharing the declared nodes through one
//! coordination Lease per node, so a replica that dies loses its nodes to the others.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::node::{is_dns_label, is_dns_subdomain};
use super::{ConfigError, Seconds};
use crate::replicas::STOP_BEFORE_EXPIRY;

/// The Lease of a node in `replicas.namespace` is named `orca-node-<node name>`.
pub const LEASE_PREFIX: &str = "orca-node-";

/// Several orca processes sharing the declared nodes through one coordination Lease per
/// node, `orca-node-<node>`.
#[derive(Debug, Clone, Deserialize, Serialize, JsonSchema)]
#[serde(deny_unknown_fields, rename_all = "camelCase", default)]
pub struct ReplicasConfig {
    /// Off: this process serves every declared node (one replica). On: it serves the nodes
    /// whose Lease it holds, and takes over any whose Lease another replica stopped renewing.
    pub share_nodes: bool,
    /// Where the Leases live. Default: `$POD_NAMESPACE`, else `orca-system`.
    pub namespace: Option<String>,
    /// This replica's name in the Leases' `holderIdentity`. Default: `$POD_NAME`, else the
    /// host name, else a random name.
    pub identity: Option<String>,
    /// How long a Lease stays held without renewal: the longest a dead replica's nodes go
    /// unserved. Whole seconds.
    pub lease_duration: Seconds,
    /// How long before expiry the holder renews; the rest of `leaseDuration` is the time a
    /// renewal may take before the holder stops serving on its own. Whole seconds.
    pub renew_before: Seconds,
}

impl Default for ReplicasConfig {
    fn default() -> Self {
        ReplicasConfig {
            share_nodes: false,
            namespace: None,
            identity: None,
            lease_duration: Seconds::from_secs(8),
            renew_before: Seconds::from_secs(5),
        }
    }
}

impl ReplicasConfig {
    /// The namespace of the Leases.
    pub fn namespace(&self) -> String {
        self.namespace
            .clone()
            .or_else(|| {
                std::env::var("POD_NAMESPACE")
                    .ok()
                    .filter(|n| !n.is_empty())
            })
            .unwrap_or_else(|| "orca-system".to_owned())
    }

    /// This replica's identity.
    pub fn identity(&self) -> String {
        self.identity
            .clone()
            .or_else(|| std::env::var("POD_NAME").ok().filter(|n| !n.is_empty()))
            .or_else(|| {
                std::fs::read_to_string("/proc/sys/kernel/hostname")
                    .ok()
                    .map(|name| name.trim().to_owned())
                    .filter(|name| !name.is_empty())
            })
            .unwrap_or_else(|| {
                use std::hash::{BuildHasher, Hasher};
                let random = std::collections::hash_map::RandomState::new()
                    .build_hasher()
                    .finish();
                format!("orca-{random:016x}")
            })
    }

    /// The Lease name of `node`.
    pub fn lease_name(node: &str) -> String {
        format!("{LEASE_PREFIX}{node}")
    }

    pub(super) fn validate(&self, node_names: &[&str]) -> Result<(), ConfigError> {
        let whole = |value: Seconds| value.get().subsec_nanos() == 0;
        if !whole(self.lease_duration) || self.lease_duration.get().as_secs() < 4 {
            return Err(ConfigError::invalid(
                "replicas.leaseDuration",
                self.lease_duration,
                "whole seconds, at least 4s",
            ));
        }
        // The holder stops serving STOP_BEFORE_EXPIRY before expiry; its renewal must come
        // before that, with a second to spare for the call itself.
        let least = STOP_BEFORE_EXPIRY.as_secs() + 1;
        if !whole(self.renew_before)
            || self.renew_before.get().as_secs() < least
            || self.renew_before >= self.lease_duration
        {
            return Err(ConfigError::invalid(
                "replicas.renewBefore",
                self.renew_before,
                &format!(
                    "whole seconds, at least {least}s (a holder stops serving {}s before its \
                     Lease expires, and must have renewed by then) and shorter than \
                     replicas.leaseDuration ({})",
                    STOP_BEFORE_EXPIRY.as_secs(),
                    self.lease_duration
                ),
            ));
        }
        if let Some(namespace) = &self.namespace
            && !is_dns_label(namespace)
        {
            return Err(ConfigError::invalid(
                "replicas.namespace",
                namespace,
                "a namespace name: lowercase letters, digits and '-', at most 63 characters",
            ));
        }
        if let Some(identity) = &self.identity
            && identity.is_empty()
        {
            return Err(ConfigError::invalid(
                "replicas.identity",
                identity,
                "a non-empty name",
            ));
        }
        if self.share_nodes {
            for node in node_names {
                let lease = Self::lease_name(node);
                if !is_dns_subdomain(&lease) {
                    return Err(ConfigError::invalid(
                        "replicas.shareNodes",
                        node,
                        &format!(
                            "node names whose Lease name {LEASE_PREFIX}<name> is at most 253 characters"
                        ),
                    ));
                }
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use crate::config::Config;

    #[test]
    fn sharing_is_off_by_default_with_an_eight_second_lease() {
        let config = Config::parse("").unwrap();
        assert!(!config.replicas.share_nodes);
        assert_eq!(config.replicas.lease_duration.get().as_secs(), 8);
        assert_eq!(
            super::ReplicasConfig::lease_name("orca-a"),
            "orca-node-orca-a"
        );
    }

    #[test]
    fn bad_settings_name_the_field() {
        for (text, field) in [
            (
                "replicas:\n  leaseDuration: 1500ms\n",
                "replicas.leaseDuration",
            ),
            ("replicas:\n  renewBefore: 10s\n", "replicas.renewBefore"),
            ("replicas:\n  renewBefore: 0s\n", "replicas.renewBefore"),
            ("replicas:\n  renewBefore: 2s\n", "replicas.renewBefore"),
            ("replicas:\n  leaseDuration: 3s\n", "replicas.leaseDuration"),
            ("replicas:\n  namespace: Orca\n", "replicas.namespace"),
            ("replicas:\n  identity: \"\"\n", "replicas.identity"),
        ] {
            let error = Config::parse(text).unwrap_err().to_string();
            assert!(error.contains(field), "{text}: {error}");
        }
    }
}
