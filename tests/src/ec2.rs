//! Looking at moto's instances the way the tests need to, and doing what the bootstrap does on a
//! real instance when its workload ends (moto runs no user data).

use std::collections::BTreeMap;

use anyhow::{Context, Result};
use aws_sdk_ec2::types::{Instance, InstanceStateName, Tag};

pub fn tag(key: &str, value: &str) -> Tag {
    Tag::builder().key(key).value(value).build()
}

pub fn tags_of(instance: &Instance) -> BTreeMap<String, String> {
    instance
        .tags()
        .iter()
        .filter_map(|t| Some((t.key()?.to_owned(), t.value()?.to_owned())))
        .collect()
}

pub fn state_of(instance: &Instance) -> InstanceStateName {
    instance
        .state()
        .and_then(|s| s.name().cloned())
        .unwrap_or(InstanceStateName::Pending)
}

/// One instance by id.
pub async fn instance(ec2: &aws_sdk_ec2::Client, id: &str) -> Result<Instance> {
    ec2.describe_instances()
        .instance_ids(id)
        .send()
        .await?
        .reservations()
        .iter()
        .flat_map(|r| r.instances())
        .next()
        .cloned()
        .with_context(|| format!("instance {id} is not listed"))
}

/// What the bootstrap does when the workload ends: tag the exit code, power off (which
/// terminates the instance).
pub async fn finish_workload(ec2: &aws_sdk_ec2::Client, id: &str, exit_code: i32) -> Result<()> {
    ec2.create_tags()
        .resources(id)
        .tags(tag("orca.research/exit-code", &exit_code.to_string()))
        .tags(tag(
            "orca.research/finished-at",
            &jiff::Timestamp::now().to_string(),
        ))
        .send()
        .await?;
    ec2.terminate_instances().instance_ids(id).send().await?;
    Ok(())
}

/// moto's default VPC has a default subnet in each zone of the region: zone → subnet.
pub async fn default_subnets_by_zone(
    ec2: &aws_sdk_ec2::Client,
) -> Result<BTreeMap<String, String>> {
    let answer = ec2
        .describe_subnets()
        .filters(
            aws_sdk_ec2::types::Filter::builder()
                .name("default-for-az")
                .values("true")
                .build(),
        )
        .send()
        .await?;
    Ok(answer
        .subnets()
        .iter()
        .filter_map(|subnet| {
            Some((
                subnet.availability_zone()?.to_owned(),
                subnet.subnet_id()?.to_owned(),
            ))
        })
        .collect())
}
