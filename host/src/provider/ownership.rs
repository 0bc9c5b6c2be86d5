//! The tags orca itself relies on to find a pod's instance again. The host sets them after the
//! tag plugins ran, so no plugin can drop or change them and orphan an instance.

use crate::provider::PodKey;

pub const TAG_MANAGED_BY: &str = "ManagedBy";
pub const MANAGED_BY_VALUE: &str = "ORCA";
pub const TAG_NODE: &str = "orca.research/node";
pub const TAG_CLUSTER: &str = "orca.research/cluster";
pub const TAG_POD_NAMESPACE: &str = "orca.research/pod-namespace";
pub const TAG_POD_NAME: &str = "orca.research/pod-name";
pub const TAG_POD_UID: &str = "orca.research/pod-uid";

/// The ownership tags of one pod's instance.
pub fn ownership_tags(node: &str, cluster: &str, pod: &PodKey) -> [(&'static str, String); 6] {
    [
        (TAG_MANAGED_BY, MANAGED_BY_VALUE.to_owned()),
        (TAG_NODE, node.to_owned()),
        (TAG_CLUSTER, cluster.to_owned()),
        (TAG_POD_NAMESPACE, pod.namespace.clone()),
        (TAG_POD_NAME, pod.name.clone()),
        (TAG_POD_UID, pod.uid.clone()),
    ]
}
