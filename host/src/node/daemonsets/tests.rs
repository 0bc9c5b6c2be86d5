use serde_json::{Value, json};

use super::*;

fn node(labels: Value, taints: Value) -> Node {
    serde_json::from_value(json!({
        "metadata": {"name": "orca-aws-node", "labels": labels},
        "spec": {"taints": taints},
    }))
    .unwrap()
}

/// orca's node as the default config (config.yaml) registers it: its labels and its taint.
fn orca_node() -> Node {
    node(
        json!({
            "kubernetes.io/hostname": "orca-aws-node",
            "kubernetes.io/os": "linux",
            "kubernetes.io/arch": "amd64",
            "type": "virtual-kubelet",
            "orca.research/provider": "aws",
        }),
        json!([{"key": "orca.research/burst-node", "value": "true", "effect": "NoSchedule"}]),
    )
}

fn template(spec: Value) -> PodSpec {
    let mut spec = spec;
    spec["containers"] = json!([{"name": "agent", "image": "agent:1"}]);
    serde_json::from_value(spec).unwrap()
}

fn affinity(terms: Value) -> Value {
    json!({"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": terms}}})
}

/// EKS's add-ons (aws-node, kube-proxy): every taint tolerated, Linux nodes of either
/// architecture that are not Fargate, hybrid or Auto Mode nodes.
fn eks_addon() -> Value {
    json!({
        "tolerations": [{"operator": "Exists"}],
        "affinity": affinity(json!([{"matchExpressions": [
            {"key": "kubernetes.io/os", "operator": "In", "values": ["linux"]},
            {"key": "kubernetes.io/arch", "operator": "In", "values": ["amd64", "arm64"]},
            {"key": "eks.amazonaws.com/compute-type", "operator": "NotIn", "values": ["fargate", "hybrid", "auto"]},
        ]}])),
    })
}

#[test]
fn a_daemonset_lands_where_the_daemonset_controller_would_put_it() {
    let cases = [
        // (what, the pod template's spec, lands on orca's node)
        (
            "no toleration: the NoSchedule taint keeps it off",
            json!({}),
            false,
        ),
        (
            "EKS's add-ons tolerate everything and match the labels",
            eks_addon(),
            true,
        ),
        (
            "a toleration of orca's taint by key",
            json!({"tolerations": [{"key": "orca.research/burst-node", "operator": "Exists"}]}),
            true,
        ),
        (
            "a toleration of another value",
            json!({"tolerations": [{"key": "orca.research/burst-node", "value": "false"}]}),
            false,
        ),
        (
            "a toleration of the value, Equal by default",
            json!({"tolerations": [{"key": "orca.research/burst-node", "value": "true", "effect": "NoSchedule"}]}),
            true,
        ),
        (
            "a toleration of another effect",
            json!({"tolerations": [{"key": "orca.research/burst-node", "operator": "Exists", "effect": "NoExecute"}]}),
            false,
        ),
        (
            "the documented affinity keeps it off",
            json!({
                "tolerations": [{"operator": "Exists"}],
                "affinity": affinity(json!([{"matchExpressions": [
                    {"key": "type", "operator": "NotIn", "values": ["virtual-kubelet"]}]}])),
            }),
            false,
        ),
        (
            "a nodeSelector the node meets",
            json!({"tolerations": [{"operator": "Exists"}], "nodeSelector": {"kubernetes.io/os": "linux"}}),
            true,
        ),
        (
            "a nodeSelector the node does not meet",
            json!({"tolerations": [{"operator": "Exists"}], "nodeSelector": {"node.kubernetes.io/instance-type": "m5.large"}}),
            false,
        ),
        (
            "a label that must exist and does not",
            json!({
                "tolerations": [{"operator": "Exists"}],
                "affinity": affinity(json!([{"matchExpressions": [
                    {"key": "eks.amazonaws.com/nodegroup", "operator": "Exists"}]}])),
            }),
            false,
        ),
        (
            "either term will do",
            json!({
                "tolerations": [{"operator": "Exists"}],
                "affinity": affinity(json!([
                    {"matchExpressions": [{"key": "eks.amazonaws.com/nodegroup", "operator": "Exists"}]},
                    {"matchExpressions": [{"key": "orca.research/provider", "operator": "In", "values": ["aws"]}]},
                ])),
            }),
            true,
        ),
        (
            "a term without requirements selects nothing",
            json!({"tolerations": [{"operator": "Exists"}], "affinity": affinity(json!([{}]))}),
            false,
        ),
        (
            "the node by name",
            json!({
                "tolerations": [{"operator": "Exists"}],
                "affinity": affinity(json!([{"matchFields": [
                    {"key": "metadata.name", "operator": "In", "values": ["orca-aws-node"]}]}])),
            }),
            true,
        ),
        (
            "another node by name",
            json!({
                "tolerations": [{"operator": "Exists"}],
                "affinity": affinity(json!([{"matchFields": [
                    {"key": "metadata.name", "operator": "In", "values": ["ip-10-0-0-1"]}]}])),
            }),
            false,
        ),
        (
            "a nodeName of another node",
            json!({"tolerations": [{"operator": "Exists"}], "nodeName": "ip-10-0-0-1"}),
            false,
        ),
        (
            "a label compared as a number, absent",
            json!({
                "tolerations": [{"operator": "Exists"}],
                "affinity": affinity(json!([{"matchExpressions": [
                    {"key": "gpus", "operator": "Gt", "values": ["0"]}]}])),
            }),
            false,
        ),
    ];
    let orca = orca_node();
    for (what, spec, lands) in cases {
        assert_eq!(places_a_pod_on(&template(spec), &orca), lands, "{what}");
    }
}

#[test]
fn the_controllers_own_tolerations_count_and_prefer_no_schedule_does_not() {
    let cases = [
        // (the node's taints, the template's spec, lands)
        (
            json!([{"key": "node.kubernetes.io/unschedulable", "effect": "NoSchedule"}]),
            json!({}),
            true,
        ),
        (
            json!([{"key": "node.kubernetes.io/not-ready", "effect": "NoExecute"}]),
            json!({}),
            true,
        ),
        (
            json!([{"key": "node.kubernetes.io/network-unavailable", "effect": "NoSchedule"}]),
            json!({}),
            false,
        ),
        (
            json!([{"key": "node.kubernetes.io/network-unavailable", "effect": "NoSchedule"}]),
            json!({"hostNetwork": true}),
            true,
        ),
        (
            json!([{"key": "spot", "value": "yes", "effect": "PreferNoSchedule"}]),
            json!({}),
            true,
        ),
    ];
    for (taints, spec, lands) in cases {
        let node = node(json!({"kubernetes.io/os": "linux"}), taints.clone());
        assert_eq!(
            places_a_pod_on(&template(spec.clone()), &node),
            lands,
            "taints {taints} spec {spec}"
        );
    }
}

#[test]
fn the_daemonsets_named_are_those_placing_a_pod_on_one_of_the_nodes() {
    let daemonset = |namespace: &str, name: &str, spec: Value| -> DaemonSet {
        let mut spec = spec;
        spec["containers"] = json!([{"name": "agent", "image": "agent:1"}]);
        serde_json::from_value(json!({
            "metadata": {"namespace": namespace, "name": name},
            "spec": {
                "selector": {"matchLabels": {"app": name}},
                "template": {"metadata": {"labels": {"app": name}}, "spec": spec},
            },
        }))
        .unwrap()
    };
    // A node of the cluster's own (an arm64 EC2 node, untainted).
    let mut other = node(
        json!({"kubernetes.io/os": "linux", "kubernetes.io/arch": "arm64"}),
        json!([]),
    );
    other.metadata.name = Some("ip-10-0-0-1".into());
    let daemonsets = [
        daemonset("kube-system", "aws-node", eks_addon()),
        daemonset("kube-system", "ebs-csi-node", json!({})),
        daemonset(
            "monitoring",
            "agent",
            json!({"tolerations": [{"operator": "Exists"}]}),
        ),
    ];
    assert_eq!(
        placed(&daemonsets, &[orca_node(), other]),
        [
            (
                "kube-system/aws-node".to_owned(),
                "orca-aws-node".to_owned()
            ),
            ("kube-system/aws-node".to_owned(), "ip-10-0-0-1".to_owned()),
            (
                "kube-system/ebs-csi-node".to_owned(),
                "ip-10-0-0-1".to_owned()
            ),
            ("monitoring/agent".to_owned(), "orca-aws-node".to_owned()),
            ("monitoring/agent".to_owned(), "ip-10-0-0-1".to_owned()),
        ]
    );
}
