//! The `node:` section: how the virtual node presents itself to Kubernetes.

use std::collections::BTreeMap;
use std::net::IpAddr;
use std::path::PathBuf;

use orca_plugin_sdk::Quantity;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::{ConfigError, Seconds};

/// The Node orca registers.
#[derive(Debug, Clone, Deserialize, Serialize, JsonSchema)]
#[serde(deny_unknown_fields, rename_all = "camelCase", default)]
pub struct NodeConfig {
    /// The Node's name: a DNS subdomain. With `nodes:`, each entry names its own.
    pub name: String,
    /// The cluster this node joins; tagged on every instance as `orca.research/cluster`.
    pub cluster_name: String,
    /// Labels on the Node, besides the well-known `kubernetes.io/{hostname,os,arch}` ones
    /// orca always sets.
    pub labels: BTreeMap<String, String>,
    /// Annotations on the Node.
    pub annotations: BTreeMap<String, String>,
    /// Taints on the Node: only pods that tolerate them are scheduled here.
    pub taints: Vec<TaintConfig>,
    /// `Linux` or `Windows`.
    pub operating_system: String,
    /// `amd64` or `arm64`: the architecture a pod that selects none is launched for.
    pub architecture: String,
    /// CPU capacity: an upper bound the scheduler packs pods against (capacity equals
    /// allocatable).
    #[serde(deserialize_with = "super::quantity_field::string_or_number")]
    #[schemars(with = "super::quantity_field::QuantityValue")]
    pub cpu: String,
    /// Memory capacity.
    #[serde(deserialize_with = "super::quantity_field::string_or_number")]
    #[schemars(with = "super::quantity_field::QuantityValue")]
    pub memory: String,
    /// How many pods the Node takes.
    #[serde(deserialize_with = "super::quantity_field::string_or_number")]
    #[schemars(with = "super::quantity_field::QuantityValue")]
    pub pods: String,
    /// GPU capacity, reported as `nvidia.com/gpu`.
    #[serde(deserialize_with = "super::quantity_field::string_or_number")]
    #[schemars(with = "super::quantity_field::QuantityValue")]
    pub gpu: String,
    /// Ephemeral storage capacity.
    #[serde(deserialize_with = "super::quantity_field::string_or_number")]
    #[schemars(with = "super::quantity_field::QuantityValue")]
    pub ephemeral_storage: String,
    /// The kubelet version `kubectl get nodes` shows; default: orca's version.
    pub kubelet_version: String,
    /// The container runtime `kubectl get nodes -o wide` shows; default: orca's version.
    pub container_runtime_version: String,
    /// The OS image `kubectl get nodes -o wide` shows.
    pub os_image: String,
    /// The address the apiserver uses to reach orca's kubelet API. Default: `$POD_IP` when set
    /// (in-cluster), else 127.0.0.1.
    #[serde(rename = "internalIP")]
    pub internal_ip: Option<IpAddr>,
    /// The port of orca's kubelet API, published in the Node's `daemonEndpoints`.
    pub daemon_port: u16,
    /// A Node YAML used as the base object; the fields above are applied over it.
    pub skeleton: Option<PathBuf>,
    /// How long the Node's Lease in `kube-node-lease` lasts without renewal.
    pub lease_duration: Seconds,
    /// How often the Node's Lease is renewed; shorter than `leaseDuration`.
    pub lease_renew_interval: Seconds,
    /// How often the Node's status and conditions are rewritten (and at once when the
    /// provider's health changes).
    pub status_update_interval: Seconds,
    /// How often the provider is pinged for the Ready condition.
    pub ping_interval: Seconds,
}

/// A taint on the node; pods must tolerate it to be scheduled here.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize, Serialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct TaintConfig {
    /// The taint's key, a qualified name such as `example.com/burst`.
    pub key: String,
    /// The taint's value.
    #[serde(default)]
    pub value: String,
    /// What the taint does to pods that do not tolerate it.
    pub effect: TaintEffect,
}

/// Kubernetes taint effects.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, Serialize, JsonSchema)]
pub enum TaintEffect {
    /// Pods that do not tolerate the taint are not scheduled here.
    NoSchedule,
    /// The scheduler avoids the node for pods that do not tolerate the taint.
    PreferNoSchedule,
    /// Pods that do not tolerate the taint are not scheduled here, and are evicted.
    NoExecute,
}

impl TaintEffect {
    pub fn as_str(self) -> &'static str {
        match self {
            TaintEffect::NoSchedule => "NoSchedule",
            TaintEffect::PreferNoSchedule => "PreferNoSchedule",
            TaintEffect::NoExecute => "NoExecute",
        }
    }
}

impl Default for NodeConfig {
    fn default() -> Self {
        let version = env!("CARGO_PKG_VERSION");
        NodeConfig {
            name: "orca-aws-node".to_owned(),
            cluster_name: "kubernetes".to_owned(),
            labels: [
                ("orca.research/provider", "aws"),
                ("type", "virtual-kubelet"),
            ]
            .into_iter()
            .map(|(k, v)| (k.to_owned(), v.to_owned()))
            .collect(),
            annotations: BTreeMap::new(),
            taints: vec![TaintConfig {
                key: "orca.research/burst-node".to_owned(),
                value: "true".to_owned(),
                effect: TaintEffect::NoSchedule,
            }],
            operating_system: "Linux".to_owned(),
            architecture: "amd64".to_owned(),
            cpu: "1000".to_owned(),
            memory: "4Ti".to_owned(),
            pods: "1000".to_owned(),
            gpu: "100".to_owned(),
            ephemeral_storage: "10Ti".to_owned(),
            kubelet_version: format!("v{version}-orca"),
            container_runtime_version: format!("orca://{version}"),
            os_image: "AWS EC2".to_owned(),
            internal_ip: None,
            daemon_port: 10250,
            skeleton: None,
            lease_duration: Seconds::from_secs(40),
            lease_renew_interval: Seconds::from_secs(10),
            status_update_interval: Seconds::from_secs(60),
            ping_interval: Seconds::from_secs(10),
        }
    }
}

impl NodeConfig {
    /// The capacity resources as (resource name, configured quantity, field name).
    pub fn capacity(&self) -> [(&'static str, &str, &'static str); 5] {
        [
            ("cpu", &self.cpu, "node.cpu"),
            ("memory", &self.memory, "node.memory"),
            ("pods", &self.pods, "node.pods"),
            ("nvidia.com/gpu", &self.gpu, "node.gpu"),
            (
                "ephemeral-storage",
                &self.ephemeral_storage,
                "node.ephemeralStorage",
            ),
        ]
    }

    /// The node's operating system as Kubernetes spells it (`linux`).
    pub fn os(&self) -> String {
        self.operating_system.to_ascii_lowercase()
    }

    pub(super) fn validate(&self) -> Result<(), ConfigError> {
        let cluster_tag = if self.cluster_name.is_empty() {
            Err("it is empty".to_owned())
        } else {
            orca_plugin_sdk::tags::validate_tag("orca.research/cluster", &self.cluster_name)
        };
        if let Err(message) = cluster_tag {
            return Err(ConfigError::invalid(
                "node.clusterName",
                &self.cluster_name,
                &format!("a non-empty EC2 tag value ({message})"),
            ));
        }
        if !is_dns_subdomain(&self.name) {
            return Err(ConfigError::invalid(
                "node.name",
                &self.name,
                "a DNS subdomain: lowercase letters, digits, '-' and '.', at most 253 characters",
            ));
        }
        for (resource, value, field) in self.capacity() {
            let parsed: Result<Quantity, _> = value.parse();
            match parsed.map(|q| q.to_millis_ceil()) {
                Ok(Ok(millis)) if millis >= 0 => {}
                _ => {
                    return Err(ConfigError::invalid(
                        field,
                        value,
                        &format!(
                            "a non-negative Kubernetes quantity for {resource}, like \"1000\", \"500m\" or \"4Ti\""
                        ),
                    ));
                }
            }
        }
        let os = self.os();
        if os != "linux" && os != "windows" {
            return Err(ConfigError::invalid(
                "node.operatingSystem",
                &self.operating_system,
                "Linux or Windows",
            ));
        }
        if !matches!(self.architecture.as_str(), "amd64" | "arm64") {
            return Err(ConfigError::invalid(
                "node.architecture",
                &self.architecture,
                "amd64 or arm64",
            ));
        }
        for (index, taint) in self.taints.iter().enumerate() {
            if !is_qualified_name(&taint.key) {
                return Err(ConfigError::invalid(
                    format!("node.taints[{index}].key"),
                    &taint.key,
                    "a qualified name like example.com/burst",
                ));
            }
        }
        for key in self.labels.keys() {
            if !is_qualified_name(key) {
                return Err(ConfigError::invalid(
                    format!("node.labels[{key:?}]"),
                    key,
                    "a label key: an optional DNS prefix and '/', then up to 63 alphanumerics, '-', '_' or '.'",
                ));
            }
        }
        if self.daemon_port == 0 {
            return Err(ConfigError::invalid(
                "node.daemonPort",
                0,
                "a TCP port from 1 to 65535",
            ));
        }
        if self.lease_renew_interval >= self.lease_duration
            || self.lease_renew_interval.get().is_zero()
        {
            return Err(ConfigError::invalid(
                "node.leaseRenewInterval",
                self.lease_renew_interval,
                &format!(
                    "a duration above zero and shorter than node.leaseDuration ({})",
                    self.lease_duration
                ),
            ));
        }
        for (field, value) in [
            ("node.statusUpdateInterval", self.status_update_interval),
            ("node.pingInterval", self.ping_interval),
        ] {
            if value.get().is_zero() {
                return Err(ConfigError::invalid(field, value, "a duration above zero"));
            }
        }
        Ok(())
    }
}

/// RFC 1123 subdomain, as Kubernetes requires for object names.
pub(crate) fn is_dns_subdomain(name: &str) -> bool {
    !name.is_empty()
        && name.len() <= 253
        && name.split('.').all(|label| {
            !label.is_empty()
                && label
                    .bytes()
                    .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
                && !label.starts_with('-')
                && !label.ends_with('-')
        })
}

/// RFC 1123 label, as Kubernetes requires for namespaces and for volume and container names
/// (and so safe in host paths).
pub(crate) fn is_dns_label(name: &str) -> bool {
    name.len() <= 63 && !name.contains('.') && is_dns_subdomain(name)
}

/// A Kubernetes qualified name (label and taint keys): `[prefix/]name`.
pub(crate) fn is_qualified_name(key: &str) -> bool {
    let (prefix, name) = match key.rsplit_once('/') {
        Some((prefix, name)) => (Some(prefix), name),
        None => (None, key),
    };
    let name_ok = !name.is_empty()
        && name.len() <= 63
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.'))
        && name.as_bytes()[0].is_ascii_alphanumeric()
        && name.as_bytes()[name.len() - 1].is_ascii_alphanumeric();
    name_ok && prefix.is_none_or(is_dns_subdomain)
}

#[cfg(test)]
mod tests {
    use crate::config::Config;

    #[test]
    fn bad_memory_quantity_names_the_field_and_an_example() {
        let error = Config::parse("node:\n  memory: 4TB\n")
            .unwrap_err()
            .to_string();
        assert!(error.contains("node.memory"), "{error}");
        assert!(
            error.contains("\"4TB\"") && error.contains("4Ti"),
            "{error}"
        );
    }

    #[test]
    fn bad_taint_effect_lists_the_effects() {
        let yaml = "node:\n  taints:\n  - {key: a, value: b, effect: Sometimes}\n";
        let error = Config::parse(yaml).unwrap_err().to_string();
        assert!(error.contains("NoSchedule"), "{error}");
    }

    #[test]
    fn uppercase_node_name_is_rejected() {
        let error = Config::parse("node:\n  name: Orca\n")
            .unwrap_err()
            .to_string();
        assert!(error.contains("node.name"), "{error}");
    }

    #[test]
    fn renew_interval_must_be_shorter_than_the_lease() {
        let yaml = "node:\n  leaseDuration: 10s\n  leaseRenewInterval: 10s\n";
        let error = Config::parse(yaml).unwrap_err().to_string();
        assert!(error.contains("node.leaseRenewInterval"), "{error}");
    }

    #[test]
    fn qualified_names() {
        assert!(super::is_qualified_name("orca.research/burst-node"));
        assert!(super::is_qualified_name("type"));
        assert!(!super::is_qualified_name("-bad"));
        assert!(!super::is_qualified_name("Bad_Prefix/x"));
    }
}
