use k8s_openapi::api::core::v1::{Container, PodSpec, ResourceRequirements};
use kube::api::ObjectMeta;

use super::*;

fn container(name: &str, cpu: &str, memory: &str, gpus: Option<&str>) -> Container {
    let mut quantities: BTreeMap<String, K8sQuantity> = [("cpu", cpu), ("memory", memory)]
        .into_iter()
        .map(|(k, v)| (k.to_owned(), K8sQuantity(v.to_owned())))
        .collect();
    if let Some(gpus) = gpus {
        quantities.insert(GPU.to_owned(), K8sQuantity(gpus.to_owned()));
    }
    Container {
        name: name.to_owned(),
        resources: Some(ResourceRequirements {
            requests: Some(quantities.clone()),
            limits: Some(quantities),
            ..ResourceRequirements::default()
        }),
        ..Container::default()
    }
}

fn sidecar(name: &str, cpu: &str, memory: &str) -> Container {
    Container {
        restart_policy: Some("Always".to_owned()),
        ..container(name, cpu, memory, None)
    }
}

fn pod(containers: Vec<Container>, init: Vec<Container>) -> Pod {
    Pod {
        metadata: ObjectMeta {
            namespace: Some("ml".into()),
            name: Some("train".into()),
            uid: Some("uid-1".into()),
            labels: Some([("team".to_owned(), "ml".to_owned())].into()),
            annotations: Some(
                [(
                    "orca.research/instance-type".to_owned(),
                    "p5.48xlarge".to_owned(),
                )]
                .into(),
            ),
            ..ObjectMeta::default()
        },
        spec: Some(PodSpec {
            containers,
            init_containers: Some(init),
            priority: Some(1000),
            ..PodSpec::default()
        }),
        ..Pod::default()
    }
}

#[test]
fn app_containers_are_summed_with_exact_units() {
    let view = pod_view(&pod(
        vec![
            container("a", "500m", "1Gi", Some("8")),
            container("b", "1.5", "512Mi", None),
        ],
        vec![],
    ))
    .unwrap();
    assert_eq!(view.requests.cpu_millis, 2000);
    assert_eq!(view.requests.memory_bytes, (1 << 30) + (512 << 20));
    assert_eq!(view.requests.gpus, 8);
    assert_eq!(view.limits.gpus, 8);
    assert_eq!(
        (
            view.namespace.as_str(),
            view.name.as_str(),
            view.uid.as_str()
        ),
        ("ml", "train", "uid-1")
    );
    assert_eq!(view.labels, vec![("team".to_owned(), "ml".to_owned())]);
    assert_eq!(view.priority, Some(1000));
    assert!(view.json.contains("p5.48xlarge"));
}

#[test]
fn a_large_init_container_sets_the_peak() {
    let view = pod_view(&pod(
        vec![container("app", "1", "1Gi", None)],
        vec![container("migrate", "4", "512Mi", None)],
    ))
    .unwrap();
    assert_eq!(view.requests.cpu_millis, 4000, "init needs 4 CPUs alone");
    assert_eq!(
        view.requests.memory_bytes,
        1 << 30,
        "the app needs more memory"
    );
}

#[test]
fn sidecars_run_beside_the_app_and_later_init_containers() {
    let view = pod_view(&pod(
        vec![container("app", "1", "1Gi", None)],
        vec![
            sidecar("proxy", "500m", "256Mi"),
            container("setup", "2", "128Mi", None),
        ],
    ))
    .unwrap();
    // app + sidecar = 1.5 CPU; setup + sidecar = 2.5 CPU.
    assert_eq!(view.requests.cpu_millis, 2500);
    assert_eq!(view.requests.memory_bytes, (1 << 30) + (256 << 20));
}

#[test]
fn a_missing_request_defaults_to_the_limit() {
    let mut only_limits = container("app", "2", "1Gi", None);
    only_limits.resources.as_mut().unwrap().requests = None;
    let view = pod_view(&pod(vec![only_limits], vec![])).unwrap();
    assert_eq!(view.requests.cpu_millis, 2000);
}

#[test]
fn pod_overhead_is_added() {
    let mut with_overhead = pod(vec![container("app", "1", "1Gi", None)], vec![]);
    with_overhead.spec.as_mut().unwrap().overhead =
        Some([("cpu".to_owned(), K8sQuantity("250m".to_owned()))].into());
    assert_eq!(pod_view(&with_overhead).unwrap().requests.cpu_millis, 1250);
}

#[test]
fn an_unusable_quantity_is_an_error_naming_the_container() {
    let error = pod_view(&pod(vec![container("app", "lots", "1Gi", None)], vec![])).unwrap_err();
    assert!(
        error.to_string().contains("container app") && error.to_string().contains("\"lots\""),
        "{error}"
    );
}
