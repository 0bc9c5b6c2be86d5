//! The Node object orca registers, built from config (over an optional skeleton Node YAML).

use std::collections::BTreeMap;
use std::net::IpAddr;

use k8s_openapi::api::core::v1::{
    DaemonEndpoint, Node, NodeAddress, NodeDaemonEndpoints, NodeSpec, NodeStatus, NodeSystemInfo,
    Taint,
};
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;

use crate::config::NodeConfig;

/// The labels every node gets from the kubelet, so selectors written for real nodes work here.
fn well_known_labels(config: &NodeConfig) -> BTreeMap<String, String> {
    let os = config.os();
    [
        ("kubernetes.io/hostname", config.name.clone()),
        ("kubernetes.io/os", os.clone()),
        ("kubernetes.io/arch", config.architecture.clone()),
        ("beta.kubernetes.io/os", os),
        ("beta.kubernetes.io/arch", config.architecture.clone()),
        ("kubernetes.io/role", "agent".to_owned()),
        (
            "node.kubernetes.io/exclude-from-external-load-balancers",
            "true".to_owned(),
        ),
    ]
    .into_iter()
    .map(|(k, v)| (k.to_owned(), v))
    .collect()
}

/// The taints from config, as Kubernetes objects.
pub fn configured_taints(config: &NodeConfig) -> Vec<Taint> {
    config
        .taints
        .iter()
        .map(|taint| Taint {
            key: taint.key.clone(),
            value: Some(taint.value.clone()).filter(|v| !v.is_empty()),
            effect: taint.effect.as_str().to_owned(),
            time_added: None,
        })
        .collect()
}

/// The Node's metadata and spec: name, labels, annotations, taints over the skeleton's.
pub fn desired_node(config: &NodeConfig, skeleton: Option<Node>) -> Node {
    let mut node = skeleton.unwrap_or_default();
    node.metadata.name = Some(config.name.clone());
    node.metadata.resource_version = None;
    node.metadata.uid = None;
    let labels = node.metadata.labels.get_or_insert_with(BTreeMap::new);
    labels.extend(well_known_labels(config));
    labels.extend(config.labels.clone());
    node.metadata
        .annotations
        .get_or_insert_with(BTreeMap::new)
        .extend(config.annotations.clone());
    let spec = node.spec.get_or_insert_with(NodeSpec::default);
    spec.taints = Some(merge_taints(
        spec.taints.take().unwrap_or_default(),
        &configured_taints(config),
    ));
    node.status = None;
    node
}

/// `existing` with every configured taint present: a configured taint replaces one with the
/// same key and effect; taints others added (e.g. `node.kubernetes.io/not-ready`) stay.
pub fn merge_taints(existing: Vec<Taint>, configured: &[Taint]) -> Vec<Taint> {
    let mut merged: Vec<Taint> = existing
        .into_iter()
        .filter(|taint| {
            !configured
                .iter()
                .any(|c| c.key == taint.key && c.effect == taint.effect)
        })
        .collect();
    merged.extend(configured.iter().cloned());
    merged
}

/// The status fields that do not change while orca runs (capacity, info, addresses, port).
pub fn static_status(config: &NodeConfig, address: IpAddr) -> NodeStatus {
    let capacity: BTreeMap<String, Quantity> = config
        .capacity()
        .into_iter()
        .map(|(resource, value, _)| (resource.to_owned(), Quantity(value.to_owned())))
        .collect();
    NodeStatus {
        allocatable: Some(capacity.clone()),
        capacity: Some(capacity),
        addresses: Some(vec![
            NodeAddress {
                type_: "InternalIP".to_owned(),
                address: address.to_string(),
            },
            NodeAddress {
                type_: "Hostname".to_owned(),
                address: config.name.clone(),
            },
        ]),
        daemon_endpoints: Some(NodeDaemonEndpoints {
            kubelet_endpoint: Some(DaemonEndpoint {
                port: i32::from(config.daemon_port),
            }),
        }),
        node_info: Some(NodeSystemInfo {
            architecture: config.architecture.clone(),
            operating_system: config.os(),
            kubelet_version: config.kubelet_version.clone(),
            kube_proxy_version: String::new(),
            container_runtime_version: config.container_runtime_version.clone(),
            os_image: config.os_image.clone(),
            kernel_version: String::new(),
            machine_id: String::new(),
            system_uuid: String::new(),
            boot_id: String::new(),
            ..NodeSystemInfo::default()
        }),
        declared_features: Some(DECLARED_FEATURES.iter().map(|f| (*f).to_owned()).collect()),
        ..NodeStatus::default()
    }
}

/// What the node tells the apiserver it supports (sorted, as the apiserver requires):
/// `ExtendWebSocketsToKubelet` has an apiserver of 1.36 or later pass `kubectl exec`'s
/// WebSocket through to the kubelet API, which serves it (without it, the apiserver speaks
/// SPDY to the node, which orca does not serve). An apiserver before 1.35 has no such field:
/// the status write leaves it out there ([`crate::cluster::apiserver::ServerSchema`]).
pub const DECLARED_FEATURES: [&str; 1] = ["ExtendWebSocketsToKubelet"];

/// The address the apiserver should use to reach orca: config, else `$POD_IP`, else loopback.
pub fn node_address(config: &NodeConfig) -> IpAddr {
    config
        .internal_ip
        .or_else(|| std::env::var("POD_IP").ok().and_then(|ip| ip.parse().ok()))
        .unwrap_or(IpAddr::from([127, 0, 0, 1]))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn taint(key: &str, effect: &str, value: &str) -> Taint {
        Taint {
            key: key.into(),
            effect: effect.into(),
            value: Some(value.into()),
            time_added: None,
        }
    }

    #[test]
    fn configured_taints_replace_their_twins_and_keep_others() {
        let existing = vec![
            taint("node.kubernetes.io/not-ready", "NoSchedule", ""),
            taint("orca.research/burst-node", "NoSchedule", "old"),
        ];
        let merged = merge_taints(
            existing,
            &[taint("orca.research/burst-node", "NoSchedule", "true")],
        );
        assert_eq!(merged.len(), 2);
        assert!(
            merged
                .iter()
                .any(|t| t.key == "node.kubernetes.io/not-ready")
        );
        assert!(merged.iter().any(|t| t.value.as_deref() == Some("true")));
    }

    #[test]
    fn desired_node_has_config_labels_over_well_known_ones_and_the_skeleton() {
        let mut config = NodeConfig::default();
        config
            .labels
            .insert("kubernetes.io/role".into(), "burst".into());
        let mut skeleton = Node::default();
        skeleton.metadata.labels = Some([("team".to_owned(), "ml".to_owned())].into());
        let node = desired_node(&config, Some(skeleton));
        let labels = node.metadata.labels.unwrap();
        assert_eq!(labels["kubernetes.io/role"], "burst");
        assert_eq!(labels["team"], "ml");
        assert_eq!(labels["kubernetes.io/hostname"], "orca-aws-node");
        assert_eq!(
            node.spec.unwrap().taints.unwrap()[0].key,
            "orca.research/burst-node"
        );
    }

    #[test]
    fn static_status_reports_version_runtime_and_port() {
        let status = static_status(&NodeConfig::default(), "10.1.2.3".parse().unwrap());
        let info = status.node_info.unwrap();
        assert!(info.kubelet_version.ends_with("-orca"));
        assert!(info.container_runtime_version.starts_with("orca://"));
        assert_eq!(info.operating_system, "linux");
        assert_eq!(
            status
                .daemon_endpoints
                .unwrap()
                .kubelet_endpoint
                .unwrap()
                .port,
            10250
        );
        assert_eq!(status.capacity.unwrap()["nvidia.com/gpu"].0, "100");
        assert_eq!(status.addresses.unwrap()[0].address, "10.1.2.3");
    }

    #[test]
    fn the_node_declares_the_websocket_exec_it_serves_in_the_order_the_apiserver_requires() {
        let status = static_status(&NodeConfig::default(), "10.1.2.3".parse().unwrap());
        let declared = status.declared_features.unwrap();
        assert_eq!(declared, ["ExtendWebSocketsToKubelet"]);
        assert!(declared.is_sorted());
    }
}
