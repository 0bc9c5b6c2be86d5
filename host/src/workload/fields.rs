//! The downward API for environment variables: `fieldRef` and `resourceFieldRef`, answered as
//! the kubelet answers them (`pkg/kubelet/kubelet_pods.go`, `pkg/api/v1/resource`).

use k8s_openapi::api::core::v1::{Container, Pod, ResourceFieldSelector};
use orca_plugin_sdk::Quantity;

use super::value::{EnvValue, InstanceFact};

/// The `fieldPath`s the kubelet accepts in an environment variable.
const SUPPORTED_FIELDS: &str = "metadata.name, metadata.namespace, metadata.uid, \
     metadata.labels['KEY'], metadata.annotations['KEY'], spec.nodeName, \
     spec.serviceAccountName, status.podIP, status.podIPs, status.hostIP or status.hostIPs";

/// Why a `fieldRef` or `resourceFieldRef` has no value for an environment variable. Each
/// message names the value that was wrong and what would be accepted; the env resolver puts
/// the container and the variable in front (`EnvError::Field`).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum FieldError {
    #[error("fieldRef {path:?} is not supported; expected one of {SUPPORTED_FIELDS}")]
    UnsupportedField { path: String },
    #[error("resourceFieldRef names container {name:?}, which the pod does not have")]
    ContainerNotFound { name: String },
    #[error(
        "resourceFieldRef {resource:?} is not supported; expected limits.cpu, limits.memory, \
         limits.ephemeral-storage, requests.cpu, requests.memory or requests.ephemeral-storage"
    )]
    UnsupportedResource { resource: String },
    #[error("resourceFieldRef divisor {divisor:?} is not a positive quantity")]
    DivisorNotPositive { divisor: String },
    #[error("{resource} {quantity:?} of container {container:?} is not a usable quantity")]
    QuantityUnusable {
        resource: String,
        quantity: String,
        container: String,
    },
}

/// The value of `fieldRef.fieldPath`; a missing label or annotation is empty, as in the kubelet.
///
/// # Errors
/// [`FieldError::UnsupportedField`], naming the path and the accepted ones.
pub(crate) fn field_value(pod: &Pod, path: &str) -> Result<EnvValue, FieldError> {
    let metadata = &pod.metadata;
    let spec = pod.spec.as_ref();
    let text = |value: Option<&String>| Ok(EnvValue::literal(value.cloned().unwrap_or_default()));
    match path {
        "metadata.name" => text(metadata.name.as_ref()),
        "metadata.namespace" => Ok(EnvValue::literal(
            metadata.namespace.as_deref().unwrap_or("default"),
        )),
        "metadata.uid" => text(metadata.uid.as_ref()),
        "spec.nodeName" => text(spec.and_then(|s| s.node_name.as_ref())),
        "spec.serviceAccountName" => text(spec.and_then(|s| s.service_account_name.as_ref())),
        "status.podIP" | "status.podIPs" | "status.hostIP" | "status.hostIPs" => {
            Ok(EnvValue::instance(InstanceFact::Ip))
        }
        _ => {
            let subscripted = path
                .strip_suffix("']")
                .and_then(|head| head.split_once("['"));
            match subscripted {
                Some(("metadata.labels", key)) => {
                    text(metadata.labels.as_ref().and_then(|m| m.get(key)))
                }
                Some(("metadata.annotations", key)) => {
                    text(metadata.annotations.as_ref().and_then(|m| m.get(key)))
                }
                _ => Err(FieldError::UnsupportedField {
                    path: path.to_owned(),
                }),
            }
        }
    }
}

/// Which resource a `resourceFieldRef` reads, and how.
#[derive(Clone, Copy)]
enum Resource {
    Cpu,
    Memory,
    EphemeralStorage,
}

/// The value of `resourceFieldRef`: the quantity divided by the divisor (default 1) and
/// rounded up — CPU in millicores, memory and storage in bytes — as the kubelet computes it.
/// An unset limit is the instance's capacity (the kubelet uses node allocatable), known only on
/// the instance; an unset request is 0.
///
/// # Errors
/// [`FieldError`] for an unknown resource, an unknown `containerName`, a divisor or a quantity
/// that does not parse (the apiserver validates these, so the last three are guards).
pub(crate) fn resource_value(
    pod: &Pod,
    container: &Container,
    selector: &ResourceFieldSelector,
) -> Result<EnvValue, FieldError> {
    let target = match selector.container_name.as_deref() {
        None | Some("") => container,
        Some(name) => find_container(pod, name).ok_or_else(|| FieldError::ContainerNotFound {
            name: name.to_owned(),
        })?,
    };
    let (limits, key, resource) = match selector.resource.split_once('.') {
        Some((kind @ ("limits" | "requests"), key)) => {
            let resource = match key {
                "cpu" => Resource::Cpu,
                "memory" => Resource::Memory,
                "ephemeral-storage" => Resource::EphemeralStorage,
                _ => return Err(unsupported_resource(&selector.resource)),
            };
            (kind == "limits", key, resource)
        }
        _ => return Err(unsupported_resource(&selector.resource)),
    };
    let divisor_text = selector.divisor.as_ref().map_or("1", |q| q.0.as_str());
    let divisor = match resource {
        Resource::Cpu => millis(divisor_text),
        Resource::Memory | Resource::EphemeralStorage => units(divisor_text),
    }
    .filter(|&divisor| divisor > 0)
    .ok_or_else(|| FieldError::DivisorNotPositive {
        divisor: divisor_text.to_owned(),
    })?;

    let resources = target.resources.as_ref();
    let quantities = if limits {
        resources.and_then(|r| r.limits.as_ref())
    } else {
        resources.and_then(|r| r.requests.as_ref())
    };
    let Some(quantity) = quantities.and_then(|q| q.get(key)) else {
        if !limits {
            return Ok(EnvValue::literal("0"));
        }
        return Ok(EnvValue::instance(match resource {
            Resource::Cpu => InstanceFact::Cpu {
                divisor_millis: divisor,
            },
            Resource::Memory => InstanceFact::Memory {
                divisor_bytes: divisor,
            },
            Resource::EphemeralStorage => InstanceFact::EphemeralStorage {
                divisor_bytes: divisor,
            },
        }));
    };
    let amount = match resource {
        Resource::Cpu => millis(&quantity.0),
        Resource::Memory | Resource::EphemeralStorage => units(&quantity.0),
    }
    .ok_or_else(|| FieldError::QuantityUnusable {
        resource: selector.resource.clone(),
        quantity: quantity.0.clone(),
        container: target.name.clone(),
    })?;
    Ok(EnvValue::literal(amount.div_ceil(divisor).to_string()))
}

/// [`FieldError::UnsupportedResource`] for the selector's `resource`.
fn unsupported_resource(resource: &str) -> FieldError {
    FieldError::UnsupportedResource {
        resource: resource.to_owned(),
    }
}

/// A container of the pod, regular or init, by name.
pub(crate) fn find_container<'p>(pod: &'p Pod, name: &str) -> Option<&'p Container> {
    let spec = pod.spec.as_ref()?;
    spec.containers
        .iter()
        .chain(spec.init_containers.iter().flatten())
        .find(|c| c.name == name)
}

/// A non-negative quantity in thousandths, rounded up.
pub(crate) fn millis(text: &str) -> Option<u64> {
    let quantity: Quantity = text.parse().ok()?;
    u64::try_from(quantity.to_millis_ceil().ok()?).ok()
}

/// A non-negative quantity in whole units, rounded up.
pub(crate) fn units(text: &str) -> Option<u64> {
    let quantity: Quantity = text.parse().ok()?;
    u64::try_from(quantity.to_units_ceil().ok()?).ok()
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use k8s_openapi::api::core::v1::{PodSpec, ResourceRequirements};
    use k8s_openapi::apimachinery::pkg::api::resource::Quantity as K8sQuantity;
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;

    use super::*;

    fn quantities(pairs: &[(&str, &str)]) -> Option<BTreeMap<String, K8sQuantity>> {
        Some(
            pairs
                .iter()
                .map(|(k, v)| ((*k).to_owned(), K8sQuantity((*v).to_owned())))
                .collect(),
        )
    }

    fn pod() -> Pod {
        let container =
            |name: &str, limits: &[(&str, &str)], requests: &[(&str, &str)]| Container {
                name: name.to_owned(),
                resources: Some(ResourceRequirements {
                    limits: quantities(limits),
                    requests: quantities(requests),
                    ..ResourceRequirements::default()
                }),
                ..Container::default()
            };
        Pod {
            metadata: ObjectMeta {
                name: Some("train-1".into()),
                namespace: Some("ml".into()),
                uid: Some("u-1".into()),
                labels: Some(BTreeMap::from([("team".into(), "vision".into())])),
                annotations: Some(BTreeMap::from([("a/b".into(), "c".into())])),
                ..ObjectMeta::default()
            },
            spec: Some(PodSpec {
                node_name: Some("orca".into()),
                service_account_name: Some("trainer-sa".into()),
                containers: vec![
                    container(
                        "trainer",
                        &[("cpu", "1500m"), ("memory", "1Gi")],
                        &[("cpu", "250m"), ("memory", "1Gi")],
                    ),
                    container("sidecar", &[], &[]),
                ],
                init_containers: Some(vec![container("setup", &[("cpu", "2")], &[])]),
                ..PodSpec::default()
            }),
            ..Pod::default()
        }
    }

    /// The field's value, or its error's message as users see it.
    fn field(path: &str) -> Result<EnvValue, String> {
        field_value(&pod(), path).map_err(|error| error.to_string())
    }

    fn resource(container: &str, resource: &str, divisor: Option<&str>) -> EnvValue {
        try_resource(container, None, resource, divisor).unwrap()
    }

    fn try_resource(
        container: &str,
        target: Option<&str>,
        resource: &str,
        divisor: Option<&str>,
    ) -> Result<EnvValue, String> {
        let pod = pod();
        let container = find_container(&pod, container).unwrap().clone();
        let selector = ResourceFieldSelector {
            container_name: target.map(str::to_owned),
            resource: resource.to_owned(),
            divisor: divisor.map(|d| K8sQuantity(d.to_owned())),
        };
        resource_value(&pod, &container, &selector).map_err(|error| error.to_string())
    }

    #[test]
    fn metadata_and_spec_fields_are_known_at_launch() {
        let literal = |path: &str| field(path).unwrap().as_literal().unwrap().to_owned();
        assert_eq!(literal("metadata.name"), "train-1");
        assert_eq!(literal("metadata.namespace"), "ml");
        assert_eq!(literal("metadata.uid"), "u-1");
        assert_eq!(literal("spec.nodeName"), "orca");
        assert_eq!(literal("spec.serviceAccountName"), "trainer-sa");
        assert_eq!(literal("metadata.labels['team']"), "vision");
        assert_eq!(literal("metadata.annotations['a/b']"), "c");
    }

    #[test]
    fn a_missing_label_is_empty_as_in_the_kubelet() {
        assert_eq!(
            field("metadata.labels['absent']").unwrap().as_literal(),
            Some("")
        );
    }

    #[test]
    fn ip_fields_are_left_to_the_instance() {
        for path in [
            "status.podIP",
            "status.podIPs",
            "status.hostIP",
            "status.hostIPs",
        ] {
            assert_eq!(field(path).unwrap(), EnvValue::instance(InstanceFact::Ip));
        }
    }

    #[test]
    fn an_unsupported_field_names_the_path_and_the_accepted_ones() {
        let error = field("metadata.labels").unwrap_err();
        assert!(error.starts_with(r#"fieldRef "metadata.labels" is not supported"#));
        assert!(error.contains("status.podIP"), "{error}");
        assert!(field("spec.containers").is_err());
    }

    #[test]
    fn cpu_rounds_up_to_whole_cores_with_the_default_divisor() {
        assert_eq!(
            resource("trainer", "limits.cpu", None),
            EnvValue::literal("2")
        );
        assert_eq!(
            resource("trainer", "requests.cpu", None),
            EnvValue::literal("1")
        );
        assert_eq!(
            resource("trainer", "limits.cpu", Some("1m")),
            EnvValue::literal("1500")
        );
    }

    #[test]
    fn memory_is_in_bytes_divided_and_rounded_up() {
        assert_eq!(
            resource("trainer", "limits.memory", None),
            EnvValue::literal("1073741824")
        );
        assert_eq!(
            resource("trainer", "requests.memory", Some("1Mi")),
            EnvValue::literal("1024")
        );
        assert_eq!(
            resource("trainer", "limits.memory", Some("1G")),
            EnvValue::literal("2")
        );
    }

    #[test]
    fn unset_limits_are_the_instance_capacity_and_unset_requests_zero() {
        assert_eq!(
            resource("sidecar", "limits.cpu", Some("1m")),
            EnvValue::instance(InstanceFact::Cpu { divisor_millis: 1 })
        );
        assert_eq!(
            resource("sidecar", "limits.memory", Some("1Mi")),
            EnvValue::instance(InstanceFact::Memory {
                divisor_bytes: 1 << 20
            })
        );
        assert_eq!(
            resource("sidecar", "limits.ephemeral-storage", None),
            EnvValue::instance(InstanceFact::EphemeralStorage { divisor_bytes: 1 })
        );
        assert_eq!(
            resource("sidecar", "requests.cpu", None),
            EnvValue::literal("0")
        );
    }

    #[test]
    fn container_name_reads_another_container_init_containers_included() {
        assert_eq!(
            try_resource("sidecar", Some("setup"), "limits.cpu", None).unwrap(),
            EnvValue::literal("2")
        );
        let error = try_resource("sidecar", Some("ghost"), "limits.cpu", None).unwrap_err();
        assert!(error.contains(r#"container "ghost""#), "{error}");
    }

    #[test]
    fn unsupported_resources_and_divisors_are_errors() {
        let error = try_resource("trainer", None, "limits.nvidia.com/gpu", None).unwrap_err();
        assert!(
            error.contains("is not supported; expected limits.cpu"),
            "{error}"
        );
        assert!(try_resource("trainer", None, "cpu", None).is_err());
        let error = try_resource("trainer", None, "limits.cpu", Some("0")).unwrap_err();
        assert!(error.contains(r#"divisor "0""#), "{error}");
    }
}
