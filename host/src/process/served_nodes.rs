//! The nodes this process serves right now, for the parts that answer for all of them at
//! once: the kubelet API (a request goes to the pod's node) and the metrics (pods counted over
//! every node). A node is added when its runtime starts serving it and removed when it stops,
//! so the set may change while orca runs (replicas hand nodes over through Leases). Beside
//! them, the pod watch of every declared node, served here or not (what a takeover starts from).

use std::collections::BTreeMap;
use std::sync::{Arc, RwLock};

use k8s_openapi::api::core::v1::Pod;
use kube::runtime::reflector::{ObjectRef, Store};

use crate::provider::Provider;

/// What one served node answers from.
#[derive(Clone)]
pub struct ServedNode {
    /// The pod controller's cache of the pods bound to the node.
    pub pods: Store<Pod>,
    /// The provider that runs the node's pods.
    pub provider: Arc<dyn Provider>,
}

/// A pod found on one of the served nodes.
#[derive(Clone)]
pub struct FoundPod {
    pub node: String,
    pub pod: Arc<Pod>,
    pub provider: Arc<dyn Provider>,
}

/// The nodes served, by name.
#[derive(Default)]
pub struct ServedNodes {
    nodes: RwLock<BTreeMap<String, ServedNode>>,
    /// Every declared node's pod store, kept by its pod watch whether served here or not.
    watched: RwLock<BTreeMap<String, Store<Pod>>>,
}

impl ServedNodes {
    /// `name`'s pods are watched into `pods` for the life of the process.
    pub fn watching(&self, name: &str, pods: Store<Pod>) {
        self.watched
            .write()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .insert(name.to_owned(), pods);
    }

    /// How many pods each declared node's watch holds now, served here or not.
    pub fn watched_pods(&self) -> BTreeMap<String, u64> {
        self.watched
            .read()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .iter()
            .map(|(name, pods)| (name.clone(), pods.state().len() as u64))
            .collect()
    }

    pub fn serve(&self, name: &str, node: ServedNode) {
        self.write().insert(name.to_owned(), node);
    }

    pub fn stop_serving(&self, name: &str) {
        self.write().remove(name);
    }

    /// Whether `name` is served now.
    pub fn serves(&self, name: &str) -> bool {
        self.read().contains_key(name)
    }

    /// The names served now, in order.
    pub fn names(&self) -> Vec<String> {
        self.read().keys().cloned().collect()
    }

    /// The pod `namespace/name` if it is bound to a served node, with its node and provider.
    pub fn pod(&self, namespace: &str, name: &str) -> Option<FoundPod> {
        let key = ObjectRef::new(name).within(namespace);
        self.read().iter().find_map(|(node, served)| {
            served.pods.get(&key).map(|pod| FoundPod {
                node: node.clone(),
                pod,
                provider: served.provider.clone(),
            })
        })
    }

    /// The providers of the nodes served now.
    pub fn providers(&self) -> Vec<Arc<dyn Provider>> {
        self.read()
            .values()
            .map(|served| served.provider.clone())
            .collect()
    }

    /// Each node served now, by name, with what it answers from.
    pub fn each(&self) -> Vec<(String, ServedNode)> {
        self.read()
            .iter()
            .map(|(name, served)| (name.clone(), served.clone()))
            .collect()
    }

    /// Every pod of every served node.
    pub fn pods(&self) -> Vec<Arc<Pod>> {
        self.read()
            .values()
            .flat_map(|served| served.pods.state())
            .collect()
    }

    /// Every pod of those of `nodes` served now.
    pub fn pods_on(&self, nodes: &[String]) -> Vec<Arc<Pod>> {
        self.read()
            .iter()
            .filter(|(name, _)| nodes.contains(name))
            .flat_map(|(_, served)| served.pods.state())
            .collect()
    }

    /// Serves each of `names` with no pods, on the simulated provider: for tests of what
    /// follows from which nodes are served.
    #[cfg(test)]
    pub(crate) fn serving(names: &[&str]) -> Arc<ServedNodes> {
        let served = Arc::new(ServedNodes::default());
        for name in names {
            served.serve_empty(name);
        }
        served
    }

    /// Serves `name` with no pods, on the simulated provider.
    #[cfg(test)]
    pub(crate) fn serve_empty(&self, name: &str) {
        let provider: Arc<dyn Provider> = Arc::new(
            crate::provider::simulated::SimulatedProvider::new(
                crate::config::SimulatedConfig::default(),
            )
            .expect("the default simulated provider"),
        );
        let (pods, _) = kube::runtime::reflector::store();
        self.serve(name, ServedNode { pods, provider });
    }

    fn read(&self) -> std::sync::RwLockReadGuard<'_, BTreeMap<String, ServedNode>> {
        self.nodes
            .read()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    fn write(&self) -> std::sync::RwLockWriteGuard<'_, BTreeMap<String, ServedNode>> {
        self.nodes
            .write()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }
}

#[cfg(test)]
mod tests {
    use kube::runtime::reflector;
    use kube::runtime::watcher::Event;
    use serde_json::json;

    use super::*;
    use crate::provider::simulated::SimulatedProvider;

    fn store_with(pods: &[(&str, &str)]) -> Store<Pod> {
        let (store, mut writer) = reflector::store();
        for (namespace, name) in pods {
            let pod: Pod = serde_json::from_value(
                json!({ "metadata": { "name": name, "namespace": namespace } }),
            )
            .unwrap();
            writer.apply_watcher_event(&Event::Apply(pod));
        }
        store
    }

    #[tokio::test]
    async fn a_pod_is_found_on_the_node_it_is_bound_to_while_that_node_is_served() {
        let provider: Arc<dyn Provider> =
            Arc::new(SimulatedProvider::new(crate::config::SimulatedConfig::default()).unwrap());
        let served = ServedNodes::default();
        served.serve(
            "orca-a",
            ServedNode {
                pods: store_with(&[("ml", "train-0")]),
                provider: provider.clone(),
            },
        );
        served.serve(
            "orca-b",
            ServedNode {
                pods: store_with(&[("ml", "train-1"), ("web", "train-0")]),
                provider,
            },
        );
        assert_eq!(served.names(), ["orca-a", "orca-b"]);
        assert_eq!(served.pod("ml", "train-1").unwrap().node, "orca-b");
        assert_eq!(served.pod("ml", "train-0").unwrap().node, "orca-a");
        assert_eq!(served.pod("web", "train-0").unwrap().node, "orca-b");
        assert!(served.pod("ml", "train-2").is_none());
        assert_eq!(served.pods().len(), 3);
        assert_eq!(served.pods_on(&["orca-a".to_owned()]).len(), 1);
        assert_eq!(
            served
                .pods_on(&["orca-b".to_owned(), "orca-c".to_owned()])
                .len(),
            2
        );
        assert!(served.pods_on(&[]).is_empty());
        served.stop_serving("orca-b");
        assert!(served.pods_on(&["orca-b".to_owned()]).is_empty());
        assert!(served.pod("ml", "train-1").is_none());
        assert_eq!(served.names(), ["orca-a"]);
    }

    #[test]
    fn every_declared_nodes_watched_pods_are_counted_whether_served_or_not() {
        let served = ServedNodes::default();
        served.watching("orca-a", store_with(&[("ml", "train-0")]));
        served.watching("orca-b", store_with(&[]));
        assert!(served.names().is_empty());
        assert_eq!(
            served.watched_pods(),
            BTreeMap::from([("orca-a".to_owned(), 1), ("orca-b".to_owned(), 0)])
        );
    }
}
