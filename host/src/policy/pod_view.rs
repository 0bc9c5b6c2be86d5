//! The pod as policy plugins see it: the WIT `pod` record built from a Kubernetes Pod.
//!
//! Resources are summed the way the scheduler sums them (KEP-753 sidecars included): app
//! containers and sidecar init containers (`restartPolicy: Always`) run together; each regular
//! init container runs alone beside the sidecars started before it; the pod needs the larger of
//! the two, plus `spec.overhead`.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::{Container, Pod, ResourceRequirements};
use k8s_openapi::apimachinery::pkg::api::resource::Quantity as K8sQuantity;
use orca_plugin_sdk::{Quantity, Resources, Toleration};

use crate::provider::zones::ZoneConstraint;

/// Why a pod could not be turned into the policy view.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PodViewError {
    #[error("pod has no name or uid")]
    Unidentified,
    #[error("container {container}: {kind} {resource} {value:?} is not a usable quantity")]
    BadQuantity {
        container: String,
        kind: &'static str,
        resource: String,
        value: String,
    },
}

const GPU: &str = "nvidia.com/gpu";

/// Builds the WIT pod record.
///
/// # Errors
/// [`PodViewError`] for a pod without identity or with an unparsable quantity (the apiserver
/// validates quantities, so this is a guard, not an expected path).
pub fn pod_view(pod: &Pod) -> Result<orca_plugin_sdk::Pod, PodViewError> {
    pod_view_on(pod, None)
}

/// [`pod_view`] of a pod bound to a node in `node_zone`: its zones are that zone's.
///
/// # Errors
/// As [`pod_view`].
pub fn pod_view_on(
    pod: &Pod,
    node_zone: Option<&str>,
) -> Result<orca_plugin_sdk::Pod, PodViewError> {
    let metadata = &pod.metadata;
    let (Some(name), Some(uid)) = (metadata.name.clone(), metadata.uid.clone()) else {
        return Err(PodViewError::Unidentified);
    };
    let spec = pod.spec.clone().unwrap_or_default();
    let pairs = |map: Option<&BTreeMap<String, String>>| -> Vec<(String, String)> {
        map.map(|m| m.iter().map(|(k, v)| (k.clone(), v.clone())).collect())
            .unwrap_or_default()
    };
    let init = spec.init_containers.clone().unwrap_or_default();
    let overhead = spec.overhead.as_ref();
    Ok(orca_plugin_sdk::Pod {
        namespace: metadata
            .namespace
            .clone()
            .unwrap_or_else(|| "default".to_owned()),
        name,
        uid,
        labels: pairs(metadata.labels.as_ref()),
        annotations: pairs(metadata.annotations.as_ref()),
        requests: effective(&spec.containers, &init, overhead, Kind::Requests)?,
        limits: effective(&spec.containers, &init, overhead, Kind::Limits)?,
        node_selector: pairs(spec.node_selector.as_ref()),
        tolerations: spec
            .tolerations
            .unwrap_or_default()
            .into_iter()
            .map(|t| Toleration {
                key: t.key,
                operator: t.operator,
                value: t.value,
                effect: t.effect,
            })
            .collect(),
        priority: spec.priority,
        json: serde_json::to_string(pod).unwrap_or_else(|_| "{}".to_owned()),
        zones: ZoneConstraint::of(pod).on_node(node_zone).named_zones(),
    })
}

#[derive(Clone, Copy)]
enum Kind {
    Requests,
    Limits,
}

impl Kind {
    fn name(self) -> &'static str {
        match self {
            Kind::Requests => "request",
            Kind::Limits => "limit",
        }
    }

    fn of(
        self,
        resources: Option<&ResourceRequirements>,
    ) -> Option<&BTreeMap<String, K8sQuantity>> {
        let resources = resources?;
        match self {
            // A missing request defaults to the limit, as the apiserver defaults it.
            Kind::Requests => resources.requests.as_ref().or(resources.limits.as_ref()),
            Kind::Limits => resources.limits.as_ref(),
        }
    }
}

/// Resources in exact integer units, added and compared per resource.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
struct Amounts {
    cpu_millis: u64,
    memory_bytes: u64,
    ephemeral_storage_bytes: u64,
    gpus: u64,
}

impl Amounts {
    fn plus(self, other: Amounts) -> Amounts {
        Amounts {
            cpu_millis: self.cpu_millis.saturating_add(other.cpu_millis),
            memory_bytes: self.memory_bytes.saturating_add(other.memory_bytes),
            ephemeral_storage_bytes: self
                .ephemeral_storage_bytes
                .saturating_add(other.ephemeral_storage_bytes),
            gpus: self.gpus.saturating_add(other.gpus),
        }
    }

    fn max(self, other: Amounts) -> Amounts {
        Amounts {
            cpu_millis: self.cpu_millis.max(other.cpu_millis),
            memory_bytes: self.memory_bytes.max(other.memory_bytes),
            ephemeral_storage_bytes: self
                .ephemeral_storage_bytes
                .max(other.ephemeral_storage_bytes),
            gpus: self.gpus.max(other.gpus),
        }
    }
}

fn effective(
    containers: &[Container],
    init: &[Container],
    overhead: Option<&BTreeMap<String, K8sQuantity>>,
    kind: Kind,
) -> Result<Resources, PodViewError> {
    let mut app = Amounts::default();
    for container in containers {
        app = app.plus(amounts(
            &container.name,
            kind.of(container.resources.as_ref()),
            kind,
        )?);
    }
    let mut sidecars = Amounts::default();
    let mut init_peak = Amounts::default();
    for container in init {
        let own = amounts(&container.name, kind.of(container.resources.as_ref()), kind)?;
        if container.restart_policy.as_deref() == Some("Always") {
            sidecars = sidecars.plus(own);
        } else {
            init_peak = init_peak.max(own.plus(sidecars));
        }
    }
    let total = app
        .plus(sidecars)
        .max(init_peak)
        .plus(amounts("(pod overhead)", overhead, kind)?);
    Ok(Resources {
        cpu_millis: total.cpu_millis,
        memory_bytes: total.memory_bytes,
        ephemeral_storage_bytes: total.ephemeral_storage_bytes,
        gpus: u32::try_from(total.gpus).unwrap_or(u32::MAX),
    })
}

fn amounts(
    container: &str,
    quantities: Option<&BTreeMap<String, K8sQuantity>>,
    kind: Kind,
) -> Result<Amounts, PodViewError> {
    let Some(quantities) = quantities else {
        return Ok(Amounts::default());
    };
    let read = |resource: &str, millis: bool| -> Result<u64, PodViewError> {
        let Some(K8sQuantity(text)) = quantities.get(resource) else {
            return Ok(0);
        };
        let bad = || PodViewError::BadQuantity {
            container: container.to_owned(),
            kind: kind.name(),
            resource: resource.to_owned(),
            value: text.clone(),
        };
        let quantity: Quantity = text.parse().map_err(|_| bad())?;
        let value = if millis {
            quantity.to_millis_ceil()
        } else {
            quantity.to_units_ceil()
        }
        .map_err(|_| bad())?;
        u64::try_from(value).map_err(|_| bad())
    };
    Ok(Amounts {
        cpu_millis: read("cpu", true)?,
        memory_bytes: read("memory", false)?,
        ephemeral_storage_bytes: read("ephemeral-storage", false)?,
        gpus: read(GPU, false)?,
    })
}

#[cfg(test)]
mod tests;
