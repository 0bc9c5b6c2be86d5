//! The `nodes:` section: several virtual nodes served by one process, for example one per
//! availability zone so the scheduler can spread pods over zones. Each entry starts from the
//! `node:` section and changes only what it names; without entries, `node:` is the one node.

use std::collections::{BTreeMap, BTreeSet};

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::node::is_dns_subdomain;
use super::{ConfigError, NodeConfig, TaintConfig, is_resource_id};
use crate::provider::zones::{EBS_ZONE_LABEL, ZONE_LABEL};

/// The Kubernetes label of the node's region, set with the zone's.
pub const REGION_LABEL: &str = "topology.kubernetes.io/region";

/// One entry of `nodes:`.
#[derive(Debug, Clone, Deserialize, Serialize, JsonSchema)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct NodeEntry {
    /// The Node's name: a DNS subdomain, unique among the entries.
    pub name: String,
    /// The availability zone this node's pods launch in; labelled `topology.kubernetes.io/zone`
    /// and `topology.ebs.csi.aws.com/zone` (and the region `topology.kubernetes.io/region`) so
    /// the scheduler can spread over zones and place pods whose EBS volumes are there.
    #[serde(default)]
    pub zone: Option<String>,
    /// Subnets for this node's instances, in place of `provider.aws.subnetIds`.
    #[serde(default)]
    pub subnet_ids: Option<Vec<String>>,
    /// Added over `node.labels`.
    #[serde(default)]
    pub labels: BTreeMap<String, String>,
    /// Added over `node.annotations`.
    #[serde(default)]
    pub annotations: BTreeMap<String, String>,
    /// In place of `node.taints` when given.
    #[serde(default)]
    pub taints: Option<Vec<TaintConfig>>,
    /// In place of `node.cpu`.
    #[serde(
        default,
        deserialize_with = "super::quantity_field::optional_string_or_number"
    )]
    #[schemars(with = "super::quantity_field::QuantityValue")]
    pub cpu: Option<String>,
    /// In place of `node.memory`.
    #[serde(
        default,
        deserialize_with = "super::quantity_field::optional_string_or_number"
    )]
    #[schemars(with = "super::quantity_field::QuantityValue")]
    pub memory: Option<String>,
    /// In place of `node.pods`.
    #[serde(
        default,
        deserialize_with = "super::quantity_field::optional_string_or_number"
    )]
    #[schemars(with = "super::quantity_field::QuantityValue")]
    pub pods: Option<String>,
    /// In place of `node.gpu`.
    #[serde(
        default,
        deserialize_with = "super::quantity_field::optional_string_or_number"
    )]
    #[schemars(with = "super::quantity_field::QuantityValue")]
    pub gpu: Option<String>,
    /// In place of `node.ephemeralStorage`.
    #[serde(
        default,
        deserialize_with = "super::quantity_field::optional_string_or_number"
    )]
    #[schemars(with = "super::quantity_field::QuantityValue")]
    pub ephemeral_storage: Option<String>,
}

/// A node this process may serve, with everything that differs between nodes resolved.
#[derive(Debug, Clone)]
pub struct DeclaredNode {
    /// The Node as registered: `node:` with the entry's changes.
    pub node: NodeConfig,
    /// Where its pods launch, if the node is bound to one zone.
    pub zone: Option<String>,
    /// Its instances' subnets (empty: the default subnet).
    pub subnet_ids: Vec<String>,
}

impl NodeEntry {
    fn resolve(&self, base: &NodeConfig, subnets: &[String], region: &str) -> DeclaredNode {
        let mut node = base.clone();
        node.name.clone_from(&self.name);
        node.labels.extend(self.labels.clone());
        node.annotations.extend(self.annotations.clone());
        if let Some(taints) = &self.taints {
            node.taints.clone_from(taints);
        }
        for (field, value) in [
            (&mut node.cpu, &self.cpu),
            (&mut node.memory, &self.memory),
            (&mut node.pods, &self.pods),
            (&mut node.gpu, &self.gpu),
            (&mut node.ephemeral_storage, &self.ephemeral_storage),
        ] {
            if let Some(value) = value {
                field.clone_from(value);
            }
        }
        if let Some(zone) = &self.zone {
            node.labels.insert(ZONE_LABEL.to_owned(), zone.clone());
            node.labels.insert(EBS_ZONE_LABEL.to_owned(), zone.clone());
            node.labels
                .insert(REGION_LABEL.to_owned(), region.to_owned());
        }
        DeclaredNode {
            zone: self
                .zone
                .clone()
                .or_else(|| node.labels.get(ZONE_LABEL).cloned()),
            node,
            subnet_ids: self.subnet_ids.clone().unwrap_or_else(|| subnets.to_vec()),
        }
    }
}

/// Every node of the configuration: the `nodes:` entries resolved over `node:`, or `node:`
/// alone.
pub(super) fn declared(
    base: &NodeConfig,
    entries: &[NodeEntry],
    subnets: &[String],
    region: &str,
) -> Vec<DeclaredNode> {
    if entries.is_empty() {
        return vec![DeclaredNode {
            zone: base.labels.get(ZONE_LABEL).cloned(),
            node: base.clone(),
            subnet_ids: subnets.to_vec(),
        }];
    }
    entries
        .iter()
        .map(|entry| entry.resolve(base, subnets, region))
        .collect()
}

/// Checks each entry; `node:` itself was checked before, so a fault in a resolved node comes
/// from its entry and is reported at `nodes[i]`.
pub(super) fn validate(
    base: &NodeConfig,
    entries: &[NodeEntry],
    subnets: &[String],
    region: &str,
) -> Result<(), ConfigError> {
    let mut names = BTreeSet::new();
    for (index, entry) in entries.iter().enumerate() {
        let at = |field: &str| format!("nodes[{index}].{field}");
        if !is_dns_subdomain(&entry.name) {
            return Err(ConfigError::invalid(
                at("name"),
                &entry.name,
                "a DNS subdomain: lowercase letters, digits, '-' and '.', at most 253 characters",
            ));
        }
        if !names.insert(entry.name.as_str()) {
            return Err(ConfigError::invalid(
                at("name"),
                &entry.name,
                "a name no other entry of nodes has",
            ));
        }
        if let Some(zone) = &entry.zone
            && !is_zone_name(zone)
        {
            return Err(ConfigError::invalid(
                at("zone"),
                zone,
                "an availability zone name such as us-west-2a",
            ));
        }
        for (i, subnet) in entry.subnet_ids.iter().flatten().enumerate() {
            if !is_resource_id(subnet, "subnet-") {
                return Err(ConfigError::invalid(
                    at(&format!("subnetIds[{i}]")),
                    subnet,
                    "a subnet id such as subnet-0123456789abcdef0",
                ));
            }
        }
        entry
            .resolve(base, subnets, region)
            .node
            .validate()
            .map_err(|error| error.at_entry(index))?;
    }
    Ok(())
}

/// A zone name as EC2 spells them (`us-west-2a`, `us-east-1-bos-1a`): lowercase letters,
/// digits and dashes, and a label value Kubernetes accepts.
fn is_zone_name(zone: &str) -> bool {
    !zone.is_empty()
        && zone.len() <= 63
        && zone
            .bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
        && !zone.starts_with('-')
        && !zone.ends_with('-')
}

impl ConfigError {
    /// An error about the `node.` fields of a resolved entry, reported at `nodes[index].`.
    fn at_entry(self, index: usize) -> ConfigError {
        match self {
            ConfigError::Invalid {
                path,
                field,
                value,
                expected,
            } => ConfigError::Invalid {
                path,
                field: match field.strip_prefix("node.") {
                    Some(rest) => format!("nodes[{index}].{rest}"),
                    None => field,
                },
                value,
                expected,
            },
            other => other,
        }
    }
}

#[cfg(test)]
mod tests {
    use crate::config::Config;

    const THREE_ZONES: &str = "
provider:
  region: us-west-2
  aws:
    subnetIds: [subnet-000000000000000aa]
node:
  cpu: 100
  labels: {team: ml}
nodes:
  - name: orca-a
    zone: us-west-2a
    subnetIds: [subnet-0a0a0a0a0a0a0a0a0]
  - name: orca-b
    zone: us-west-2b
    cpu: 8
    labels: {tier: gpu}
  - name: orca-c
";

    #[test]
    fn entries_start_from_the_node_section_and_change_what_they_name() {
        let config = Config::parse(THREE_ZONES).unwrap();
        let nodes = config.declared_nodes();
        assert_eq!(nodes.len(), 3);
        let (a, b, c) = (&nodes[0], &nodes[1], &nodes[2]);
        assert_eq!(a.node.name, "orca-a");
        assert_eq!(a.zone.as_deref(), Some("us-west-2a"));
        assert_eq!(a.subnet_ids, ["subnet-0a0a0a0a0a0a0a0a0"]);
        assert_eq!(a.node.labels["topology.kubernetes.io/zone"], "us-west-2a");
        assert_eq!(a.node.labels["topology.kubernetes.io/region"], "us-west-2");
        assert_eq!(a.node.labels["team"], "ml");
        assert_eq!(a.node.cpu, "100");
        assert_eq!(b.node.cpu, "8");
        assert_eq!(b.node.labels["tier"], "gpu");
        assert_eq!(b.subnet_ids, ["subnet-000000000000000aa"], "inherited");
        assert_eq!(b.node.taints, a.node.taints, "the node section's taints");
        assert_eq!(c.zone, None);
        assert!(!c.node.labels.contains_key("topology.kubernetes.io/zone"));
    }

    #[test]
    fn without_entries_the_node_section_is_the_one_node() {
        let config =
            Config::parse("node:\n  labels: {topology.kubernetes.io/zone: eu-west-1c}\n").unwrap();
        let nodes = config.declared_nodes();
        assert_eq!(nodes.len(), 1);
        assert_eq!(nodes[0].node.name, "orca-aws-node");
        assert_eq!(nodes[0].zone.as_deref(), Some("eu-west-1c"));
    }

    #[test]
    fn a_bad_entry_is_named_by_its_index_and_field() {
        for (entries, field) in [
            ("  - name: a\n  - name: a\n", "nodes[1].name"),
            ("  - name: Big\n", "nodes[0].name"),
            ("  - name: a\n    zone: US West\n", "nodes[0].zone"),
            (
                "  - name: a\n    subnetIds: [vpc-1]\n",
                "nodes[0].subnetIds[0]",
            ),
            ("  - name: a\n    memory: 4TB\n", "nodes[0].memory"),
            (
                "  - name: a\n    labels: {\"-x\": v}\n",
                "nodes[0].labels[\"-x\"]",
            ),
            (
                "  - name: a\n    taints: [{key: \"-k\", effect: NoSchedule}]\n",
                "nodes[0].taints[0].key",
            ),
        ] {
            let error = Config::parse(&format!("nodes:\n{entries}"))
                .unwrap_err()
                .to_string();
            assert!(error.contains(field), "{entries}: {error}");
        }
        let error = Config::parse("nodes:\n  - name: a\n    shape: round\n")
            .unwrap_err()
            .to_string();
        assert!(
            error.contains("nodes[0]") && error.contains("shape"),
            "{error}"
        );
    }
}
