use serde_json::{Value, json};

use super::*;
use crate::workload::source::fake::FakeSource;

fn pod(volumes: Value, mounts: Value) -> Pod {
    serde_json::from_value(json!({
        "metadata": {"name": "train-1", "namespace": "ml", "uid": "u-1"},
        "spec": {
            "containers": [{"name": "trainer", "image": "python", "volumeMounts": mounts}],
            "volumes": volumes,
        },
    }))
    .unwrap()
}

fn source() -> FakeSource {
    FakeSource::default()
        .config_map("settings", &[("app.yaml", "lr: 0.1\n"), ("extra", "x")])
        .secret("tls", &[("tls.key", "KEY"), ("tls.crt", "CRT")])
}

async fn plan(volumes: Value) -> Result<Vec<VolumeSpec>, VolumeError> {
    let source = source();
    let mut objects = Objects::new(&source, "ml");
    plan_volumes(&pod(volumes, json!([])), &mut objects)
        .await
        .map(|v| v.specs)
}

async fn mounts(volumes: Value, mounts: Value) -> Result<Vec<Mount>, VolumeError> {
    let source = source();
    let pod = pod(volumes, mounts);
    let mut objects = Objects::new(&source, "ml");
    let volumes = plan_volumes(&pod, &mut objects).await?;
    container_mounts(&pod.spec.as_ref().unwrap().containers[0], &volumes)
}

fn file(path: &str, mode: u32, content: &str) -> VolumeFile {
    VolumeFile {
        path: path.to_owned(),
        mode,
        content: content.to_owned(),
    }
}

#[tokio::test]
async fn empty_dirs_are_directories_or_sized_tmpfs() {
    let specs = plan(json!([
        {"name": "scratch", "emptyDir": {}},
        {"name": "shm", "emptyDir": {"medium": "Memory", "sizeLimit": "2Gi"}},
        {"name": "ram", "emptyDir": {"medium": "Memory"}},
    ]))
    .await
    .unwrap();
    assert_eq!(
        specs,
        [
            VolumeSpec::Directory {
                name: "scratch".into()
            },
            VolumeSpec::Memory {
                name: "shm".into(),
                size_bytes: Some(2 << 30)
            },
            VolumeSpec::Memory {
                name: "ram".into(),
                size_bytes: None
            },
        ]
    );
}

#[tokio::test]
async fn a_config_map_volume_holds_every_key_with_the_default_mode() {
    let specs = plan(json!([{"name": "cfg", "configMap": {"name": "settings"}}]))
        .await
        .unwrap();
    assert_eq!(
        specs,
        [VolumeSpec::Files {
            name: "cfg".into(),
            files: vec![
                file("app.yaml", 0o644, "lr: 0.1\n"),
                file("extra", 0o644, "x")
            ],
        }]
    );
}

#[tokio::test]
async fn items_pick_keys_and_paths_and_modes_override_the_default() {
    let specs = plan(json!([{"name": "certs", "secret": {
        "secretName": "tls",
        "defaultMode": 0o400,
        "items": [
            {"key": "tls.key", "path": "private/key.pem"},
            {"key": "tls.crt", "path": "cert.pem", "mode": 0o444},
        ],
    }}]))
    .await
    .unwrap();
    assert_eq!(
        specs,
        [VolumeSpec::Files {
            name: "certs".into(),
            files: vec![
                file("private/key.pem", 0o400, "KEY"),
                file("cert.pem", 0o444, "CRT")
            ],
        }]
    );
}

#[tokio::test]
async fn missing_objects_and_keys_fail_unless_optional() {
    let error = plan(json!([{"name": "cfg", "configMap": {"name": "absent"}}]))
        .await
        .unwrap_err();
    assert_eq!(
        error.to_string(),
        r#"volume "cfg": configMap "absent" not found"#
    );
    assert!(error.may_resolve_later());

    let error = plan(json!([{"name": "cfg", "configMap": {
        "name": "settings", "items": [{"key": "nope", "path": "nope"}]}}]))
    .await
    .unwrap_err();
    assert_eq!(
        error.to_string(),
        r#"volume "cfg": configMap "settings" has no key "nope""#
    );

    let specs = plan(json!([
        {"name": "a", "configMap": {"name": "absent", "optional": true}},
        {"name": "b", "secret": {"secretName": "tls", "optional": true,
            "items": [{"key": "nope", "path": "nope"}, {"key": "tls.crt", "path": "c"}]}},
    ]))
    .await
    .unwrap();
    assert_eq!(
        specs,
        [
            VolumeSpec::Files {
                name: "a".into(),
                files: vec![]
            },
            VolumeSpec::Files {
                name: "b".into(),
                files: vec![file("c", 0o644, "CRT")]
            },
        ]
    );
}

#[tokio::test]
async fn unsupported_kinds_are_named_in_the_error() {
    let error = plan(json!([{"name": "data", "nfs": {"server": "10.0.0.1", "path": "/"}}]))
        .await
        .unwrap_err();
    assert_eq!(
        error.to_string(),
        "volume \"data\": nfs volumes are not supported on orca nodes; \
         use emptyDir, configMap, secret or a persistentVolumeClaim of an EBS or EFS volume"
    );
    assert!(!error.may_resolve_later());
    let error = plan(json!([{"name": "host", "hostPath": {"path": "/mnt"}}]))
        .await
        .unwrap_err();
    assert!(
        error
            .to_string()
            .starts_with(r#"volume "host": hostPath volumes"#)
    );
    let error = plan(json!([{"name": "huge", "emptyDir": {"medium": "HugePages-2Mi"}}]))
        .await
        .unwrap_err();
    assert!(error.to_string().contains("HugePages-2Mi"), "{error}");
}

#[tokio::test]
async fn the_service_account_token_volume_and_its_mount_are_skipped() {
    let mounts = mounts(
        json!([
            {"name": "kube-api-access-x7k2p", "projected": {"sources": [
                {"serviceAccountToken": {"path": "token"}}]}},
            {"name": "scratch", "emptyDir": {}},
        ]),
        json!([
            {"name": "kube-api-access-x7k2p",
             "mountPath": "/var/run/secrets/kubernetes.io/serviceaccount", "readOnly": true},
            {"name": "scratch", "mountPath": "/scratch"},
        ]),
    )
    .await
    .unwrap();
    assert_eq!(
        mounts,
        [Mount {
            volume: "scratch".into(),
            sub_path: None,
            container_path: "/scratch".into(),
            read_only: false,
        }]
    );
    // Any other projected volume is refused.
    let error = plan(json!([{"name": "other", "projected": {"sources": []}}]))
        .await
        .unwrap_err();
    assert!(
        error
            .to_string()
            .starts_with(r#"volume "other": projected volumes"#)
    );
}

#[tokio::test]
async fn config_volumes_mount_read_only_and_sub_paths_are_kept() {
    let mounts = mounts(
        json!([
            {"name": "cfg", "configMap": {"name": "settings"}},
            {"name": "scratch", "emptyDir": {}},
        ]),
        json!([
            {"name": "cfg", "mountPath": "/etc/app/app.yaml", "subPath": "app.yaml"},
            {"name": "scratch", "mountPath": "/out", "subPath": "run-1", "readOnly": true},
        ]),
    )
    .await
    .unwrap();
    assert_eq!(
        mounts,
        [
            Mount {
                volume: "cfg".into(),
                sub_path: Some("app.yaml".into()),
                container_path: "/etc/app/app.yaml".into(),
                read_only: true,
            },
            Mount {
                volume: "scratch".into(),
                sub_path: Some("run-1".into()),
                container_path: "/out".into(),
                read_only: true,
            },
        ]
    );
}

#[tokio::test]
async fn paths_that_leave_the_volume_are_refused() {
    let error = plan(json!([{"name": "cfg", "configMap": {
        "name": "settings", "items": [{"key": "extra", "path": "../../etc/passwd"}]}}]))
    .await
    .unwrap_err();
    assert!(error.to_string().contains("must not contain"), "{error}");

    let error = mounts(
        json!([{"name": "scratch", "emptyDir": {}}]),
        json!([{"name": "scratch", "mountPath": "/x", "subPath": "a/../../b"}]),
    )
    .await
    .unwrap_err();
    assert!(
        error
            .to_string()
            .starts_with(r#"container "trainer": volumeMount "scratch": subPath"#),
        "{error}"
    );
}

#[tokio::test]
async fn bad_mounts_name_the_container_and_volume() {
    let error = mounts(json!([]), json!([{"name": "ghost", "mountPath": "/g"}]))
        .await
        .unwrap_err();
    assert_eq!(
        error.to_string(),
        r#"container "trainer": volumeMount "ghost": the pod has no volume of that name"#
    );
    let error = mounts(
        json!([{"name": "scratch", "emptyDir": {}}]),
        json!([{"name": "scratch", "mountPath": "/x", "subPathExpr": "$(POD)"}]),
    )
    .await
    .unwrap_err();
    assert!(
        error.to_string().contains("subPathExpr is not supported"),
        "{error}"
    );
}

#[test]
fn dns_labels_are_recognised() {
    assert!(is_dns_label("a-1"));
    for bad in ["", "-a", "a-", "A", "a.b", "a_b", &"a".repeat(64)] {
        assert!(!is_dns_label(bad), "{bad}");
    }
}

fn bound_claim(
    name: &str,
    volume: &str,
    owner: Option<&str>,
) -> k8s_openapi::api::core::v1::PersistentVolumeClaim {
    serde_json::from_value(json!({
        "metadata": {
            "name": name, "namespace": "ml", "uid": format!("uid-{name}"),
            "ownerReferences": owner.map(|uid| vec![json!({
                "apiVersion": "v1", "kind": "Pod", "name": "train-1", "uid": uid
            })]),
        },
        "spec": {"volumeName": volume},
        "status": {"phase": "Bound"},
    }))
    .unwrap()
}

fn ebs_pv(
    name: &str,
    claim: &str,
    volume_id: &str,
) -> k8s_openapi::api::core::v1::PersistentVolume {
    serde_json::from_value(json!({
        "metadata": {"name": name},
        "spec": {
            "csi": {"driver": EBS_CSI_DRIVER, "volumeHandle": volume_id},
            "claimRef": {"name": claim, "namespace": "ml", "uid": format!("uid-{claim}")},
        },
    }))
    .unwrap()
}

#[tokio::test]
async fn claims_and_ephemeral_volumes_are_their_ebs_volumes_mounted_as_the_pod_says() {
    let source = source()
        .with_claim(bound_claim("checkpoints", "pv-a", None))
        .with_persistent_volume(ebs_pv("pv-a", "checkpoints", "vol-0123456789abcdef0"))
        .with_claim(bound_claim("train-1-scratch", "pv-b", Some("u-1")))
        .with_persistent_volume(ebs_pv("pv-b", "train-1-scratch", "vol-0fedcba9876543210"));
    let pod = pod(
        json!([
            {"name": "ckpt", "persistentVolumeClaim": {"claimName": "checkpoints"}},
            {"name": "scratch", "ephemeral": {"volumeClaimTemplate": {"spec": {
                "accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": "1Gi"}}
            }}}},
            {"name": "ro", "persistentVolumeClaim": {"claimName": "checkpoints", "readOnly": true}},
        ]),
        json!([
            {"name": "ckpt", "mountPath": "/ckpt"},
            {"name": "ro", "mountPath": "/ro"},
        ]),
    );
    let mut objects = Objects::new(&source, "ml");
    let volumes = plan_volumes(&pod, &mut objects).await.unwrap();
    let ids: Vec<(&str, &str, bool)> = volumes
        .specs
        .iter()
        .map(|spec| {
            let ebs = spec.ebs().unwrap();
            (spec.name(), ebs.volume_id.as_str(), ebs.read_only)
        })
        .collect();
    assert_eq!(
        ids,
        [
            ("ckpt", "vol-0123456789abcdef0", false),
            ("scratch", "vol-0fedcba9876543210", false),
            ("ro", "vol-0123456789abcdef0", true),
        ]
    );
    let mounts = container_mounts(&pod.spec.as_ref().unwrap().containers[0], &volumes).unwrap();
    let read_only: Vec<bool> = mounts.iter().map(|m| m.read_only).collect();
    assert_eq!(read_only, [false, true]);
}

#[tokio::test]
async fn a_missing_claim_waits_and_a_claim_the_pod_does_not_own_is_refused() {
    let missing = plan(json!([
        {"name": "ckpt", "persistentVolumeClaim": {"claimName": "absent"}},
    ]))
    .await
    .unwrap_err();
    assert!(missing.may_resolve_later(), "{missing}");
    assert_eq!(
        missing.to_string(),
        "volume \"ckpt\": persistentVolumeClaim \"absent\" not found"
    );

    let source = source()
        .with_claim(bound_claim("train-1-scratch", "pv-b", Some("someone-else")))
        .with_persistent_volume(ebs_pv("pv-b", "train-1-scratch", "vol-0fedcba9876543210"));
    let pod = pod(
        json!([{"name": "scratch", "ephemeral": {"volumeClaimTemplate": {"spec": {}}}}]),
        json!([]),
    );
    let mut objects = Objects::new(&source, "ml");
    let Err(refused) = plan_volumes(&pod, &mut objects).await else {
        panic!("a claim owned by another pod was used");
    };
    assert!(!refused.may_resolve_later(), "{refused}");
    assert!(
        refused.to_string().contains("was not created for this pod"),
        "{refused}"
    );
}
