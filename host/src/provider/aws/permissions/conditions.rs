//! The conditions of `deploy/iam/` hold for what orca sends: the tags of its launches, of its
//! instances and of its claim, the bootstrap's tag keys. moto cannot evaluate conditions (see
//! `docs/src/security/aws.md`, "orca's IAM role"), so without this a renamed tag key or a new tag on the claim
//! would pass every test and be denied by every real account. The evaluator knows the few
//! operators the policies use, as IAM's condition reference defines them, and refuses others.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;
use std::time::Duration;

use serde_json::Value;

use crate::config::{AwsConfig, LaunchApi};
use crate::provider::aws::fake::FakeEc2;
use crate::provider::aws::tests::{CLUSTER_ID, plan, pod, provider_with};
use crate::provider::aws::workload::{TAG_EXIT_CODE, TAG_FINISHED_AT};
use crate::provider::ownership::{TAG_CLUSTER_ID, ownership_tags};
use crate::provider::plan::Market;
use crate::provider::{PodKey, Provider};
use crate::workload::testing::LaunchPod;

/// The request context of one call: single-valued keys, and `aws:TagKeys`.
#[derive(Debug, Default)]
struct Context {
    values: BTreeMap<String, String>,
    tag_keys: Option<BTreeSet<String>>,
}

impl Context {
    fn request_tags(mut self, tags: &BTreeMap<String, String>) -> Context {
        for (key, value) in tags {
            self.values
                .insert(format!("aws:RequestTag/{key}"), value.clone());
        }
        self.tag_keys = Some(tags.keys().cloned().collect());
        self
    }

    fn resource_tags(mut self, tags: &BTreeMap<String, String>) -> Context {
        for (key, value) in tags {
            self.values
                .insert(format!("aws:ResourceTag/{key}"), value.clone());
        }
        self
    }

    fn with(mut self, key: &str, value: &str) -> Context {
        self.values.insert(key.to_owned(), value.to_owned());
        self
    }

    /// A policy value with its variables (`${ec2:SourceInstanceARN}`) replaced.
    fn expand(&self, value: &str) -> Option<String> {
        let Some(start) = value.find("${") else {
            return Some(value.to_owned());
        };
        let end = start + value[start..].find('}')?;
        let replaced = self.values.get(&value[start + 2..end])?;
        self.expand(&format!(
            "{}{replaced}{}",
            &value[..start],
            &value[end + 1..]
        ))
    }
}

fn values(value: &Value) -> Vec<&str> {
    match value {
        Value::String(one) => vec![one.as_str()],
        Value::Array(many) => many.iter().filter_map(Value::as_str).collect(),
        other => panic!("a condition value: {other}"),
    }
}

/// Whether every condition of `statement` holds in `context` (AWS ANDs operators and keys,
/// ORs the values of one key).
fn holds(statement: &Value, context: &Context) -> Result<(), String> {
    let Some(conditions) = statement["Condition"].as_object() else {
        return Ok(());
    };
    for (operator, keys) in conditions {
        for (key, expected) in keys.as_object().expect("condition keys") {
            let expected: Vec<Option<String>> = values(expected)
                .into_iter()
                .map(|value| context.expand(value))
                .collect();
            let actual = context.values.get(key);
            let ok = match operator.as_str() {
                "StringEquals" | "ArnEquals" => {
                    actual.is_some_and(|actual| expected.contains(&Some(actual.clone())))
                }
                "Null" => {
                    let absent =
                        actual.is_none() && (key != "aws:TagKeys" || context.tag_keys.is_none());
                    expected == [Some(absent.to_string())]
                }
                "ForAllValues:StringEquals" => {
                    assert_eq!(key, "aws:TagKeys", "only aws:TagKeys is multi-valued here");
                    context
                        .tag_keys
                        .iter()
                        .flatten()
                        .all(|tag| expected.contains(&Some(tag.clone())))
                }
                other => panic!("this evaluator does not know the operator {other}: extend it"),
            };
            if !ok {
                return Err(format!(
                    "{operator} {key}: {expected:?}, the call has {actual:?}"
                ));
            }
        }
    }
    Ok(())
}

/// `path`'s statement `sid`, with the placeholders for the tests' provider (cluster name
/// `research`, its id [`CLUSTER_ID`]).
fn statement(path: &str, sid: &str) -> Value {
    let text = super::tests::read(path)
        .replace("CLUSTER_ID", CLUSTER_ID)
        .replace("CLUSTER", "research")
        .replace("REGION", "us-east-1")
        .replace("ACCOUNT", "123456789012");
    let policy: Value = serde_json::from_str(&text).expect("the policy's JSON");
    policy["Statement"]
        .as_array()
        .expect("Statement")
        .iter()
        .find(|statement| statement["Sid"] == sid)
        .unwrap_or_else(|| panic!("{path} has no statement {sid}"))
        .clone()
}

fn launch_config(launch_api: LaunchApi) -> AwsConfig {
    AwsConfig {
        launch_api,
        ..AwsConfig::default()
    }
}

#[tokio::test]
async fn a_launch_by_run_instances_carries_the_tags_its_statements_require() {
    let fake = Arc::new(FakeEc2::default());
    let provider = provider_with(fake.clone(), launch_config(LaunchApi::RunInstances));
    let pod = pod("trainer");
    let launched = provider
        .launch_pod(&pod, &plan(&pod, Market::OnDemand, false))
        .await
        .expect("a launch");
    let instance = fake
        .instances()
        .into_iter()
        .find(|instance| instance.instance_id == launched.instance_id)
        .expect("its instance");
    let launch = Context::default()
        .request_tags(&instance.tags)
        .with("ec2:CreateAction", "RunInstances");
    let orca = "deploy/iam/orca.json";
    holds(
        &statement(orca, "LaunchOnlyTaggedInstancesAndVolumes"),
        &launch,
    )
    .unwrap();
    holds(&statement(orca, "TagOnlyAtLaunch"), &launch).unwrap();

    // What it then does to the instance: terminate it, read its console.
    let own = Context::default().resource_tags(&instance.tags);
    holds(&statement(orca, "OnlyOwnInstances"), &own).unwrap();
    // Run Command on it (`kubectl exec`), which SSM authorizes by `ssm:resourceTag`.
    let mut exec = Context::default();
    for (key, value) in &instance.tags {
        exec = exec.with(&format!("ssm:resourceTag/{key}"), value);
    }
    holds(&statement(orca, "ExecInOwnInstances"), &exec).unwrap();
    // Another cluster's instance is not.
    let mut other = Context::default();
    for (key, value) in &instance.tags {
        let value = if key == "orca.research/cluster-id" {
            "another"
        } else {
            value
        };
        other = other.with(&format!("ssm:resourceTag/{key}"), value);
    }
    assert!(holds(&statement(orca, "ExecInOwnInstances"), &other).is_err());
}

#[tokio::test]
async fn a_launch_by_fleet_carries_the_tags_its_statements_require() {
    let fake = Arc::new(FakeEc2::default());
    let provider = provider_with(fake.clone(), launch_config(LaunchApi::Fleet));
    let pod = pod("trainer");
    provider
        .launch_pod(&pod, &plan(&pod, Market::Spot, false))
        .await
        .expect("a launch");
    let requests = fake.fleet_requests();
    assert!(!requests.is_empty());
    let orca = "deploy/iam/orca.json";
    for request in requests {
        let fleet = Context::default()
            .request_tags(&request.tags)
            .with("ec2:CreateAction", "CreateFleet");
        holds(
            &statement(orca, "LaunchOnlyTaggedInstancesAndVolumes"),
            &fleet,
        )
        .unwrap();
        holds(&statement(orca, "TagOnlyAtLaunch"), &fleet).unwrap();
    }
}

#[tokio::test]
async fn the_claim_adds_only_the_cluster_id_to_an_instance_of_this_cluster_without_one() {
    let fake = Arc::new(FakeEc2::default());
    let provider = provider_with(fake.clone(), launch_config(LaunchApi::RunInstances));
    let key = PodKey {
        namespace: "ml".to_owned(),
        name: "trainer".to_owned(),
        uid: "uid-trainer".to_owned(),
    };
    let tags: Vec<(&str, String)> = ownership_tags("orca-aws-node", "research", &key).into();
    let tags: Vec<(&str, &str)> = tags.iter().map(|(k, v)| (*k, v.as_str())).collect();
    let id = fake.launch_outside(&tags, Duration::from_secs(600));
    let before = fake
        .instances()
        .into_iter()
        .find(|i| i.instance_id == id)
        .unwrap()
        .tags;

    let present = std::collections::HashSet::from([key.uid.clone()]);
    let found = provider.claim_untagged(&present).await.expect("a claim");
    assert_eq!(found.claimed, std::slice::from_ref(&id));
    let after = fake
        .instances()
        .into_iter()
        .find(|i| i.instance_id == id)
        .unwrap()
        .tags;
    let added: BTreeMap<String, String> = after
        .into_iter()
        .filter(|(key, value)| before.get(key) != Some(value))
        .collect();
    assert_eq!(added.keys().collect::<Vec<_>>(), [TAG_CLUSTER_ID]);

    let claim = Context::default()
        .resource_tags(&before)
        .request_tags(&added);
    let sid = "ClaimInstancesFromBeforeClusterIds";
    holds(&statement("deploy/iam/orca.json", sid), &claim).unwrap();

    // The statement refuses what the claim must never do: another key, another cluster's
    // instance, an instance that has an id.
    let mut more = added.clone();
    more.insert("ManagedBy".to_owned(), "ORCA".to_owned());
    let claim = Context::default()
        .resource_tags(&before)
        .request_tags(&more);
    assert!(holds(&statement("deploy/iam/orca.json", sid), &claim).is_err());
    let mut identified = before.clone();
    identified.insert(TAG_CLUSTER_ID.to_owned(), "another".to_owned());
    let claim = Context::default()
        .resource_tags(&identified)
        .request_tags(&added);
    assert!(holds(&statement("deploy/iam/orca.json", sid), &claim).is_err());
}

#[test]
fn the_workload_tags_only_its_exit_code_on_its_own_instance() {
    let instance = "arn:aws:ec2:us-east-1:123456789012:instance/i-0123456789abcdef0";
    let tags = BTreeMap::from([
        (TAG_EXIT_CODE.to_owned(), "0".to_owned()),
        (
            TAG_FINISHED_AT.to_owned(),
            "2026-11-26T10:00:00Z".to_owned(),
        ),
    ]);
    let resource = BTreeMap::from([("ManagedBy".to_owned(), "ORCA".to_owned())]);
    let own = Context::default()
        .resource_tags(&resource)
        .request_tags(&tags)
        .with("aws:ARN", instance)
        .with("ec2:SourceInstanceARN", instance);
    let sid = "TagOwnInstanceWithExitCode";
    holds(&statement("deploy/iam/workload.json", sid), &own).unwrap();

    let another = Context::default()
        .resource_tags(&resource)
        .request_tags(&tags)
        .with("aws:ARN", instance)
        .with(
            "ec2:SourceInstanceARN",
            "arn:aws:ec2:us-east-1:123456789012:instance/i-0fedcba9876543210",
        );
    assert!(holds(&statement("deploy/iam/workload.json", sid), &another).is_err());
    let mut ownership = tags.clone();
    ownership.insert("ManagedBy".to_owned(), "nobody".to_owned());
    let rewrite = Context::default()
        .resource_tags(&resource)
        .request_tags(&ownership)
        .with("aws:ARN", instance)
        .with("ec2:SourceInstanceARN", instance);
    assert!(holds(&statement("deploy/iam/workload.json", sid), &rewrite).is_err());
}
