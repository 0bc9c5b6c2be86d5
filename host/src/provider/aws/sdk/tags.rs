//! Tags as the EC2 SDK takes them: one place for the conversion every call that tags uses
//! (`RunInstances`, `CreateFleet`, `CreateTags`).

use std::collections::BTreeMap;

use aws_sdk_ec2::types::{self as ec2, ResourceType, TagSpecification};

/// `tags` as EC2 tags, in key order.
pub(in crate::provider::aws) fn ec2_tags(tags: &BTreeMap<String, String>) -> Vec<ec2::Tag> {
    tags.iter()
        .map(|(key, value)| ec2::Tag::builder().key(key).value(value).build())
        .collect()
}

/// `tags` on what a launch creates of `resource`.
pub(in crate::provider::aws) fn tag_specification(
    resource: ResourceType,
    tags: Vec<ec2::Tag>,
) -> TagSpecification {
    TagSpecification::builder()
        .resource_type(resource)
        .set_tags(Some(tags))
        .build()
}
