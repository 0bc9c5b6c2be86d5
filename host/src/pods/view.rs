//! What a reconcile step reads from a pod: who it is, its phase, whether it is being deleted,
//! and which instance its status says was launched for it.

use jiff::Timestamp;
use k8s_openapi::api::core::v1::Pod;

use super::phase::PodPhase;
use crate::provider::PodKey;

/// The scheme of the container ids orca writes: `orca://<instance id>`.
pub const CONTAINER_ID_SCHEME: &str = "orca://";

/// The condition a spot warning sets, as Kubernetes names pod disruptions.
pub const DISRUPTION_CONDITION: &str = "DisruptionTarget";
/// The `DisruptionTarget` reason of a spot interruption warning.
pub const SPOT_INTERRUPTION_REASON: &str = "SpotInterruption";
/// The pod condition orca writes once the pod's instance is launched: its message is the
/// instance id, its `lastTransitionTime` the launch. It lives in the apiserver, so a restarted
/// orca knows which instance to wait for, look up or terminate before EC2 lists it.
pub const LAUNCHED_CONDITION: &str = "orca.research/InstanceLaunched";

/// An instance launched for a pod, and when.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LaunchRef {
    pub instance_id: String,
    pub at: Timestamp,
}

/// A pod as a reconcile step sees it.
#[derive(Debug, Clone)]
pub struct PodView<'a> {
    pub pod: &'a Pod,
    pub key: PodKey,
    pub phase: Option<PodPhase>,
    /// Graceful deletion has begun (or the pod was deleted while orca did not run).
    pub deleting: bool,
    /// The instance the pod's status names, if any.
    pub launched: Option<LaunchRef>,
}

impl<'a> PodView<'a> {
    /// `None` for a pod without a name or UID (a stored pod always has both).
    pub fn of(pod: &'a Pod) -> Option<PodView<'a>> {
        Some(PodView {
            key: PodKey::of(pod)?,
            phase: PodPhase::of(pod),
            deleting: pod.metadata.deletion_timestamp.is_some(),
            launched: launched(pod),
            pod,
        })
    }
}

/// The launched condition; for a status written before orca wrote that condition, the
/// instance in the container ids, launched at the latest when the pod started.
fn launched(pod: &Pod) -> Option<LaunchRef> {
    let status = pod.status.as_ref()?;
    let from_condition = status
        .conditions
        .iter()
        .flatten()
        .find(|c| c.type_ == LAUNCHED_CONDITION && c.status == "True")
        .and_then(|c| {
            Some(LaunchRef {
                instance_id: c.message.clone().filter(|id| !id.is_empty())?,
                at: c.last_transition_time.as_ref()?.0,
            })
        });
    from_condition.or_else(|| {
        let instance_id = status
            .container_statuses
            .iter()
            .flatten()
            .find_map(|c| c.container_id.as_deref()?.strip_prefix(CONTAINER_ID_SCHEME))?
            .split('/')
            .next()?
            .to_owned();
        Some(LaunchRef {
            instance_id,
            at: status.start_time.as_ref()?.0,
        })
    })
}

/// When the pod was warned that EC2 reclaims its spot instance: its `DisruptionTarget`
/// condition with reason `SpotInterruption`, as the pod carries it (so a restart remembers).
pub fn spot_warning(pod: &Pod) -> Option<Timestamp> {
    pod.status
        .as_ref()?
        .conditions
        .as_ref()?
        .iter()
        .find(|c| {
            c.type_ == DISRUPTION_CONDITION
                && c.status == "True"
                && c.reason.as_deref() == Some(SPOT_INTERRUPTION_REASON)
        })
        .map(|c| {
            c.last_transition_time
                .as_ref()
                .map_or(Timestamp::MIN, |t| t.0)
        })
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::api::core::v1::{ContainerStatus, PodCondition, PodStatus};
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, Time};

    fn pod(status: PodStatus) -> Pod {
        Pod {
            metadata: ObjectMeta {
                name: Some("p".into()),
                namespace: Some("ns".into()),
                uid: Some("u".into()),
                ..ObjectMeta::default()
            },
            status: Some(status),
            ..Pod::default()
        }
    }

    fn at(second: i64) -> Timestamp {
        Timestamp::from_second(second).unwrap()
    }

    #[test]
    fn the_launched_instance_is_read_from_the_condition() {
        let pod = pod(PodStatus {
            conditions: Some(vec![PodCondition {
                type_: LAUNCHED_CONDITION.into(),
                status: "True".into(),
                message: Some("i-0123".into()),
                last_transition_time: Some(Time(at(100))),
                ..PodCondition::default()
            }]),
            ..PodStatus::default()
        });
        let view = PodView::of(&pod).unwrap();
        assert_eq!(
            view.launched,
            Some(LaunchRef {
                instance_id: "i-0123".into(),
                at: at(100)
            })
        );
    }

    #[test]
    fn a_status_from_before_the_condition_names_its_instance_in_the_container_ids() {
        let pod = pod(PodStatus {
            start_time: Some(Time(at(50))),
            container_statuses: Some(vec![ContainerStatus {
                name: "main".into(),
                container_id: Some("orca://i-0456/main".into()),
                ..ContainerStatus::default()
            }]),
            ..PodStatus::default()
        });
        let launched = PodView::of(&pod).unwrap().launched.unwrap();
        assert_eq!(
            (launched.instance_id.as_str(), launched.at),
            ("i-0456", at(50))
        );
    }

    #[test]
    fn a_pod_without_a_status_names_no_instance() {
        let pod = pod(PodStatus::default());
        assert_eq!(PodView::of(&pod).unwrap().launched, None);
    }
}
