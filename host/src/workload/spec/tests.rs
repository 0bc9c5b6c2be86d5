use std::sync::atomic::Ordering;

use serde_json::{Value, json};

use super::*;
use crate::workload::source::fake::FakeSource;
use crate::workload::value::{EnvPart, InstanceFact};

fn pod(spec: Value) -> Pod {
    serde_json::from_value(json!({
        "metadata": {"name": "train-1", "namespace": "ml", "uid": "u-1"},
        "spec": spec,
    }))
    .unwrap()
}

fn source() -> FakeSource {
    FakeSource::default()
        .config_map("settings", &[("LR", "0.1"), ("bad key", "x")])
        .secret("wandb", &[("api-key", "k")])
}

async fn build(spec: Value) -> Result<WorkloadSpec, WorkloadError> {
    workload_spec(&pod(spec), &source()).await
}

fn literal(values: &[EnvValue]) -> Vec<&str> {
    values.iter().map(|v| v.as_literal().unwrap()).collect()
}

/// A training pod: an init container, a sidecar, a GPU trainer with env from a ConfigMap, a
/// Secret and the downward API, an emptyDir, the service-account token volume and pull secrets.
async fn training_pod() -> WorkloadSpec {
    build(json!({
        "restartPolicy": "Never",
        "securityContext": {"runAsUser": 1000, "runAsGroup": 100},
        "imagePullSecrets": [{"name": "registry"}],
        "initContainers": [
            {"name": "fetch", "image": "amazon/aws-cli:2.15.0",
             "command": ["aws", "s3", "sync", "s3://bucket/$(DATASET)", "/data"],
             "env": [{"name": "DATASET", "value": "imagenet"}],
             "volumeMounts": [{"name": "data", "mountPath": "/data"}]},
            {"name": "logship", "image": "fluent/fluent-bit", "restartPolicy": "Always"},
        ],
        "containers": [{
            "name": "trainer",
            "image": "nvcr.io/nvidia/pytorch:24.05-py3",
            "imagePullPolicy": "Always",
            "args": ["--lr=$(LR)", "--key=$$(LR)", "--host=$(HOST_IP)"],
            "workingDir": "/workspace",
            "envFrom": [{"configMapRef": {"name": "settings"}}],
            "env": [
                {"name": "WANDB_API_KEY",
                 "valueFrom": {"secretKeyRef": {"name": "wandb", "key": "api-key"}}},
                {"name": "HOST_IP", "valueFrom": {"fieldRef": {"fieldPath": "status.hostIP"}}},
            ],
            "resources": {"limits": {"cpu": "7500m", "memory": "60Gi", "nvidia.com/gpu": "1"}},
            "securityContext": {"runAsUser": 0, "privileged": true},
            "volumeMounts": [{"name": "data", "mountPath": "/data", "readOnly": true}],
        }],
        "volumes": [
            {"name": "data", "emptyDir": {}},
            {"name": "kube-api-access-abcde", "projected": {"sources": []}},
        ],
    }))
    .await
    .unwrap()
}

#[tokio::test]
async fn a_training_pod_resolves_into_its_containers() {
    let spec = training_pod().await;
    assert_eq!(spec.pod, "ml/train-1");
    assert_eq!(spec.restart_policy, RestartPolicy::Never);
    assert!(spec.gpu);
    assert_eq!(
        spec.volumes,
        [VolumeSpec::Directory {
            name: "data".into()
        }]
    );
}

#[tokio::test]
async fn init_containers_expand_their_commands_and_run_as_the_pods_user() {
    let spec = training_pod().await;
    let [fetch, logship] = &spec.init_containers[..] else {
        panic!("two init containers: {:?}", spec.init_containers);
    };
    assert_eq!(
        literal(&fetch.command),
        ["aws", "s3", "sync", "s3://bucket/imagenet", "/data"]
    );
    assert!(!fetch.sidecar && logship.sidecar);
    assert_eq!(fetch.pull_policy, PullPolicy::IfNotPresent);
    assert_eq!(
        logship.pull_policy,
        PullPolicy::Always,
        "untagged means latest"
    );
    assert_eq!(
        fetch.user.as_deref(),
        Some("1000:100"),
        "the pod's securityContext"
    );
    assert!(!fetch.gpus);
}

#[tokio::test]
async fn the_trainer_gets_its_args_env_limits_user_and_mounts() {
    let spec = training_pod().await;
    let trainer = &spec.containers[0];
    assert_eq!(trainer.pull_policy, PullPolicy::Always);
    assert_eq!(trainer.args[0].as_literal(), Some("--lr=0.1"));
    assert_eq!(trainer.args[1].as_literal(), Some("--key=$(LR)"));
    assert_eq!(
        trainer.args[2].parts(),
        [
            EnvPart::Literal("--host=".into()),
            EnvPart::Instance(InstanceFact::Ip)
        ]
    );
    assert!(trainer.command.is_empty());
    assert_eq!(trainer.working_dir.as_deref(), Some("/workspace"));
    let names: Vec<&str> = trainer.env.iter().map(|(n, _)| n.as_str()).collect();
    assert_eq!(names, ["LR", "WANDB_API_KEY", "HOST_IP"]);
    assert_eq!(trainer.cpu_limit_millis, Some(7500));
    assert_eq!(trainer.memory_limit_bytes, Some(60 << 30));
    assert!(trainer.gpus && trainer.privileged);
    assert_eq!(
        trainer.user.as_deref(),
        Some("0:100"),
        "the container's runAsUser wins"
    );
    assert_eq!(
        trainer.mounts,
        [Mount {
            volume: "data".into(),
            sub_path: None,
            container_path: "/data".into(),
            read_only: true,
        }]
    );
}

#[tokio::test]
async fn unused_pull_secrets_and_skipped_env_keys_are_warnings() {
    let spec = training_pod().await;
    assert_eq!(
        spec.warnings,
        [
            WorkloadWarning::PullSecretsUnused,
            WorkloadWarning::InvalidEnvNames {
                container: "trainer".into(),
                keys: vec!["bad key".into()],
            },
        ]
    );
    assert!(
        spec.warnings[0]
            .to_string()
            .starts_with("imagePullSecrets are not used")
    );
    assert_eq!(
        spec.warnings[1].to_string(),
        "container \"trainer\": envFrom keys [bad key] were skipped since they are not valid \
         environment variable names"
    );
    assert_eq!(spec.warnings[1].reason(), "InvalidEnvironmentVariableNames");
}

#[tokio::test]
async fn objects_shared_by_containers_are_read_once() {
    let source = source();
    let container = |name: &str| {
        json!({"name": name, "image": "python:3.12",
               "envFrom": [{"configMapRef": {"name": "settings"}}]})
    };
    let pod = pod(json!({
        "containers": [container("a"), container("b")],
        "volumes": [{"name": "cfg", "configMap": {"name": "settings"}}],
    }));
    let spec = workload_spec(&pod, &source).await.unwrap();
    assert_eq!(source.reads.load(Ordering::SeqCst), 1);
    assert_eq!(
        spec.restart_policy,
        RestartPolicy::Always,
        "Kubernetes' default"
    );
    assert!(!spec.gpu);
}

#[tokio::test]
async fn a_pod_without_containers_or_images_is_refused() {
    let error = build(json!({"containers": []})).await.unwrap_err();
    assert_eq!(error.to_string(), "pod has no containers");
    let error = build(json!({"containers": [{"name": "trainer"}]}))
        .await
        .unwrap_err();
    assert_eq!(error.to_string(), r#"container "trainer" has no image"#);
    assert!(!error.may_resolve_later());
    let error = build(json!({"initContainers": [{"name": "init", "image": " "}],
                            "containers": [{"name": "trainer", "image": "x"}]}))
    .await
    .unwrap_err();
    assert_eq!(error.to_string(), r#"container "init" has no image"#);
}

#[tokio::test]
async fn missing_objects_may_resolve_later_but_pod_problems_cannot() {
    let error = build(
        json!({"containers": [{"name": "trainer", "image": "x", "env": [
        {"name": "K", "valueFrom": {"secretKeyRef": {"name": "wandb", "key": "nope"}}}]}]}),
    )
    .await
    .unwrap_err();
    assert_eq!(
        error.to_string(),
        r#"container "trainer": env K: secret "wandb" has no key "nope""#
    );
    assert!(error.may_resolve_later());

    let error = build(json!({
        "containers": [{"name": "trainer", "image": "x"}],
        "volumes": [{"name": "data", "hostPath": {"path": "/mnt"}}],
    }))
    .await
    .unwrap_err();
    assert!(error.to_string().starts_with(r#"volume "data": hostPath"#));
    assert!(!error.may_resolve_later());
}

#[tokio::test]
async fn unknown_policies_are_refused_with_the_accepted_values() {
    let error = build(json!({"restartPolicy": "Sometimes",
                            "containers": [{"name": "t", "image": "x"}]}))
    .await
    .unwrap_err();
    assert_eq!(
        error.to_string(),
        r#"restartPolicy "Sometimes" is not one of Always, OnFailure or Never"#
    );
    let error = build(json!({"containers": [{"name": "t", "image": "x",
                                             "imagePullPolicy": "Maybe"}]}))
    .await
    .unwrap_err();
    assert!(
        error.to_string().contains("Always, IfNotPresent or Never"),
        "{error}"
    );
    let error = build(json!({"containers": [{"name": "t", "image": "x",
                                             "restartPolicy": "Always"}]}))
    .await
    .unwrap_err();
    assert!(
        error
            .to_string()
            .contains("may only be Always, on an init container"),
        "{error}"
    );
}

#[test]
fn pull_policy_defaults_follow_the_apiserver() {
    for (image, policy) in [
        ("python", PullPolicy::Always),
        ("python:latest", PullPolicy::Always),
        ("localhost:5000/python", PullPolicy::Always),
        ("localhost:5000/python:3.12", PullPolicy::IfNotPresent),
        ("python@sha256:abc", PullPolicy::IfNotPresent),
    ] {
        assert_eq!(PullPolicy::default_for(image), policy, "{image}");
    }
}
