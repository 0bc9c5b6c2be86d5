use serde_json::{Value, json};

use super::*;

fn claim(phase: &str, volume_name: Option<&str>) -> PersistentVolumeClaim {
    serde_json::from_value(json!({
        "metadata": {"name": "data", "namespace": "ml", "uid": "c-1"},
        "spec": {"volumeName": volume_name, "accessModes": ["ReadWriteOnce"]},
        "status": {"phase": phase},
    }))
    .unwrap()
}

fn volume(spec: Value) -> PersistentVolume {
    let mut spec = spec;
    spec["claimRef"] = json!({"name": "data", "namespace": "ml", "uid": "c-1"});
    serde_json::from_value(json!({"metadata": {"name": "pv-1"}, "spec": spec})).unwrap()
}

fn csi(driver: &str, handle: &str) -> Value {
    json!({"csi": {"driver": driver, "volumeHandle": handle}, "accessModes": ["ReadWriteOnce"]})
}

fn ebs(
    claim: Option<&PersistentVolumeClaim>,
    volume: Option<&PersistentVolume>,
    read_only: bool,
) -> Result<EbsVolume, ClaimProblem> {
    claimed_volume("data", claim, volume, read_only).map(|volume| match volume {
        ClaimedVolume::Ebs(ebs) => ebs,
        other => panic!("not an EBS volume: {other:?}"),
    })
}

fn resolve(
    claim: Option<&PersistentVolumeClaim>,
    volume: Option<&PersistentVolume>,
) -> Result<EbsVolume, ClaimProblem> {
    ebs(claim, volume, false)
}

#[test]
fn a_bound_ebs_csi_claim_is_its_volume_with_the_zones_of_its_affinity() {
    let mut spec = csi(EBS_CSI_DRIVER, "vol-0123456789abcdef0");
    spec["csi"]["fsType"] = json!("xfs");
    spec["nodeAffinity"] = json!({"required": {"nodeSelectorTerms": [
        {"matchExpressions": [
            {"key": EBS_ZONE_LABEL, "operator": "In", "values": ["us-west-2a"]},
            {"key": "topology.kubernetes.io/zone", "operator": "In", "values": ["us-west-2a", "us-west-2b"]},
        ]},
    ]}});
    let got = resolve(Some(&claim("Bound", Some("pv-1"))), Some(&volume(spec))).unwrap();
    assert_eq!(
        got,
        EbsVolume {
            volume_id: "vol-0123456789abcdef0".into(),
            fs_type: FsType::Xfs,
            read_only: false,
            zones: ["us-west-2a".to_owned()].into(),
            claim: "data".into(),
        }
    );
    assert!(got.may_format());
}

#[test]
fn read_only_comes_from_the_pod_the_volume_or_its_access_modes_and_forbids_formatting() {
    let bound = claim("Bound", Some("pv-1"));
    let plain = volume(csi(EBS_CSI_DRIVER, "vol-0123456789abcdef0"));
    let by_pod = ebs(Some(&bound), Some(&plain), true).unwrap();
    let mut spec = csi(EBS_CSI_DRIVER, "vol-0123456789abcdef0");
    spec["csi"]["readOnly"] = json!(true);
    let by_volume = resolve(Some(&bound), Some(&volume(spec))).unwrap();
    let mut spec = csi(EBS_CSI_DRIVER, "vol-0123456789abcdef0");
    spec["accessModes"] = json!(["ReadOnlyMany"]);
    let by_modes = resolve(Some(&bound), Some(&volume(spec))).unwrap();
    for got in [by_pod, by_volume, by_modes] {
        assert!(got.read_only && !got.may_format(), "{got:?}");
    }
    assert!(!resolve(Some(&bound), Some(&plain)).unwrap().read_only);
}

#[test]
fn an_in_tree_ebs_volume_id_may_carry_its_zone() {
    let bound = claim("Bound", Some("pv-1"));
    let cases = [
        ("aws://us-west-2c/vol-0123456789abcdef0", vec!["us-west-2c"]),
        ("aws:///vol-0123456789abcdef0", vec![]),
        ("vol-0123456789abcdef0", vec![]),
    ];
    for (id, zones) in cases {
        let spec = json!({"awsElasticBlockStore": {"volumeID": id, "fsType": "ext4"}});
        let got = resolve(Some(&bound), Some(&volume(spec))).unwrap();
        assert_eq!(got.volume_id, "vol-0123456789abcdef0", "{id}");
        let zones: BTreeSet<String> = zones.into_iter().map(str::to_owned).collect();
        assert_eq!(got.zones, zones, "{id}");
    }
}

#[test]
fn affinity_terms_are_ored_and_a_term_without_zones_admits_all() {
    let bound = claim("Bound", Some("pv-1"));
    let with_terms = |terms: Value| {
        let mut spec = csi(EBS_CSI_DRIVER, "vol-0123456789abcdef0");
        spec["nodeAffinity"] = json!({"required": {"nodeSelectorTerms": terms}});
        resolve(Some(&bound), Some(&volume(spec))).unwrap().zones
    };
    let ored = with_terms(json!([
        {"matchExpressions": [{"key": EBS_ZONE_LABEL, "operator": "In", "values": ["us-west-2a"]}]},
        {"matchExpressions": [{"key": "topology.kubernetes.io/zone", "operator": "In", "values": ["us-west-2b"]}]},
    ]));
    assert_eq!(
        ored,
        ["us-west-2a".to_owned(), "us-west-2b".to_owned()].into()
    );
    let open = with_terms(json!([
        {"matchExpressions": [{"key": EBS_ZONE_LABEL, "operator": "In", "values": ["us-west-2a"]}]},
        {"matchExpressions": [{"key": "kubernetes.io/hostname", "operator": "In", "values": ["n"]}]},
    ]));
    assert!(open.is_empty());
}

#[test]
fn a_claim_or_volume_not_there_yet_is_waited_for() {
    let plain = volume(csi(EBS_CSI_DRIVER, "vol-0123456789abcdef0"));
    let mut elsewhere = plain.clone();
    elsewhere
        .spec
        .as_mut()
        .unwrap()
        .claim_ref
        .as_mut()
        .unwrap()
        .uid = Some("c-2".into());
    let cases = [
        (None, Some(&plain), ClaimWait::NotFound),
        (
            Some(claim("Pending", None)),
            None,
            ClaimWait::NotBound {
                phase: "Pending".into(),
            },
        ),
        // Bound in the spec before the status says so: the binder is half-way.
        (
            Some(claim("Pending", Some("pv-1"))),
            Some(&plain),
            ClaimWait::NotBound {
                phase: "Pending".into(),
            },
        ),
        (
            Some(claim("Bound", Some("pv-1"))),
            None,
            ClaimWait::VolumeNotFound {
                volume: "pv-1".into(),
            },
        ),
        (
            Some(claim("Bound", Some("pv-1"))),
            Some(&elsewhere),
            ClaimWait::VolumeBoundElsewhere {
                volume: "pv-1".into(),
            },
        ),
    ];
    for (claim, volume, wait) in cases {
        assert_eq!(
            resolve(claim.as_ref(), volume),
            Err(ClaimProblem::Wait(wait.clone())),
            "{wait}"
        );
    }
}

#[test]
fn a_volume_orca_cannot_attach_is_refused_by_name() {
    let bound = claim("Bound", Some("pv-1"));
    let mut block = csi(EBS_CSI_DRIVER, "vol-0123456789abcdef0");
    block["volumeMode"] = json!("Block");
    let mut btrfs = csi(EBS_CSI_DRIVER, "vol-0123456789abcdef0");
    btrfs["csi"]["fsType"] = json!("btrfs");
    let pv = || "pv-1".to_owned();
    let cases = [
        (
            csi(EFS_CSI_DRIVER, "fs-0123456789abcdef0:/a/../../etc"),
            ClaimRefusal::EfsHandle {
                volume: pv(),
                handle: "fs-0123456789abcdef0:/a/../../etc".into(),
            },
        ),
        (
            csi(EFS_CSI_DRIVER, "fs-0123456789abcdef0:/data:ap-1"),
            ClaimRefusal::EfsHandle {
                volume: pv(),
                handle: "fs-0123456789abcdef0:/data:ap-1".into(),
            },
        ),
        (
            csi("pd.csi.storage.gke.io", "projects/p/disks/d"),
            ClaimRefusal::Kind {
                volume: pv(),
                kind: "CSI driver pd.csi.storage.gke.io".into(),
            },
        ),
        (
            json!({"nfs": {"server": "10.0.0.1", "path": "/data"}}),
            ClaimRefusal::Kind {
                volume: pv(),
                kind: "nfs".into(),
            },
        ),
        (block, ClaimRefusal::Block { volume: pv() }),
        (
            btrfs,
            ClaimRefusal::FsType {
                volume: pv(),
                fs_type: "btrfs".into(),
            },
        ),
        (
            csi(EBS_CSI_DRIVER, "vol-x; rm -rf /"),
            ClaimRefusal::Handle {
                volume: pv(),
                handle: "vol-x; rm -rf /".into(),
            },
        ),
        (
            json!({"awsElasticBlockStore": {"volumeID": "vol-0123456789abcdef0", "partition": 2}}),
            ClaimRefusal::Partition {
                volume: pv(),
                partition: 2,
            },
        ),
    ];
    for (spec, refusal) in cases {
        let got = resolve(Some(&bound), Some(&volume(spec)));
        assert_eq!(
            got,
            Err(ClaimProblem::Refused(refusal.clone())),
            "{refusal}"
        );
    }
}

#[test]
fn an_efs_handle_names_the_file_system_its_directory_and_access_point() {
    let bound = claim("Bound", Some("pv-1"));
    let cases = [
        ("fs-0123456789abcdef0", "/", None),
        ("fs-0123456789abcdef0::", "/", None),
        (
            "fs-0123456789abcdef0:/datasets/imagenet",
            "/datasets/imagenet",
            None,
        ),
        (
            "fs-0123456789abcdef0::fsap-0123456789abcdef0",
            "/",
            Some("fsap-0123456789abcdef0"),
        ),
    ];
    for (handle, path, access_point) in cases {
        let mut spec = csi(EFS_CSI_DRIVER, handle);
        spec["accessModes"] = json!(["ReadOnlyMany"]);
        let got = claimed_volume("data", Some(&bound), Some(&volume(spec)), false).unwrap();
        assert_eq!(
            got,
            ClaimedVolume::Efs(EfsVolume {
                file_system_id: "fs-0123456789abcdef0".into(),
                path: path.into(),
                access_point: access_point.map(str::to_owned),
                read_only: true,
                claim: "data".into(),
            }),
            "{handle}"
        );
    }
}
