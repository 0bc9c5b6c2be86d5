//! Kubernetes Events on pods for each lifecycle step (`kubectl describe pod` shows them).
//!
//! kube's `Recorder` folds a repeated event (same type, reason and action on the same object)
//! into one Event whose series count rises, from a cache it clears only when it next publishes,
//! six minutes on. One recorder for the whole node would hold every pod's events long after
//! the pods are gone; so each pod gets its own recorder, kept in the pod's record and dropped
//! with it.

use k8s_openapi::api::core::v1::Pod;
use kube::Resource;
use kube::runtime::events::{Event, EventType, Recorder, Reporter};

/// Makes each pod's recorder, as the `orca` controller of this node.
pub struct PodEvents {
    client: kube::Client,
    reporter: Reporter,
}

/// One pod's events: repeats of the same Warning become one Event with a count.
#[derive(Clone)]
pub struct PodRecorder(Recorder);

impl std::fmt::Debug for PodRecorder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("PodRecorder")
    }
}

impl PodEvents {
    pub fn new(client: kube::Client, node_name: &str) -> PodEvents {
        PodEvents {
            client,
            reporter: Reporter {
                controller: "orca".to_owned(),
                instance: Some(node_name.to_owned()),
            },
        }
    }

    /// A recorder for one pod.
    pub fn recorder(&self) -> PodRecorder {
        PodRecorder(Recorder::new(self.client.clone(), self.reporter.clone()))
    }
}

impl PodRecorder {
    /// Publishes one event about `pod`; a failure is logged, never fatal.
    pub async fn publish(
        &self,
        pod: &Pod,
        warning: bool,
        reason: &str,
        action: &str,
        note: String,
    ) {
        let event = Event {
            type_: if warning {
                EventType::Warning
            } else {
                EventType::Normal
            },
            reason: reason.to_owned(),
            // The events API caps notes at 1 KiB.
            note: Some(truncate(note, 1024)),
            action: action.to_owned(),
            secondary: None,
        };
        if let Err(error) = self.0.publish(&event, &pod.object_ref(&())).await {
            tracing::warn!(pod = pod.metadata.name.as_deref().unwrap_or_default(), reason, %error, "publishing event failed");
        }
    }
}

/// `text` cut to at most `max` bytes on a character boundary, marked with `...`.
pub(crate) fn truncate(mut text: String, max: usize) -> String {
    if text.len() > max {
        let mut cut = max - 3;
        while !text.is_char_boundary(cut) {
            cut -= 1;
        }
        text.truncate(cut);
        text.push_str("...");
    }
    text
}
