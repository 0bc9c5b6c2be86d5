//! The zones a pod admits: its node selector and its required node affinity on
//! `topology.kubernetes.io/zone` (and the deprecated `failure-domain.beta.kubernetes.io/zone`),
//! its node's zone, and the zones of the EBS volumes it attaches. The scheduler checks the
//! first against the virtual node's labels; the instance must honour them all, since it is
//! where the pod really runs and a volume attaches only to an instance in its own zone.

use std::collections::{BTreeMap, BTreeSet};

use k8s_openapi::api::core::v1::{NodeSelectorRequirement, Pod};

use crate::node::selector;

pub const ZONE_LABEL: &str = "topology.kubernetes.io/zone";
/// The zone key of the EBS CSI driver's topology: the PersistentVolumes it provisions require
/// it of their nodes, so a node bound to a zone carries it too.
pub const EBS_ZONE_LABEL: &str = "topology.ebs.csi.aws.com/zone";
const LEGACY_ZONE_LABEL: &str = "failure-domain.beta.kubernetes.io/zone";

/// What a pod says about zones.
#[derive(Debug, Clone, PartialEq)]
pub struct ZoneConstraint {
    /// The node selector's zone, if it names one.
    selected: Option<String>,
    /// The required affinity's terms (any may match), each the zone requirements that must
    /// all hold; empty: no affinity on zones.
    terms: Vec<Vec<NodeSelectorRequirement>>,
    /// The zone of the node the pod is bound to, when that node is bound to one (a `nodes:`
    /// entry with a `zone`): the scheduler placed the pod there, so it runs there.
    node: Option<String>,
    /// Per volume the pod attaches (by id), the zones it may be in: one, once EC2 has said
    /// where it is; those of its PersistentVolume's node affinity before that.
    volumes: BTreeMap<String, BTreeSet<String>>,
}

impl ZoneConstraint {
    pub fn of(pod: &Pod) -> ZoneConstraint {
        let spec = pod.spec.as_ref();
        let selected = spec
            .and_then(|spec| spec.node_selector.as_ref())
            .and_then(|selector| {
                selector
                    .get(ZONE_LABEL)
                    .or_else(|| selector.get(LEGACY_ZONE_LABEL))
            })
            .cloned();
        let terms = spec
            .and_then(|spec| spec.affinity.as_ref())
            .and_then(|affinity| affinity.node_affinity.as_ref())
            .and_then(|node| {
                node.required_during_scheduling_ignored_during_execution
                    .as_ref()
            })
            .map(|required| {
                required
                    .node_selector_terms
                    .iter()
                    .map(|term| {
                        term.match_expressions
                            .iter()
                            .flatten()
                            .filter(|e| e.key == ZONE_LABEL || e.key == LEGACY_ZONE_LABEL)
                            .cloned()
                            .collect::<Vec<_>>()
                    })
                    .collect::<Vec<_>>()
            })
            .unwrap_or_default();
        // A term without zone requirements admits every zone, and terms are ORed.
        let terms = if terms.iter().any(Vec::is_empty) {
            Vec::new()
        } else {
            terms
        };
        ZoneConstraint {
            selected,
            terms,
            node: None,
            volumes: BTreeMap::new(),
        }
    }

    /// The constraint of a pod bound to a node in `zone` (`None`: a node of no one zone).
    #[must_use]
    pub fn on_node(mut self, zone: Option<&str>) -> ZoneConstraint {
        self.node = zone.map(str::to_owned);
        self
    }

    /// The constraint of a pod that attaches `volume`, which is in one of `zones` (what is
    /// known last replaces what was known before; no zones: nothing is known).
    #[must_use]
    pub fn with_volume(mut self, volume: &str, zones: impl IntoIterator<Item = String>) -> Self {
        let zones: BTreeSet<String> = zones.into_iter().collect();
        if !zones.is_empty() {
            self.volumes.insert(volume.to_owned(), zones);
        }
        self
    }

    /// Whether the pod names zones at all.
    pub fn is_constrained(&self) -> bool {
        self.selected.is_some()
            || !self.terms.is_empty()
            || self.node.is_some()
            || !self.volumes.is_empty()
    }

    /// Whether an instance in `zone` may run the pod.
    pub fn admits(&self, zone: &str) -> bool {
        if self.node.as_deref().is_some_and(|node| node != zone) {
            return false;
        }
        if !self.volumes.values().all(|zones| zones.contains(zone)) {
            return false;
        }
        if self
            .selected
            .as_deref()
            .is_some_and(|wanted| wanted != zone)
        {
            return false;
        }
        // An instance always has a zone: `DoesNotExist` admits none, and `Gt`/`Lt`, which
        // compare integers, admit no zone name.
        self.terms.is_empty()
            || self.terms.iter().any(|term| {
                term.iter()
                    .all(|requirement| selector::holds(requirement, Some(zone)))
            })
    }

    /// The zones the pod names by value (its selector, its `In` lists), in order.
    pub fn named_zones(&self) -> Vec<String> {
        if let Some(node) = &self.node {
            // The node's zone is the only one the pod can run in; if the pod's own terms
            // refuse it, it names none.
            return if self.admits(node) {
                vec![node.clone()]
            } else {
                Vec::new()
            };
        }
        if let Some(zones) = self.volumes.values().next() {
            // Only the zones every volume is in can run the pod.
            return zones
                .iter()
                .filter(|zone| self.admits(zone))
                .cloned()
                .collect();
        }
        let mut zones: BTreeSet<String> = self.selected.iter().cloned().collect();
        for requirement in self.terms.iter().flatten() {
            if requirement.operator == "In" {
                zones.extend(requirement.values.iter().flatten().cloned());
            }
        }
        zones.into_iter().collect()
    }

    /// The zones the pod names, for messages: `us-west-2a`, `not us-west-2b`.
    pub fn describe(&self) -> String {
        let mut parts: BTreeSet<String> = BTreeSet::new();
        if let Some(zone) = &self.node {
            parts.insert(format!("{zone} (its node's zone)"));
        }
        if let Some(zone) = &self.selected {
            parts.insert(zone.clone());
        }
        for (volume, zones) in &self.volumes {
            let zones = zones.iter().cloned().collect::<Vec<_>>().join(", ");
            parts.insert(format!("{zones} (volume {volume})"));
        }
        for requirement in self.terms.iter().flatten() {
            let values = requirement.values.clone().unwrap_or_default().join(", ");
            parts.insert(match requirement.operator.as_str() {
                "In" => values,
                "NotIn" => format!("not {values}"),
                "Exists" => "any zone".to_owned(),
                other => format!("{other} {values}"),
            });
        }
        parts.into_iter().collect::<Vec<_>>().join("; ")
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn pod(spec: serde_json::Value) -> Pod {
        serde_json::from_value(json!({ "metadata": { "name": "p" }, "spec": spec })).unwrap()
    }

    fn containers() -> serde_json::Value {
        json!([{ "name": "main", "image": "busybox" }])
    }

    #[test]
    fn a_pod_without_zone_constraints_admits_every_zone() {
        let constraint = ZoneConstraint::of(&pod(json!({ "containers": containers() })));
        assert!(!constraint.is_constrained());
        assert!(constraint.admits("us-west-2a"));
    }

    #[test]
    fn the_node_selector_names_one_zone() {
        let constraint = ZoneConstraint::of(&pod(json!({
            "containers": containers(),
            "nodeSelector": { ZONE_LABEL: "us-west-2b", "kubernetes.io/hostname": "orca" }
        })));
        assert!(constraint.is_constrained());
        assert!(constraint.admits("us-west-2b"));
        assert!(!constraint.admits("us-west-2a"));
        assert_eq!(constraint.describe(), "us-west-2b");
    }

    #[test]
    fn required_affinity_terms_are_ored_and_their_requirements_anded() {
        let constraint = ZoneConstraint::of(&pod(json!({
            "containers": containers(),
            "affinity": { "nodeAffinity": { "requiredDuringSchedulingIgnoredDuringExecution": {
                "nodeSelectorTerms": [
                    { "matchExpressions": [
                        { "key": ZONE_LABEL, "operator": "In", "values": ["us-west-2a", "us-west-2b"] },
                        { "key": ZONE_LABEL, "operator": "NotIn", "values": ["us-west-2b"] }
                    ] },
                    { "matchExpressions": [
                        { "key": LEGACY_ZONE_LABEL, "operator": "In", "values": ["us-west-2c"] }
                    ] }
                ]
            } } }
        })));
        assert!(constraint.admits("us-west-2a"));
        assert!(!constraint.admits("us-west-2b"));
        assert!(constraint.admits("us-west-2c"));
        assert!(!constraint.admits("us-west-2d"));
    }

    #[test]
    fn a_term_without_zone_requirements_admits_every_zone() {
        let constraint = ZoneConstraint::of(&pod(json!({
            "containers": containers(),
            "affinity": { "nodeAffinity": { "requiredDuringSchedulingIgnoredDuringExecution": {
                "nodeSelectorTerms": [
                    { "matchExpressions": [
                        { "key": ZONE_LABEL, "operator": "In", "values": ["us-west-2a"] }
                    ] },
                    { "matchExpressions": [
                        { "key": "kubernetes.io/arch", "operator": "In", "values": ["amd64"] }
                    ] }
                ]
            } } }
        })));
        assert!(!constraint.is_constrained());
        assert!(constraint.admits("us-west-2c"));
    }

    #[test]
    fn does_not_exist_admits_no_zone() {
        let constraint = ZoneConstraint::of(&pod(json!({
            "containers": containers(),
            "affinity": { "nodeAffinity": { "requiredDuringSchedulingIgnoredDuringExecution": {
                "nodeSelectorTerms": [ { "matchExpressions": [
                    { "key": ZONE_LABEL, "operator": "DoesNotExist" }
                ] } ]
            } } }
        })));
        assert!(constraint.is_constrained());
        assert!(!constraint.admits("us-west-2a"));
    }

    #[test]
    fn a_pod_on_a_zone_node_runs_in_that_zone_only() {
        let free = ZoneConstraint::of(&pod(json!({ "containers": containers() })))
            .on_node(Some("us-west-2b"));
        assert!(free.is_constrained());
        assert!(free.admits("us-west-2b"));
        assert!(!free.admits("us-west-2a"));
        assert_eq!(free.named_zones(), ["us-west-2b"]);
        assert_eq!(free.describe(), "us-west-2b (its node's zone)");
        let refusing = ZoneConstraint::of(&pod(json!({
            "containers": containers(),
            "nodeSelector": { ZONE_LABEL: "us-west-2a" }
        })))
        .on_node(Some("us-west-2b"));
        assert!(!refusing.admits("us-west-2a") && !refusing.admits("us-west-2b"));
        assert!(refusing.named_zones().is_empty());
        let anywhere =
            ZoneConstraint::of(&pod(json!({ "containers": containers() }))).on_node(None);
        assert!(!anywhere.is_constrained());
    }

    #[test]
    fn a_pod_runs_only_where_all_its_volumes_are() {
        let zones = |names: &[&str]| names.iter().map(|z| (*z).to_owned()).collect::<Vec<_>>();
        let free = ZoneConstraint::of(&pod(json!({ "containers": containers() })));
        let one = free
            .clone()
            .with_volume("vol-a", zones(&["us-west-2a", "us-west-2b"]))
            .with_volume("vol-b", zones(&["us-west-2b", "us-west-2c"]));
        assert!(one.is_constrained());
        assert_eq!(one.named_zones(), ["us-west-2b"]);
        assert!(one.admits("us-west-2b") && !one.admits("us-west-2a"));
        assert_eq!(
            one.describe(),
            "us-west-2a, us-west-2b (volume vol-a); us-west-2b, us-west-2c (volume vol-b)"
        );
        // What EC2 says replaces what the PersistentVolume said; nothing known changes nothing.
        let known = one
            .clone()
            .with_volume("vol-a", zones(&["us-west-2a"]))
            .with_volume("vol-b", zones(&[]));
        assert!(known.named_zones().is_empty());
        assert!(!known.admits("us-west-2b"));
        // The node's zone and the volume's zone must agree.
        let apart = free
            .clone()
            .on_node(Some("us-west-2a"))
            .with_volume("vol-a", zones(&["us-west-2b"]));
        assert!(apart.named_zones().is_empty());
        assert_eq!(
            apart.describe(),
            "us-west-2a (its node's zone); us-west-2b (volume vol-a)"
        );
        assert!(!free.with_volume("vol-a", zones(&[])).is_constrained());
    }
}
