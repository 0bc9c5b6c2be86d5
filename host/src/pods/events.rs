//! Kubernetes Events on pods for each lifecycle step (`kubectl describe pod` shows them).

use k8s_openapi::api::core::v1::Pod;
use kube::Resource;
use kube::runtime::events::{Event, EventType, Recorder, Reporter};

/// Publishes events as the `orca` controller; failures are logged, never fatal.
pub struct PodEvents {
    recorder: Recorder,
}

impl PodEvents {
    pub fn new(client: kube::Client, node_name: &str) -> PodEvents {
        let reporter = Reporter {
            controller: "orca".to_owned(),
            instance: Some(node_name.to_owned()),
        };
        PodEvents {
            recorder: Recorder::new(client, reporter),
        }
    }

    pub async fn normal(&self, pod: &Pod, reason: &str, action: &str, note: String) {
        self.publish(pod, EventType::Normal, reason, action, note)
            .await;
    }

    pub async fn warning(&self, pod: &Pod, reason: &str, action: &str, note: String) {
        self.publish(pod, EventType::Warning, reason, action, note)
            .await;
    }

    async fn publish(&self, pod: &Pod, type_: EventType, reason: &str, action: &str, note: String) {
        let event = Event {
            type_,
            reason: reason.to_owned(),
            // The events API caps notes at 1 KiB.
            note: Some(truncate(note, 1024)),
            action: action.to_owned(),
            secondary: None,
        };
        if let Err(error) = self.recorder.publish(&event, &pod.object_ref(&())).await {
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
