//! A node's pods, watched for the whole life of the process rather than only while the node is
//! served: a replica taking a node over starts with its pods already listed and kept current
//! (the "watches synced"), so the takeover waits for no list. Each serving turn
//! subscribes to the changes from then on, and is handed the pods already stored.

use std::sync::{Arc, Mutex};

use futures::StreamExt;
use futures::channel::mpsc;
use k8s_openapi::api::core::v1::Pod;
use kube::Api;
use kube::runtime::reflector::{self, Store};
use kube::runtime::{WatchStreamExt, watcher};
use tokio::sync::watch;
use tokio_util::sync::CancellationToken;

use super::stored;
use crate::support::errors::{error_chain, lock};

/// The pods bound to one node: a store kept by one watch, and the serving turn's subscription.
pub struct NodePods {
    store: Store<Pod>,
    /// Turns true once the watch has listed the node's pods; stays true through relists (the
    /// store keeps its last complete listing until the next one is complete).
    listed: watch::Receiver<bool>,
    /// Where the watch sends each pod it changes while a turn is subscribed.
    subscriber: Arc<Mutex<Option<mpsc::UnboundedSender<Pod>>>>,
}

impl NodePods {
    /// The pods bound to `node`, and the watch that keeps them: it runs until `shutdown`, in
    /// the task its owner spawns it on.
    pub fn start(
        client: kube::Client,
        node: &str,
        shutdown: CancellationToken,
    ) -> (Arc<NodePods>, impl Future<Output = ()> + Send + 'static) {
        let (store, writer) = reflector::store();
        let (listed_tx, listed) = watch::channel(false);
        let subscriber: Arc<Mutex<Option<mpsc::UnboundedSender<Pod>>>> = Arc::default();
        let api: Api<Pod> = Api::all(client);
        let selector = watcher::Config::default().fields(&format!("spec.nodeName={node}"));
        let mut failing = false;
        let watch = watcher(api, selector)
            .default_backoff()
            // The store holds every pod of the node: what orca never reads is cut first.
            .modify(stored::trim)
            .reflect(writer)
            .for_each({
                let (store, subscriber, node) = (store.clone(), subscriber.clone(), node.to_owned());
                move |event| {
                    match event {
                        Ok(watcher::Event::Apply(pod) | watcher::Event::Delete(pod)) => {
                            failing = false;
                            forward(&subscriber, pod);
                        }
                        // A listing reaches the store all at once at its end (kube's writer
                        // buffers it), so its pods are handed on from the store then: a pod
                        // handed on earlier would not be found in the store yet.
                        Ok(watcher::Event::Init | watcher::Event::InitApply(_)) => {}
                        Ok(watcher::Event::InitDone) => {
                            failing = false;
                            listed_tx.send_replace(true);
                            for pod in store.state() {
                                forward(&subscriber, Pod::clone(&pod));
                            }
                        }
                        // The pod watch failed (forbidden, apiserver gone): orca sees no pod
                        // changes until it recovers, so an operator must hear of it, once per
                        // run of failures.
                        Err(error) => {
                            if !failing {
                                tracing::warn!(%node, error = %error_chain(&error), "watching the node's pods failed; retrying with backoff");
                            }
                            failing = true;
                        }
                    }
                    std::future::ready(())
                }
            });
        let watching = async move {
            tokio::select! {
                () = watch => {}
                () = shutdown.cancelled() => {}
            }
        };
        let pods = Arc::new(NodePods {
            store,
            listed,
            subscriber,
        });
        (pods, watching)
    }

    pub fn store(&self) -> Store<Pod> {
        self.store.clone()
    }

    /// Turns true once the store holds a complete listing.
    pub fn listed(&self) -> watch::Receiver<bool> {
        self.listed.clone()
    }

    /// From now on, every pod the watch changes is sent to the returned receiver (until it is
    /// dropped or another turn subscribes); returned with it, the pods stored now. A pod that
    /// changes meanwhile may come both ways, never neither.
    pub fn subscribe(&self) -> (mpsc::UnboundedReceiver<Pod>, Vec<Arc<Pod>>) {
        let (sender, receiver) = mpsc::unbounded();
        *lock(&self.subscriber) = Some(sender);
        (receiver, self.store.state())
    }
}

fn forward(subscriber: &Mutex<Option<mpsc::UnboundedSender<Pod>>>, pod: Pod) {
    let mut subscriber = lock(subscriber);
    if let Some(sender) = subscriber.as_ref()
        && sender.unbounded_send(pod).is_err()
    {
        // The turn that subscribed has stopped.
        *subscriber = None;
    }
}
