//! One queue, several nodes: the consumer hands each notice to the node whose instance it
//! names. Each node's pod controller adds its sink when it starts serving and removes it when
//! it stops, so a notice for a node no longer served here is left on the queue for the
//! replica that serves it now. A replica serving no node does not read the queue at all.

use std::collections::BTreeMap;
use std::sync::{Arc, RwLock};

use async_trait::async_trait;
use tokio::sync::watch;

use super::delivery::{Delivery, NoticeSink};
use super::notice::Notice;

/// The sinks of the nodes served, by node name.
pub struct NodeSinks {
    sinks: RwLock<BTreeMap<String, Arc<dyn NoticeSink>>>,
    /// Whether any node is served here: the consumer reads the queue only then.
    serving: watch::Sender<bool>,
    /// With replicas sharing the nodes, how many are declared: while fewer are served here,
    /// another replica serves the rest.
    shared_of: Option<usize>,
}

impl Default for NodeSinks {
    fn default() -> Self {
        NodeSinks {
            sinks: RwLock::default(),
            serving: watch::Sender::new(false),
            shared_of: None,
        }
    }
}

impl NodeSinks {
    /// For a replica sharing `declared` nodes with other replicas.
    pub fn sharing(declared: usize) -> NodeSinks {
        NodeSinks {
            shared_of: Some(declared),
            ..NodeSinks::default()
        }
    }

    pub fn add(&self, node: &str, sink: Arc<dyn NoticeSink>) {
        let mut sinks = self
            .sinks
            .write()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        sinks.insert(node.to_owned(), sink);
        self.serving.send_replace(true);
    }

    pub fn remove(&self, node: &str) {
        let mut sinks = self
            .sinks
            .write()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        sinks.remove(node);
        self.serving.send_replace(!sinks.is_empty());
    }

    fn all(&self) -> Vec<Arc<dyn NoticeSink>> {
        self.sinks
            .read()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .values()
            .cloned()
            .collect()
    }

    async fn owner(&self, instance_id: &str) -> Option<Arc<dyn NoticeSink>> {
        for sink in self.all() {
            if sink.owns(instance_id).await {
                return Some(sink);
            }
        }
        None
    }
}

#[async_trait]
impl NoticeSink for NodeSinks {
    async fn owns(&self, instance_id: &str) -> bool {
        self.owner(instance_id).await.is_some()
    }

    /// To the node that owns the instance; if it stopped being served since `owns` said yes,
    /// the notice is left for whoever serves it now.
    async fn deliver(&self, notice: Notice) -> Delivery {
        match self.owner(&notice.instance_id).await {
            Some(sink) => sink.deliver(notice).await,
            None => Delivery::Again,
        }
    }

    fn serving(&self) -> Option<watch::Receiver<bool>> {
        Some(self.serving.subscribe())
    }

    fn shared_elsewhere(&self) -> bool {
        let served = self
            .sinks
            .read()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .len();
        self.shared_of.is_some_and(|declared| served < declared)
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Mutex;

    use super::*;
    use crate::interruption::NoticeKind;

    struct Node {
        instances: Vec<&'static str>,
        delivered: Mutex<Vec<String>>,
    }

    #[async_trait]
    impl NoticeSink for Node {
        async fn owns(&self, instance_id: &str) -> bool {
            self.instances.contains(&instance_id)
        }
        async fn deliver(&self, notice: Notice) -> Delivery {
            self.delivered.lock().unwrap().push(notice.instance_id);
            Delivery::Done
        }
    }

    fn notice(instance_id: &str) -> Notice {
        Notice {
            kind: NoticeKind::SpotInterruption,
            instance_id: instance_id.to_owned(),
            time: jiff::Timestamp::UNIX_EPOCH,
            deadline: None,
            state: None,
            action: None,
            description: String::new(),
        }
    }

    #[tokio::test]
    async fn a_notice_goes_to_the_node_whose_instance_it_names() {
        let a = Arc::new(Node {
            instances: vec!["i-a"],
            delivered: Mutex::default(),
        });
        let b = Arc::new(Node {
            instances: vec!["i-b"],
            delivered: Mutex::default(),
        });
        let sinks = NodeSinks::default();
        sinks.add("a", a.clone());
        sinks.add("b", b.clone());
        assert!(sinks.owns("i-b").await);
        assert!(!sinks.owns("i-c").await);
        assert_eq!(sinks.deliver(notice("i-b")).await, Delivery::Done);
        assert_eq!(*b.delivered.lock().unwrap(), ["i-b"]);
        assert!(a.delivered.lock().unwrap().is_empty());
        sinks.remove("b");
        assert!(!sinks.owns("i-b").await);
        assert_eq!(sinks.deliver(notice("i-b")).await, Delivery::Again);
    }

    #[test]
    fn instances_not_owned_here_may_be_another_replicas_only_while_a_shared_node_is_served_elsewhere()
     {
        let node = || {
            Arc::new(Node {
                instances: vec![],
                delivered: Mutex::default(),
            })
        };
        let alone = NodeSinks::default();
        alone.add("a", node());
        assert!(!alone.shared_elsewhere(), "not sharing: nobody else serves");
        let sharing = NodeSinks::sharing(2);
        assert!(sharing.shared_elsewhere());
        sharing.add("a", node());
        assert!(sharing.shared_elsewhere(), "b is served elsewhere");
        sharing.add("b", node());
        assert!(!sharing.shared_elsewhere(), "every node is served here");
        sharing.remove("a");
        assert!(sharing.shared_elsewhere());
    }
}
