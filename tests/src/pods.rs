//! Pods as the tests create them: not pre-bound, tolerating orca's taint and selecting one
//! node, so the real scheduler places them.

use std::collections::BTreeMap;
use std::time::Duration;

use anyhow::{Context, Result};
use k8s_openapi::api::core::v1::{Container, Pod, PodSpec, Toleration};
use kube::Api;
use kube::api::{ObjectMeta, PostParams};

use crate::wait::poll_until;

/// A pod for `node`, with the burst-node toleration and the given annotations.
pub fn burst_pod(name: &str, node: &str, annotations: &[(&str, &str)]) -> Pod {
    let mut pod = pod_without_toleration(name, node, annotations);
    pod.spec.as_mut().expect("spec").tolerations = Some(vec![Toleration {
        key: Some("orca.research/burst-node".to_owned()),
        operator: Some("Equal".to_owned()),
        value: Some("true".to_owned()),
        effect: Some("NoSchedule".to_owned()),
        ..Toleration::default()
    }]);
    pod
}

/// The same pod without the toleration: the scheduler must never place it on orca's node.
pub fn pod_without_toleration(name: &str, node: &str, annotations: &[(&str, &str)]) -> Pod {
    Pod {
        metadata: ObjectMeta {
            name: Some(name.to_owned()),
            annotations: Some(
                annotations
                    .iter()
                    .map(|(k, v)| (k.to_string(), v.to_string()))
                    .collect::<BTreeMap<_, _>>(),
            ),
            ..ObjectMeta::default()
        },
        spec: Some(PodSpec {
            node_selector: Some([("kubernetes.io/hostname".to_owned(), node.to_owned())].into()),
            containers: vec![Container {
                name: "main".to_owned(),
                image: Some("busybox:1.36".to_owned()),
                command: Some(vec![
                    "sh".to_owned(),
                    "-c".to_owned(),
                    "echo hello".to_owned(),
                ]),
                ..Container::default()
            }],
            ..PodSpec::default()
        }),
        ..Pod::default()
    }
}

/// Creates the pod, retrying while the namespace's default service account does not exist yet.
pub async fn create(api: &Api<Pod>, pod: &Pod) -> Result<Pod> {
    poll_until(
        "pod admission",
        Duration::from_secs(30),
        Duration::from_millis(200),
        || async {
            match api.create(&PostParams::default(), pod).await {
                Ok(created) => Ok(Some(created)),
                Err(kube::Error::Api(status)) if status.code == 409 => Ok(Some(
                    api.get(pod.metadata.name.as_deref().unwrap_or_default())
                        .await?,
                )),
                Err(error) => Err(error.into()),
            }
        },
    )
    .await
}

/// Waits until `check` holds for the pod, returning it.
pub async fn wait_for(
    api: &Api<Pod>,
    name: &str,
    what: &str,
    timeout: Duration,
    check: impl Fn(&Pod) -> bool,
) -> Result<Pod> {
    poll_until(
        &format!("pod {name}: {what}"),
        timeout,
        Duration::from_millis(250),
        || async {
            let pod = api.get(name).await?;
            Ok(check(&pod).then_some(pod))
        },
    )
    .await
}

/// The Events about the pod `name` in `namespace` (events.k8s.io/v1).
pub async fn events_about(
    client: &kube::Client,
    namespace: &str,
    name: &str,
) -> Result<Vec<k8s_openapi::api::events::v1::Event>> {
    let api: Api<k8s_openapi::api::events::v1::Event> = Api::namespaced(client.clone(), namespace);
    let all = api.list(&kube::api::ListParams::default()).await?;
    Ok(all
        .items
        .into_iter()
        .filter(|e| e.regarding.as_ref().and_then(|r| r.name.as_deref()) == Some(name))
        .collect())
}

/// Waits until an Event with `reason` is recorded about the object `name` in `namespace`,
/// returning it.
pub async fn wait_for_event(
    client: &kube::Client,
    namespace: &str,
    name: &str,
    reason: &str,
    timeout: Duration,
) -> Result<k8s_openapi::api::events::v1::Event> {
    crate::wait::poll_until(
        &format!("the {reason} event about {name} in {namespace}"),
        timeout,
        Duration::from_millis(200),
        || async move {
            let events = events_about(client, namespace, name).await?;
            Ok(events
                .into_iter()
                .find(|e| e.reason.as_deref() == Some(reason)))
        },
    )
    .await
}

/// Waits until an Event with `reason` is recorded about the Node `node` (cluster-scoped
/// objects' Events land in `default`), returning it.
pub async fn wait_for_node_event(
    client: &kube::Client,
    node: &str,
    reason: &str,
    timeout: Duration,
) -> Result<k8s_openapi::api::events::v1::Event> {
    wait_for_event(client, "default", node, reason, timeout).await
}

/// Waits until the pod is in `wanted` phase, returning it.
pub async fn wait_for_phase(
    api: &Api<Pod>,
    name: &str,
    wanted: &str,
    timeout: Duration,
) -> Result<Pod> {
    wait_for(api, name, wanted, timeout, |pod| phase(pod) == wanted).await
}

/// The `orca.research/decision` annotation orca recorded on the pod, parsed.
pub fn decision(pod: &Pod) -> Option<serde_json::Value> {
    let text = pod
        .metadata
        .annotations
        .as_ref()?
        .get("orca.research/decision")?;
    serde_json::from_str(text).ok()
}

/// Waits until orca has recorded its decision on the pod, returning it.
pub async fn wait_decided(
    api: &Api<Pod>,
    name: &str,
    timeout: Duration,
) -> Result<serde_json::Value> {
    let pod = wait_for(api, name, "a decision", timeout, |p| decision(p).is_some()).await?;
    decision(&pod).context("the decision annotation")
}

pub fn phase(pod: &Pod) -> &str {
    pod.status
        .as_ref()
        .and_then(|s| s.phase.as_deref())
        .unwrap_or("")
}

pub fn reason(pod: &Pod) -> &str {
    pod.status
        .as_ref()
        .and_then(|s| s.reason.as_deref())
        .unwrap_or("")
}

/// The reason of the pod's condition of type `kind` (`Ready`), if it has one.
pub fn condition_reason(pod: &Pod, kind: &str) -> Option<String> {
    pod.status
        .as_ref()?
        .conditions
        .as_ref()?
        .iter()
        .find(|c| c.type_ == kind)?
        .reason
        .clone()
}

pub fn message(pod: &Pod) -> &str {
    pod.status
        .as_ref()
        .and_then(|s| s.message.as_deref())
        .unwrap_or("")
}

/// The instance id orca recorded in the pod's container status (`orca://<id>/<container>`).
pub fn instance_id(pod: &Pod) -> Option<String> {
    pod.status
        .as_ref()?
        .container_statuses
        .as_ref()?
        .first()?
        .container_id
        .as_deref()?
        .strip_prefix("orca://")?
        .split('/')
        .next()
        .map(str::to_owned)
}

pub fn condition<'a>(pod: &'a Pod, type_: &str) -> Option<&'a str> {
    pod.status
        .as_ref()?
        .conditions
        .as_ref()?
        .iter()
        .find(|c| c.type_ == type_)
        .map(|c| c.status.as_str())
}
