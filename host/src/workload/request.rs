//! The Launch step's one reading of the pod: everything a provider needs to launch its
//! instance, as a [`LaunchRequest`]. Providers never see the pod itself.

use k8s_openapi::api::core::v1::Pod;

use super::source::EnvSource;
use super::spec::{WorkloadError, workload_spec};
use crate::provider::plan::LaunchPlan;
use crate::provider::zones::ZoneConstraint;
use crate::provider::{LaunchRequest, PodKey, ProviderError};

/// A pod may pick its AMI with this annotation; otherwise the provider's default
/// (`provider.aws.defaultAmi`).
pub const AMI_ANNOTATION: &str = "orca.research/ami";

/// Why no [`LaunchRequest`] could be built for a pod. Each variant says which part of the pod
/// is at fault; [`RequestError::is_transient`] tells whether a later try may succeed with the
/// pod unchanged.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum RequestError {
    #[error("pod has no name or uid")]
    Unidentified,
    #[error(
        "annotation {AMI_ANNOTATION}: {value:?} is not an AMI id (ami- and 8 or 17 hex digits)"
    )]
    InvalidAmiAnnotation { value: String },
    /// A ConfigMap, Secret or key the pod needs does not exist (yet), or could not be read:
    /// the kubelet waits for them too.
    #[error(transparent)]
    ConfigNotReady(WorkloadError),
    /// The pod asks for something orca cannot run; only a new pod can change that.
    #[error(transparent)]
    UnsupportedPodSpec(WorkloadError),
}

impl RequestError {
    /// The reason code the pod's Events and status show, as they did when the aws provider
    /// made these checks.
    pub fn as_str(&self) -> &'static str {
        match self {
            RequestError::Unidentified => "InvalidPod",
            RequestError::InvalidAmiAnnotation { .. } => "InvalidAnnotation",
            RequestError::ConfigNotReady(_) => "CreateContainerConfigError",
            RequestError::UnsupportedPodSpec(_) => "UnsupportedPodSpec",
        }
    }

    /// Whether launching again later may work with the pod unchanged.
    pub fn is_transient(&self) -> bool {
        matches!(self, RequestError::ConfigNotReady(_))
    }
}

impl From<WorkloadError> for RequestError {
    fn from(error: WorkloadError) -> RequestError {
        if error.may_resolve_later() {
            RequestError::ConfigNotReady(error)
        } else {
            RequestError::UnsupportedPodSpec(error)
        }
    }
}

/// A request refused before any provider call, in the words and the class a provider's own
/// refusal has: the launch fails or is retried as it would be had the provider refused it.
impl From<RequestError> for ProviderError {
    fn from(error: RequestError) -> ProviderError {
        let code = error.as_str();
        match error {
            RequestError::InvalidAmiAnnotation { .. } => {
                ProviderError::invalid_annotation(error.to_string())
            }
            RequestError::ConfigNotReady(_) => ProviderError::transient(code, error.to_string()),
            RequestError::Unidentified | RequestError::UnsupportedPodSpec(_) => {
                ProviderError::permanent(code, error.to_string())
            }
        }
    }
}

/// Builds the request to launch `pod` by `plan` in `zones` (the pod's
/// [`ZoneConstraint`], on its node, narrowed to its volumes' zones): its workload resolved,
/// ConfigMaps, Secrets and claims read from `objects`, each once.
///
/// # Errors
/// [`RequestError`] for a pod that cannot be launched as it is; see
/// [`RequestError::is_transient`].
pub async fn launch_request(
    pod: &Pod,
    plan: &LaunchPlan,
    zones: ZoneConstraint,
    objects: &dyn EnvSource,
) -> Result<LaunchRequest, RequestError> {
    let key = PodKey::of(pod).ok_or(RequestError::Unidentified)?;
    let annotations = pod.metadata.annotations.clone().unwrap_or_default();
    let machine_image = match annotations.get(AMI_ANNOTATION) {
        Some(ami) if crate::config::is_resource_id(ami.trim(), "ami-") => {
            Some(ami.trim().to_owned())
        }
        Some(ami) => {
            return Err(RequestError::InvalidAmiAnnotation { value: ami.clone() });
        }
        None => None,
    };
    let workload = workload_spec(pod, objects).await?;
    // A volume attaches only in its own zone: its PersistentVolume's affinity narrows where
    // the pod may launch (the provider narrows it to the zone EC2 names).
    let zones = (workload.volumes.iter().filter_map(|volume| volume.ebs()))
        .fold(zones, |zones, ebs| {
            zones.with_volume(&ebs.volume_id, ebs.zones.iter().cloned())
        });
    Ok(LaunchRequest {
        pod: key,
        plan: plan.clone(),
        workload,
        machine_image,
        zones,
        created: pod.metadata.creation_timestamp.as_ref().map(|time| time.0),
        annotations,
    })
}

#[cfg(test)]
pub(crate) mod testing {
    //! Launching a pod as the Launch step does, for tests of providers.

    use k8s_openapi::api::core::v1::Pod;

    use super::launch_request;
    use crate::provider::plan::LaunchPlan;
    use crate::provider::zones::ZoneConstraint;
    use crate::provider::{LaunchFailed, LaunchRequest, Launched, PodKey, Provider, ProviderError};
    use crate::workload::{NoObjects, RestartPolicy, WorkloadSpec};

    /// A request for `pod` that runs nothing, for tests of what happens around a launch whose
    /// pods need no spec (the simulated provider runs nothing).
    ///
    /// # Panics
    /// When the pod has no name or uid.
    pub(crate) fn bare_request(pod: &Pod, plan: &LaunchPlan) -> LaunchRequest {
        let key = PodKey::of(pod).expect("a pod with a name and a uid");
        LaunchRequest {
            workload: WorkloadSpec {
                pod: key.to_string(),
                restart_policy: RestartPolicy::Always,
                init_containers: Vec::new(),
                containers: Vec::new(),
                volumes: Vec::new(),
                gpu: false,
                warnings: Vec::new(),
            },
            pod: key,
            plan: plan.clone(),
            machine_image: None,
            zones: ZoneConstraint::of(pod),
            created: None,
            annotations: pod.metadata.annotations.clone().unwrap_or_default(),
        }
    }

    /// [`Provider::create`] for a pod, its request built as the Launch step builds it; a pod
    /// that cannot be launched fails as the Launch step fails it.
    pub(crate) trait LaunchPod {
        async fn launch_pod(&self, pod: &Pod, plan: &LaunchPlan) -> Result<Launched, LaunchFailed>;
    }

    impl<P: Provider + ?Sized> LaunchPod for P {
        async fn launch_pod(&self, pod: &Pod, plan: &LaunchPlan) -> Result<Launched, LaunchFailed> {
            let zones = ZoneConstraint::of(pod);
            match launch_request(pod, plan, zones, &NoObjects).await {
                Ok(request) => self.create(&request).await,
                Err(error) => Err(ProviderError::from(error).into()),
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;
    use crate::provider::ErrorClass;
    use crate::workload::source::fake::FakeSource;

    fn pod(annotations: serde_json::Value, env: serde_json::Value) -> Pod {
        serde_json::from_value(json!({
            "metadata": { "name": "p", "namespace": "ml", "uid": "u-1", "annotations": annotations },
            "spec": { "containers": [{ "name": "main", "image": "busybox", "env": env }] }
        }))
        .unwrap()
    }

    async fn build(pod: &Pod) -> Result<LaunchRequest, RequestError> {
        let source = FakeSource::default().config_map("settings", &[("mode", "fast")]);
        let plan = LaunchPlan::on_demand("m5.large");
        launch_request(pod, &plan, ZoneConstraint::of(pod), &source).await
    }

    #[tokio::test]
    async fn the_request_carries_the_pods_resolved_workload_and_its_ami() {
        let pod = pod(
            json!({ AMI_ANNOTATION: " ami-0123456789abcdef0 " }),
            json!([{ "name": "MODE", "valueFrom": { "configMapKeyRef": { "name": "settings", "key": "mode" } } }]),
        );
        let request = build(&pod).await.unwrap();
        assert_eq!(request.pod.uid, "u-1");
        assert_eq!(
            request.machine_image.as_deref(),
            Some("ami-0123456789abcdef0")
        );
        let env = &request.workload.containers[0].env;
        assert_eq!(env[0].0, "MODE");
        assert_eq!(env[0].1.as_literal(), Some("fast"));
    }

    #[tokio::test]
    async fn each_refusal_keeps_the_code_and_class_the_provider_gave_it() {
        let cases = [
            (
                pod(json!({ AMI_ANNOTATION: "ubuntu" }), json!([])),
                "InvalidAnnotation",
                ErrorClass::InvalidAnnotation,
            ),
            (
                pod(
                    json!({}),
                    json!([{ "name": "K", "valueFrom": { "secretKeyRef": { "name": "absent", "key": "k" } } }]),
                ),
                "CreateContainerConfigError",
                ErrorClass::Transient,
            ),
            (
                pod(
                    json!({}),
                    json!([{ "name": "N", "valueFrom": { "fieldRef": { "fieldPath": "spec.nope" } } }]),
                ),
                "UnsupportedPodSpec",
                ErrorClass::Permanent,
            ),
        ];
        for (pod, code, class) in cases {
            let error = ProviderError::from(build(&pod).await.unwrap_err());
            assert_eq!((error.code.as_str(), error.class), (code, class), "{error}");
        }
    }
}
