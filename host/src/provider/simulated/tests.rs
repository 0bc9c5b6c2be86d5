use std::collections::BTreeMap;
use std::time::Duration;

use k8s_openapi::api::core::v1::{Container, Pod, PodSpec};
use kube::api::ObjectMeta;
use serde_json::json;

use super::*;
use crate::config::Seconds;
use crate::provider::plan::LaunchPlan;
use crate::provider::zones::ZoneConstraint;
use crate::provider::{InstanceState, LogCursor};
use crate::workload::source::fake::FakeSource;
use crate::workload::testing::LaunchPod;
use crate::workload::{EnvValue, VolumeFile, VolumeSpec, launch_request};

fn pod(uid: &str, annotations: &[(&str, &str)]) -> Pod {
    Pod {
        metadata: ObjectMeta {
            namespace: Some("ns".into()),
            name: Some(format!("pod-{uid}")),
            uid: Some(uid.into()),
            annotations: Some(
                annotations
                    .iter()
                    .map(|(k, v)| (format!("{ANNOTATION_PREFIX}{k}"), v.to_string()))
                    .collect::<BTreeMap<_, _>>(),
            ),
            ..ObjectMeta::default()
        },
        spec: Some(PodSpec {
            containers: vec![Container {
                name: "main".into(),
                image: Some("busybox".into()),
                ..Container::default()
            }],
            ..PodSpec::default()
        }),
        ..Pod::default()
    }
}

fn plan() -> LaunchPlan {
    LaunchPlan::on_demand("m5.large")
}

fn fast() -> SimulatedConfig {
    SimulatedConfig {
        boot_delay: Seconds::from_millis(0),
        ..SimulatedConfig::default()
    }
}

fn key(uid: &str) -> PodKey {
    PodKey {
        namespace: "ns".into(),
        name: format!("pod-{uid}"),
        uid: uid.into(),
    }
}

#[tokio::test]
async fn create_is_idempotent_per_pod_uid() {
    let provider = SimulatedProvider::new(fast()).unwrap();
    provider.launch_pod(&pod("a", &[]), &plan()).await.unwrap();
    provider.launch_pod(&pod("a", &[]), &plan()).await.unwrap();
    provider.launch_pod(&pod("b", &[]), &plan()).await.unwrap();
    let statuses = provider.statuses().await.unwrap();
    assert_eq!(statuses.len(), 2);
}

#[tokio::test]
async fn injected_transient_error_clears_after_n_attempts() {
    let provider = SimulatedProvider::new(fast()).unwrap();
    let flaky = pod("a", &[("launch-error", "transient:2")]);
    for _ in 0..2 {
        let error = provider
            .launch_pod(&flaky, &plan())
            .await
            .unwrap_err()
            .error;
        assert_eq!(error.class, ErrorClass::Transient);
    }
    provider.launch_pod(&flaky, &plan()).await.unwrap();
    assert_eq!(provider.statuses().await.unwrap().len(), 1);
}

#[tokio::test]
async fn capacity_error_carries_the_aws_code() {
    let provider = SimulatedProvider::new(fast()).unwrap();
    let error = provider
        .launch_pod(&pod("a", &[("launch-error", "capacity")]), &plan())
        .await
        .unwrap_err()
        .error;
    assert_eq!(
        (error.class, error.code.as_str()),
        (ErrorClass::Capacity, "InsufficientInstanceCapacity")
    );
}

#[tokio::test]
async fn an_unknown_id_is_unknown_and_terminate_terminates() {
    let provider = SimulatedProvider::new(SimulatedConfig {
        shutdown_delay: Seconds::from_millis(0),
        ..fast()
    })
    .unwrap();
    assert_eq!(
        provider.terminate("i-0simnobody").await.unwrap(),
        Termination::Unknown
    );
    let launched = provider.launch_pod(&pod("a", &[]), &plan()).await.unwrap();
    assert_eq!(
        provider.terminate(&launched.instance_id).await.unwrap(),
        Termination::Requested
    );
    let statuses = provider.statuses().await.unwrap();
    assert_eq!(statuses[0].state, InstanceState::Terminated);
    let looked_up = provider
        .lookup(&key("a"), &launched.instance_id)
        .await
        .unwrap();
    assert_eq!(looked_up.map(|s| s.state), Some(InstanceState::Terminated));
}

#[tokio::test]
async fn ping_fails_while_the_outage_file_exists() {
    let dir = tempfile::tempdir().unwrap();
    let outage = dir.path().join("outage");
    let provider = SimulatedProvider::new(SimulatedConfig {
        outage_file: Some(outage.clone()),
        ..fast()
    })
    .unwrap();
    provider.ping().await.unwrap();
    std::fs::write(&outage, "").unwrap();
    assert_eq!(
        provider.ping().await.unwrap_err().code,
        "ProviderUnavailable"
    );
}

#[tokio::test]
async fn instances_outlive_the_provider_through_the_journal() {
    let dir = tempfile::tempdir().unwrap();
    let settings = SimulatedConfig {
        state_file: Some(dir.path().join("journal")),
        ..fast()
    };
    let first = SimulatedProvider::new(settings.clone()).unwrap();
    first.launch_pod(&pod("a", &[]), &plan()).await.unwrap();
    let b = first.launch_pod(&pod("b", &[]), &plan()).await.unwrap();
    first.terminate(&b.instance_id).await.unwrap();
    let before = first.statuses().await.unwrap();
    drop(first);

    let second = SimulatedProvider::new(settings).unwrap();
    let mut after = second.statuses().await.unwrap();
    let mut before = before;
    before.sort_by(|a, b| a.instance_id.cmp(&b.instance_id));
    after.sort_by(|a, b| a.instance_id.cmp(&b.instance_id));
    assert_eq!(
        before.iter().map(|s| &s.instance_id).collect::<Vec<_>>(),
        after.iter().map(|s| &s.instance_id).collect::<Vec<_>>()
    );
    // Re-creating an adopted pod does not duplicate it, and new ids do not collide.
    second.launch_pod(&pod("a", &[]), &plan()).await.unwrap();
    second.launch_pod(&pod("c", &[]), &plan()).await.unwrap();
    let ids: std::collections::HashSet<String> = second
        .statuses()
        .await
        .unwrap()
        .into_iter()
        .map(|s| s.instance_id)
        .collect();
    assert_eq!(ids.len(), 3);
}

#[tokio::test]
async fn logs_of_a_running_instance_are_read_whole_and_then_after_their_cursor() {
    let provider = SimulatedProvider::new(fast()).unwrap();
    provider.launch_pod(&pod("a", &[]), &plan()).await.unwrap();
    tokio::time::sleep(Duration::from_millis(1100)).await;
    let all = provider
        .log_page(&key("a"), "main", &LogStart::Head { since: None })
        .await
        .unwrap();
    assert!(
        all.lines
            .iter()
            .any(|line| line.text.contains("container main started")),
        "{all:?}"
    );
    let last = provider
        .log_page(
            &key("a"),
            "main",
            &LogStart::Tail {
                lines: 1,
                since: None,
            },
        )
        .await
        .unwrap();
    assert_eq!(last.lines.len(), 1);
    tokio::time::sleep(Duration::from_millis(1100)).await;
    let after = provider
        .log_page(&key("a"), "main", &LogStart::After(all.next.clone()))
        .await
        .unwrap();
    assert!(!after.lines.is_empty(), "a heartbeat a second: {after:?}");
    let LogCursor::Line(read) = all.next else {
        panic!("a whole source counts lines: {:?}", all.next)
    };
    assert_eq!(after.next, LogCursor::Line(read + after.lines.len()));
}

/// The simulated provider is given what the aws one is: a test on it sees the environment and
/// the volumes the Launch step resolved, also after a restart (they are journalled).
#[tokio::test]
async fn a_launch_records_the_resolved_env_and_volumes() {
    let dir = tempfile::tempdir().unwrap();
    let settings = SimulatedConfig {
        state_file: Some(dir.path().join("journal")),
        ..fast()
    };
    let pod: Pod = serde_json::from_value(json!({
        "metadata": { "name": "trainer", "namespace": "ml", "uid": "u-1" },
        "spec": {
            "containers": [{
                "name": "main",
                "image": "busybox",
                "env": [
                    { "name": "MODE", "valueFrom": { "configMapKeyRef": { "name": "settings", "key": "mode" } } },
                    { "name": "TOKEN", "valueFrom": { "secretKeyRef": { "name": "wandb", "key": "api-key" } } }
                ],
                "volumeMounts": [
                    { "name": "config", "mountPath": "/etc/trainer" },
                    { "name": "scratch", "mountPath": "/scratch" }
                ]
            }],
            "volumes": [
                { "name": "config", "configMap": { "name": "settings" } },
                { "name": "scratch", "emptyDir": {} }
            ]
        }
    }))
    .unwrap();
    let objects = FakeSource::default()
        .config_map("settings", &[("mode", "fast")])
        .secret("wandb", &[("api-key", "k3y")]);
    let plan = LaunchPlan::on_demand("m5.large");
    let request = launch_request(&pod, &plan, ZoneConstraint::of(&pod), &objects)
        .await
        .unwrap();
    let provider = SimulatedProvider::new(settings.clone()).unwrap();
    provider.create(&request).await.unwrap();
    drop(provider);

    let restarted = SimulatedProvider::new(settings).unwrap();
    let workload = restarted.workload_of("u-1").expect("the launch's workload");
    assert_eq!(workload, request.workload);
    assert_eq!(
        workload.containers[0].env,
        [
            ("MODE".to_owned(), EnvValue::literal("fast")),
            ("TOKEN".to_owned(), EnvValue::literal("k3y")),
        ]
    );
    assert_eq!(
        workload.volumes,
        [
            VolumeSpec::Files {
                name: "config".into(),
                files: vec![VolumeFile {
                    path: "mode".into(),
                    mode: 0o644,
                    content: "fast".into(),
                }],
            },
            VolumeSpec::Directory {
                name: "scratch".into()
            },
        ]
    );
    let mounts: Vec<&str> = workload.containers[0]
        .mounts
        .iter()
        .map(|mount| mount.container_path.as_str())
        .collect();
    assert_eq!(mounts, ["/etc/trainer", "/scratch"]);
}

/// A pod `uid` mounting claim `data`, bound to EBS volume `vol-0123456789abcdef0`, and its
/// launch request.
async fn claim_request(uid: &str) -> LaunchRequest {
    let pod: Pod = serde_json::from_value(json!({
        "metadata": { "name": format!("pod-{uid}"), "namespace": "ml", "uid": uid },
        "spec": {
            "containers": [{ "name": "main", "image": "busybox",
                             "volumeMounts": [{ "name": "data", "mountPath": "/data" }] }],
            "volumes": [{ "name": "data", "persistentVolumeClaim": { "claimName": "data" } }]
        }
    }))
    .unwrap();
    let objects = FakeSource::default().with_bound_claim(
        "data",
        json!({ "driver": "ebs.csi.aws.com", "volumeHandle": "vol-0123456789abcdef0" }),
    );
    launch_request(&pod, &plan(), ZoneConstraint::of(&pod), &objects)
        .await
        .unwrap()
}

#[tokio::test]
async fn volumes_attach_to_one_live_instance_at_a_time_and_survive_a_restart() {
    let dir = tempfile::tempdir().unwrap();
    let settings = SimulatedConfig {
        state_file: Some(dir.path().join("journal")),
        shutdown_delay: Seconds::from_millis(0),
        ..fast()
    };
    let provider = SimulatedProvider::new(settings.clone()).unwrap();
    provider.create(&claim_request("a").await).await.unwrap();
    provider.create(&claim_request("b").await).await.unwrap();
    let listed = provider.statuses().await.unwrap();
    let of = |uid: &str| {
        listed
            .iter()
            .find(|status| status.pod.uid == uid)
            .cloned()
            .unwrap()
    };
    let (a, b) = (of("a"), of("b"));
    assert_eq!(a.volumes[0].device, "/dev/sdf");
    let attached = provider.attach(&a).await.unwrap();
    assert_eq!(attached[0].volume_id, "vol-0123456789abcdef0");
    let refused = provider.attach(&b).await.unwrap_err();
    assert_eq!(
        (refused.code.as_str(), refused.class),
        ("VolumeInUse", ErrorClass::Transient)
    );
    assert!(refused.message.contains(&a.instance_id), "{refused}");
    drop(provider);

    // The journal keeps the attachment; once `a` has ended, `b` gets the volume.
    let restarted = SimulatedProvider::new(settings).unwrap();
    let listed = restarted.statuses().await.unwrap();
    let a = listed.iter().find(|status| status.pod.uid == "a").unwrap();
    assert!(a.volumes[0].attached, "{a:?}");
    restarted.terminate(&a.instance_id).await.unwrap();
    tokio::time::sleep(Duration::from_millis(20)).await;
    restarted.attach(&b).await.unwrap();
}
