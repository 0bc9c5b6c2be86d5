//! What the node keeps of each pod: the pod as the apiserver has it, less what orca never
//! reads and nearly every pod carries. The store holds every pod of the node, and at a few
//! thousand pods it is most of orca's memory (a bench pod is about 14 KiB in k8s-openapi's
//! types, which keep every optional part inline), so this is cut before a pod gets there.

use k8s_openapi::api::core::v1::{Container, Pod, Volume};

/// The prefix of the volume the ServiceAccount admission controller adds to every pod.
const SERVICE_ACCOUNT_VOLUME_PREFIX: &str = "kube-api-access-";

/// Whether `volume` is the projected service-account token volume the ServiceAccount
/// admission controller adds. Instances do not get it: they are outside the cluster network,
/// so a token would not help them reach the apiserver.
pub fn is_service_account_token(volume: &Volume) -> bool {
    volume.projected.is_some() && volume.name.starts_with(SERVICE_ACCOUNT_VOLUME_PREFIX)
}

/// Drops from `pod` what orca never uses:
/// - who last wrote which field (`managedFields`);
/// - the service-account token volume and its mounts, which no instance gets. k8s-openapi's
///   `Volume` alone is 3 KiB inline, its projections half a KiB each: a third of each stored
///   pod (about 25 MiB of the store at 5,000 pods).
///
/// `GET /pods` serves pods as stored, so it shows them without these too.
pub fn trim(pod: &mut Pod) {
    pod.metadata.managed_fields = None;
    let Some(spec) = pod.spec.as_mut() else {
        return;
    };
    let Some(volumes) = spec.volumes.as_mut() else {
        return;
    };
    let tokens: Vec<String> = volumes
        .iter()
        .filter(|volume| is_service_account_token(volume))
        .map(|volume| volume.name.clone())
        .collect();
    if tokens.is_empty() {
        return;
    }
    volumes.retain(|volume| !tokens.contains(&volume.name));
    if volumes.is_empty() {
        spec.volumes = None;
    }
    let containers = spec
        .containers
        .iter_mut()
        .chain(spec.init_containers.iter_mut().flatten());
    for container in containers {
        drop_mounts(container, &tokens);
    }
}

fn drop_mounts(container: &mut Container, volumes: &[String]) {
    if let Some(mounts) = container.volume_mounts.as_mut() {
        mounts.retain(|mount| !volumes.contains(&mount.name));
        if mounts.is_empty() {
            container.volume_mounts = None;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pod(json: serde_json::Value) -> Pod {
        serde_json::from_value(json).expect("a pod")
    }

    /// As the ServiceAccount admission controller leaves a pod, with a volume of the pod's own.
    fn admitted_pod() -> Pod {
        pod(serde_json::json!({
            "metadata": {
                "name": "train-0",
                "managedFields": [{"manager": "kubectl", "operation": "Update"}]
            },
            "spec": {
                "containers": [{
                    "name": "main",
                    "image": "busybox",
                    "volumeMounts": [
                        {"name": "scratch", "mountPath": "/scratch"},
                        {"name": "kube-api-access-x7k2p", "mountPath": "/var/run/secrets/kubernetes.io/serviceaccount", "readOnly": true}
                    ]
                }],
                "initContainers": [{
                    "name": "init",
                    "image": "busybox",
                    "volumeMounts": [
                        {"name": "kube-api-access-x7k2p", "mountPath": "/var/run/secrets/kubernetes.io/serviceaccount", "readOnly": true}
                    ]
                }],
                "volumes": [
                    {"name": "scratch", "emptyDir": {}},
                    {"name": "kube-api-access-x7k2p", "projected": {"sources": [
                        {"serviceAccountToken": {"expirationSeconds": 3607, "path": "token"}},
                        {"configMap": {"name": "kube-root-ca.crt", "items": [{"key": "ca.crt", "path": "ca.crt"}]}}
                    ]}}
                ]
            }
        }))
    }

    #[test]
    fn the_token_volume_and_its_mounts_go_and_everything_else_stays() {
        let mut trimmed = admitted_pod();
        trim(&mut trimmed);
        assert!(trimmed.metadata.managed_fields.is_none());
        let spec = trimmed.spec.as_ref().unwrap();
        let volumes: Vec<&str> = spec
            .volumes
            .iter()
            .flatten()
            .map(|v| v.name.as_str())
            .collect();
        assert_eq!(volumes, ["scratch"]);
        let mounts: Vec<&str> = spec.containers[0]
            .volume_mounts
            .iter()
            .flatten()
            .map(|m| m.name.as_str())
            .collect();
        assert_eq!(mounts, ["scratch"]);
        let init = &spec.init_containers.as_ref().unwrap()[0];
        assert!(init.volume_mounts.is_none(), "{init:?}");
        // Nothing else changed.
        let mut expected = admitted_pod();
        expected.metadata.managed_fields = None;
        let expected_spec = expected.spec.as_mut().unwrap();
        expected_spec.volumes.as_mut().unwrap().truncate(1);
        expected_spec.containers[0]
            .volume_mounts
            .as_mut()
            .unwrap()
            .truncate(1);
        expected_spec.init_containers.as_mut().unwrap()[0].volume_mounts = None;
        assert_eq!(trimmed, expected);
    }

    /// A volume named like the token volume but of another kind is the pod's own.
    #[test]
    fn only_a_projected_volume_is_taken_for_the_token() {
        let mut own = pod(serde_json::json!({
            "spec": {
                "containers": [{"name": "main", "volumeMounts": [{"name": "kube-api-access-mine", "mountPath": "/x"}]}],
                "volumes": [{"name": "kube-api-access-mine", "emptyDir": {}}]
            }
        }));
        let before = own.clone();
        trim(&mut own);
        assert_eq!(own, before);
    }

    #[test]
    fn a_pod_without_volumes_or_spec_is_left_alone() {
        let mut bare = Pod::default();
        trim(&mut bare);
        assert_eq!(bare, Pod::default());
    }
}
