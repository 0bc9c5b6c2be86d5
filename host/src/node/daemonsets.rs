//! The DaemonSets that place a pod on orca's nodes. orca launches an EC2 instance for every pod
//! bound to its node, and a DaemonSet that tolerates every taint (as EKS's add-ons and most log
//! and metric agents do) binds one pod to each node, orca's included: an instance per node and
//! DaemonSet, bought for a pod nobody meant to run there, for as long as the DaemonSet exists.
//! orca names them when it starts, so an operator keeps them off its nodes before any launches.
//!
//! Which nodes a DaemonSet places a pod on is the DaemonSet controller's decision
//! (`NodeShouldRunDaemonPod` in `pkg/controller/daemon`), made on its pod template alone: the
//! template's `nodeName`, its `nodeSelector` and required node affinity against the node's
//! name and labels, and its tolerations, with those the controller adds to every daemon pod,
//! against the node's `NoSchedule` and `NoExecute` taints. [`places_a_pod_on`] is that decision.

use std::collections::BTreeMap;
use std::time::Duration;

use k8s_openapi::api::apps::v1::DaemonSet;
use k8s_openapi::api::core::v1::{
    Node, NodeSelector, NodeSelectorTerm, PodSpec, Taint, Toleration,
};
use kube::api::{Api, ListParams};

use super::selector::holds;

/// How long startup waits for the list of DaemonSets before going on without it.
const LIST_TIMEOUT: Duration = Duration::from_secs(10);

/// The tolerations the DaemonSet controller adds to every pod it creates
/// (`AddOrUpdateDaemonPodTolerations`), as (key, effect). Pods on the host network also get
/// `network-unavailable`.
const DAEMON_TOLERATIONS: [(&str, &str); 6] = [
    ("node.kubernetes.io/not-ready", "NoExecute"),
    ("node.kubernetes.io/unreachable", "NoExecute"),
    ("node.kubernetes.io/disk-pressure", "NoSchedule"),
    ("node.kubernetes.io/memory-pressure", "NoSchedule"),
    ("node.kubernetes.io/pid-pressure", "NoSchedule"),
    ("node.kubernetes.io/unschedulable", "NoSchedule"),
];
const HOST_NETWORK_TOLERATION: (&str, &str) =
    ("node.kubernetes.io/network-unavailable", "NoSchedule");

/// Whether a DaemonSet whose pod template has `spec` places a pod on `node`.
pub fn places_a_pod_on(spec: &PodSpec, node: &Node) -> bool {
    let name = node.metadata.name.as_deref().unwrap_or_default();
    if spec
        .node_name
        .as_deref()
        .is_some_and(|wanted| wanted != name)
    {
        return false;
    }
    let empty = BTreeMap::new();
    let labels = node.metadata.labels.as_ref().unwrap_or(&empty);
    let selected = spec
        .node_selector
        .iter()
        .flatten()
        .all(|(key, value)| labels.get(key) == Some(value));
    let affine = spec
        .affinity
        .as_ref()
        .and_then(|affinity| affinity.node_affinity.as_ref())
        .and_then(|affinity| {
            affinity
                .required_during_scheduling_ignored_during_execution
                .as_ref()
        })
        .is_none_or(|required| selects(required, name, labels));
    let taints = node
        .spec
        .as_ref()
        .and_then(|spec| spec.taints.as_deref())
        .unwrap_or_default();
    selected && affine && tolerates(spec, taints)
}

/// Whether `selector` selects the node: any of its terms does (no term selects nothing).
fn selects(selector: &NodeSelector, name: &str, labels: &BTreeMap<String, String>) -> bool {
    selector
        .node_selector_terms
        .iter()
        .any(|term| term_selects(term, name, labels))
}

/// A term selects the node when all of its requirements hold; a term without any selects
/// nothing, as the scheduler has it.
fn term_selects(term: &NodeSelectorTerm, name: &str, labels: &BTreeMap<String, String>) -> bool {
    let expressions = term.match_expressions.as_deref().unwrap_or_default();
    let fields = term.match_fields.as_deref().unwrap_or_default();
    if expressions.is_empty() && fields.is_empty() {
        return false;
    }
    expressions.iter().all(|requirement| {
        holds(
            requirement,
            labels.get(&requirement.key).map(String::as_str),
        )
    }) && fields.iter().all(|requirement| {
        // `metadata.name` is the one field node selectors support (with In and NotIn).
        requirement.key == "metadata.name"
            && matches!(requirement.operator.as_str(), "In" | "NotIn")
            && holds(requirement, Some(name))
    })
}

/// Whether a daemon pod of `spec` tolerates every `NoSchedule` and `NoExecute` taint of
/// `taints` (`PreferNoSchedule` only weighs on scoring).
fn tolerates(spec: &PodSpec, taints: &[Taint]) -> bool {
    let own = spec.tolerations.as_deref().unwrap_or_default();
    let host_network = spec.host_network == Some(true);
    let added = DAEMON_TOLERATIONS
        .iter()
        .chain(host_network.then_some(&HOST_NETWORK_TOLERATION))
        .map(|&(key, effect)| Toleration {
            key: Some(key.to_owned()),
            operator: Some("Exists".to_owned()),
            effect: Some(effect.to_owned()),
            ..Toleration::default()
        })
        .collect::<Vec<_>>();
    taints
        .iter()
        .filter(|taint| matches!(taint.effect.as_str(), "NoSchedule" | "NoExecute"))
        .all(|taint| {
            own.iter()
                .chain(&added)
                .any(|toleration| tolerates_taint(toleration, taint))
        })
}

/// `Toleration.ToleratesTaint`: the effect (when set) is the taint's, the key (when set) is the
/// taint's, and `Exists` takes any value where `Equal` (the default) takes the taint's value.
fn tolerates_taint(toleration: &Toleration, taint: &Taint) -> bool {
    let effect = toleration.effect.as_deref().unwrap_or_default();
    if !effect.is_empty() && effect != taint.effect {
        return false;
    }
    let key = toleration.key.as_deref().unwrap_or_default();
    if !key.is_empty() && key != taint.key {
        return false;
    }
    match toleration.operator.as_deref().unwrap_or_default() {
        "Exists" => true,
        "" | "Equal" => {
            toleration.value.as_deref().unwrap_or_default()
                == taint.value.as_deref().unwrap_or_default()
        }
        _ => false,
    }
}

/// The DaemonSets that place a pod on one of `nodes`, as `namespace/name` with the node's name.
pub fn placed(daemonsets: &[DaemonSet], nodes: &[Node]) -> Vec<(String, String)> {
    let mut found = Vec::new();
    for daemonset in daemonsets {
        let Some(spec) = daemonset
            .spec
            .as_ref()
            .and_then(|spec| spec.template.spec.as_ref())
        else {
            continue;
        };
        let named = format!(
            "{}/{}",
            daemonset.metadata.namespace.as_deref().unwrap_or_default(),
            daemonset.metadata.name.as_deref().unwrap_or_default()
        );
        for node in nodes {
            if places_a_pod_on(spec, node) {
                let node = node.metadata.name.clone().unwrap_or_default();
                found.push((named.clone(), node));
            }
        }
    }
    found
}

/// Lists the cluster's DaemonSets and logs, as a warning, each that places a pod on one of
/// `nodes` (the Nodes as orca registers them). A list that fails or takes too long is logged
/// and startup goes on: the check informs, it guards nothing.
pub async fn name_those_placing_pods(client: &kube::Client, nodes: &[Node]) {
    let api: Api<DaemonSet> = Api::all(client.clone());
    let listed = tokio::time::timeout(LIST_TIMEOUT, api.list(&ListParams::default())).await;
    let daemonsets = match listed {
        Ok(Ok(list)) => list.items,
        Ok(Err(error)) => {
            tracing::warn!(
                error = %crate::support::errors::error_chain(&error),
                "could not list DaemonSets to name those that place pods on orca's nodes (orca's ClusterRole lists apps/daemonsets; deploy/base/rbac.yaml has the rule)"
            );
            return;
        }
        Err(_) => {
            tracing::warn!(
                timeout = ?LIST_TIMEOUT,
                "listing DaemonSets to name those that place pods on orca's nodes took too long; going on without"
            );
            return;
        }
    };
    let found = placed(&daemonsets, nodes);
    if found.is_empty() {
        tracing::info!(
            daemonsets = daemonsets.len(),
            "no DaemonSet places a pod on orca's nodes"
        );
    }
    for (daemonset, node) in found {
        tracing::warn!(
            %daemonset,
            %node,
            "DaemonSet {daemonset} places a pod on node {node}, and orca launches an EC2 instance for every pod bound to its node: keep it off with a required node affinity the node does not meet (e.g. type NotIn [virtual-kubelet]; see the install checklist)"
        );
    }
}

#[cfg(test)]
mod tests;
