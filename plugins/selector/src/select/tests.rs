use orca_plugin_sdk::testing::{FixedCatalogue, instance_type, pod_with_annotations};
use orca_plugin_sdk::{Architecture, Pod, PolicyError, Resources};

use super::*;

fn catalogue() -> FixedCatalogue {
    FixedCatalogue(vec![
        instance_type("m7i.large", 2, 8, 0, Architecture::Amd64, 0.1008),
        instance_type("m7g.large", 2, 8, 0, Architecture::Arm64, 0.0816),
        instance_type("c7i.xlarge", 4, 8, 0, Architecture::Amd64, 0.1785),
        instance_type("m7i.xlarge", 4, 16, 0, Architecture::Amd64, 0.2016),
        instance_type("p5.48xlarge", 192, 2048, 8, Architecture::Amd64, 98.32),
    ])
}

fn pod(
    cpu_millis: u64,
    memory_gib: u64,
    gpus: u32,
    annotations: &[(&str, &str)],
    arch: Option<&str>,
) -> Pod {
    let mut pod = pod_with_annotations(annotations);
    pod.requests = Resources {
        cpu_millis,
        memory_bytes: memory_gib << 30,
        ephemeral_storage_bytes: 0,
        gpus,
    };
    pod.node_selector = arch
        .map(|a| vec![("kubernetes.io/arch".to_string(), a.to_string())])
        .unwrap_or_default();
    pod
}

fn names(candidates: &[orca_plugin_sdk::Candidate]) -> Vec<&str> {
    candidates
        .iter()
        .map(|c| c.instance_type.as_str())
        .collect()
}

#[test]
fn cheapest_fit_comes_first_and_any_architecture_is_allowed_by_default() {
    let picked = select(
        &pod(1500, 4, 0, &[], None),
        &Settings::default(),
        &catalogue(),
    )
    .unwrap();
    assert_eq!(
        names(&picked),
        [
            "m7g.large",
            "m7i.large",
            "c7i.xlarge",
            "m7i.xlarge",
            "p5.48xlarge"
        ]
    );
}

#[test]
fn the_pods_arch_selector_narrows_the_choice() {
    let picked = select(
        &pod(3000, 12, 0, &[], Some("amd64")),
        &Settings::default(),
        &catalogue(),
    )
    .unwrap();
    assert_eq!(names(&picked)[0], "m7i.xlarge");
}

#[test]
fn gpus_pick_a_gpu_type() {
    let picked = select(&pod(0, 0, 8, &[], None), &Settings::default(), &catalogue()).unwrap();
    assert_eq!(names(&picked), ["p5.48xlarge"]);
    assert!(picked[0].reason.contains("8 GPU"), "{}", picked[0].reason);
}

#[test]
fn limits_count_where_no_request_is_set() {
    let mut limited = pod(0, 0, 0, &[], None);
    limited.limits.cpu_millis = 4000;
    let picked = select(&limited, &Settings::default(), &catalogue()).unwrap();
    assert_eq!(names(&picked)[0], "c7i.xlarge");
}

#[test]
fn families_are_allowed_and_denied_by_settings() {
    let settings = Settings {
        deny_families: vec!["m7g".into()],
        max_candidates: 1,
        ..Settings::default()
    };
    assert_eq!(
        names(&select(&pod(500, 1, 0, &[], None), &settings, &catalogue()).unwrap()),
        ["m7i.large"]
    );
    let settings = Settings {
        allow_families: vec!["c7i".into()],
        ..Settings::default()
    };
    assert_eq!(
        names(&select(&pod(500, 1, 0, &[], None), &settings, &catalogue()).unwrap()),
        ["c7i.xlarge"]
    );
}

#[test]
fn nothing_fits_is_a_no_match_saying_what_was_asked() {
    match select(
        &pod(500_000, 1, 0, &[], None),
        &Settings::default(),
        &catalogue(),
    ) {
        Err(PolicyError::NoMatch(message)) => {
            assert!(message.contains("at least 500 vCPUs"), "{message}")
        }
        other => panic!("expected no-match, got {other:?}"),
    }
}

#[test]
fn the_annotation_wins_when_the_type_exists() {
    let picked = select(
        &pod(0, 0, 0, &[(INSTANCE_TYPE_ANNOTATION, "p5.48xlarge")], None),
        &Settings::default(),
        &catalogue(),
    )
    .unwrap();
    assert_eq!(names(&picked), ["p5.48xlarge"]);
}

#[test]
fn an_unknown_requested_type_is_an_invalid_annotation() {
    match select(
        &pod(0, 0, 0, &[(INSTANCE_TYPE_ANNOTATION, "m9z.huge")], None),
        &Settings::default(),
        &catalogue(),
    ) {
        Err(PolicyError::InvalidAnnotation(error)) => {
            assert_eq!(
                (error.annotation.as_str(), error.value.as_str()),
                (INSTANCE_TYPE_ANNOTATION, "m9z.huge")
            );
        }
        other => panic!("expected invalid-annotation, got {other:?}"),
    }
}

#[test]
fn a_requested_type_in_a_denied_family_is_refused() {
    let settings = Settings {
        deny_families: vec!["p5".into()],
        ..Settings::default()
    };
    let result = select(
        &pod(0, 0, 0, &[(INSTANCE_TYPE_ANNOTATION, "p5.48xlarge")], None),
        &settings,
        &catalogue(),
    );
    assert!(
        matches!(result, Err(PolicyError::InvalidAnnotation(e)) if e.expected.contains("family p5"))
    );
}

#[test]
fn bad_settings_are_reported_as_such() {
    assert!(matches!(
        Settings::parse(r#"{"maxCandidates": 0}"#),
        Err(PolicyError::InvalidSettings(_))
    ));
    assert!(
        matches!(Settings::parse(r#"{"architecture": "riscv"}"#), Err(PolicyError::InvalidSettings(m)) if m.contains("riscv"))
    );
    assert!(
        matches!(Settings::parse(r#"{"familes": []}"#), Err(PolicyError::InvalidSettings(m)) if m.contains("familes"))
    );
    assert_eq!(Settings::parse("").unwrap(), Settings::default());
}

fn zoned(name: &str, zones: &[&str]) -> orca_plugin_sdk::InstanceType {
    orca_plugin_sdk::InstanceType {
        zones: zones.iter().map(|z| (*z).to_owned()).collect(),
        ..catalogue().0.into_iter().find(|t| t.name == name).unwrap()
    }
}

fn zoned_catalogue() -> FixedCatalogue {
    FixedCatalogue(vec![
        // The cheapest fit, offered only in zone a.
        zoned("m7g.large", &["us-west-2a"]),
        zoned("m7i.large", &["us-west-2a", "us-west-2b"]),
        // Zones unknown: kept whatever the pod names.
        zoned("c7i.xlarge", &[]),
    ])
}

#[test]
fn types_not_offered_in_the_pods_zones_are_not_candidates() {
    let mut in_b = pod(1000, 1, 0, &[], None);
    in_b.zones = vec!["us-west-2b".into()];
    let picked = select(&in_b, &Settings::default(), &zoned_catalogue()).unwrap();
    assert_eq!(names(&picked), ["m7i.large", "c7i.xlarge"]);

    let anywhere = pod(1000, 1, 0, &[], None);
    let picked = select(&anywhere, &Settings::default(), &zoned_catalogue()).unwrap();
    assert_eq!(names(&picked), ["m7g.large", "m7i.large", "c7i.xlarge"]);

    let mut nowhere = pod(1000, 1, 0, &[], None);
    nowhere.zones = vec!["us-west-2z".into()];
    let only_known = FixedCatalogue(zoned_catalogue().0.into_iter().take(2).collect());
    match select(&nowhere, &Settings::default(), &only_known) {
        Err(PolicyError::NoMatch(message)) => {
            assert!(message.contains("offered in us-west-2z"), "{message}");
        }
        other => panic!("expected no-match, got {other:?}"),
    }
}

#[test]
fn a_requested_type_not_offered_in_the_pods_zone_is_refused_naming_where_it_is() {
    let mut requested = pod(0, 0, 0, &[(INSTANCE_TYPE_ANNOTATION, "m7g.large")], None);
    requested.zones = vec!["us-west-2b".into()];
    match select(&requested, &Settings::default(), &zoned_catalogue()) {
        Err(PolicyError::InvalidAnnotation(error)) => {
            assert!(error.expected.contains("us-west-2b"), "{error:?}");
            assert!(
                error.expected.contains("offered in us-west-2a"),
                "{error:?}"
            );
        }
        other => panic!("expected invalid-annotation, got {other:?}"),
    }
    requested.zones = vec!["us-west-2a".into()];
    let picked = select(&requested, &Settings::default(), &zoned_catalogue()).unwrap();
    assert_eq!(names(&picked), ["m7g.large"]);
}
