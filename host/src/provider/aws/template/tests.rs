//! The node's template against the fake EC2: made once, found and verified after a restart,
//! and never launched from when what holds its name is not orca's.

use std::sync::Arc;

use super::*;
use crate::provider::ErrorClass;
use crate::provider::aws::fake::FakeEc2;
use crate::provider::aws::tests::{CLUSTER_ID, plan, pod, provider_with};
use crate::workload::testing::LaunchPod;

const NODE: &str = "orca-aws-node";

fn config() -> AwsConfig {
    AwsConfig {
        security_group_ids: vec!["sg-0123456789abcdef0".to_owned()],
        ..AwsConfig::default()
    }
}

fn template() -> NodeTemplate {
    NodeTemplate::new(NODE, CLUSTER_ID, &config())
}

#[test]
fn the_name_follows_the_content_and_the_cluster_and_stays_within_ec2s_rules() {
    let first = template();
    assert!(first.name().starts_with("orca-orca-aws-node-"));
    assert_eq!(first.name(), template().name());
    let changed = AwsConfig {
        key_name: Some("ops".into()),
        ..config()
    };
    assert_ne!(
        first.name(),
        NodeTemplate::new(NODE, CLUSTER_ID, &changed).name()
    );
    assert_ne!(
        first.name(),
        NodeTemplate::new(NODE, "another-cluster", &config()).name(),
        "two clusters in one account never share a template"
    );
    let long = NodeTemplate::new(&"n:".repeat(200), CLUSTER_ID, &config());
    assert!(long.name().len() <= 128, "{}", long.name());
    assert!(
        long.name()
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || "().-_/".contains(c))
    );
}

/// Issue 39, case 6: the fixed settings (shutdown behaviour, metadata options) were left out
/// of what the name's digest covers. Every setting is in [`LaunchTemplateSpec::settings`],
/// which the digest covers entirely.
#[test]
fn every_fixed_setting_is_part_of_the_content_the_name_follows() {
    let settings = template().spec.settings();
    for setting in [
        "InstanceInitiatedShutdownBehavior",
        "MetadataOptions.HttpTokens",
        "MetadataOptions.HttpEndpoint",
        "MetadataOptions.HttpPutResponseHopLimit",
        "BlockDeviceMappings./dev/xvda.Ebs.DeleteOnTermination",
        "SecurityGroupIds",
    ] {
        assert!(settings.contains_key(setting), "{setting}: {settings:?}");
    }
    assert_eq!(settings["InstanceInitiatedShutdownBehavior"], "terminate");
    assert_eq!(settings["MetadataOptions.HttpTokens"], "required");
}

#[tokio::test]
async fn a_made_template_is_launched_from_by_id_and_version_and_made_once() {
    let fake = FakeEc2::default();
    let template = template();
    let made = template.ensure(&fake).await.unwrap();
    assert_eq!(made.version, 1);
    assert!(made.id.starts_with("lt-"), "{made:?}");
    assert_eq!(template.ensure(&fake).await.unwrap(), made);
    assert_eq!(fake.count("CreateLaunchTemplate"), 1);
    assert_eq!(fake.count("DescribeLaunchTemplateVersions"), 0);
}

/// A restarted process finds the template an earlier one made, verifies it, and launches
/// from the same version: the fleet requests it replays name the same template.
#[tokio::test]
async fn a_template_an_earlier_process_made_is_verified_and_someone_elses_newer_default_ignored() {
    let fake = FakeEc2::default();
    let made = template().ensure(&fake).await.unwrap();
    let mut protected = template().spec.settings();
    protected.insert("DisableApiTermination".to_owned(), "true".to_owned());
    assert_eq!(fake.add_template_version(template().name(), protected), 2);

    let restarted = template();
    assert_eq!(restarted.ensure(&fake).await.unwrap(), made);
    assert_eq!(fake.count("DescribeLaunchTemplateVersions"), 1);
}

/// Issue 39, case 6: `AlreadyExists` counted as success whatever held the name, and fleets
/// launched from `$Latest` of it.
#[tokio::test]
async fn a_template_under_the_nodes_name_with_other_content_fails_the_pod_and_launches_nothing() {
    let fake = Arc::new(FakeEc2::default());
    let provider = provider_with(fake.clone(), config());
    let name = template().name().to_owned();
    let mut foreign = template().spec.settings();
    foreign.insert("DisableApiTermination".to_owned(), "true".to_owned());
    foreign.insert(
        "MetadataOptions.HttpTokens".to_owned(),
        "optional".to_owned(),
    );
    let id = fake.put_template(&name, foreign);

    let pod = pod("a");
    let failed = provider
        .launch_pod(
            &pod,
            &plan(&pod, crate::provider::plan::Market::Spot, false),
        )
        .await
        .unwrap_err();
    assert_eq!(failed.error.code, "LaunchTemplateMismatch");
    assert_eq!(failed.error.class, ErrorClass::Permanent);
    let message = &failed.error.message;
    for named in [
        name.as_str(),
        id.as_str(),
        "DisableApiTermination true, which orca leaves unset",
        "MetadataOptions.HttpTokens optional where orca sets required",
    ] {
        assert!(message.contains(named), "{named} in {message}");
    }
    assert_eq!(fake.count("CreateFleet"), 0, "nothing launched from it");
    assert!(fake.instances().is_empty());
}

#[tokio::test]
async fn a_template_ec2_does_not_show_yet_is_asked_for_again() {
    let fake = FakeEc2::default();
    // EC2 says the name is taken, then shows no template of that name.
    fake.fail_next_call(ApiError::service(
        "InvalidLaunchTemplateName.AlreadyExistsException",
        "Launch template name already in use.",
    ));
    let template = template();
    let error = ProviderError::from(template.ensure(&fake).await.unwrap_err());
    assert_eq!(error.code, "LaunchTemplateNotVisible");
    assert_eq!(error.class, ErrorClass::Transient);
    assert_eq!(template.ensure(&fake).await.unwrap().version, 1);
}
