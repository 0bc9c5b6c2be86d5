//! EC2's notices as EventBridge delivers them to the interruption queue, for the tests and
//! benches that play EC2's part.

use jiff::Timestamp;
use serde_json::json;

/// An EC2 spot interruption warning for `instance_id`, issued at `at`.
pub fn spot_warning(instance_id: &str, at: Timestamp) -> String {
    ec2_event(
        "EC2 Spot Instance Interruption Warning",
        instance_id,
        at,
        json!({ "instance-id": instance_id, "instance-action": "terminate" }),
    )
}

/// An EC2 rebalance recommendation for `instance_id`, issued at `at`.
pub fn rebalance_recommendation(instance_id: &str, at: Timestamp) -> String {
    ec2_event(
        "EC2 Instance Rebalance Recommendation",
        instance_id,
        at,
        json!({ "instance-id": instance_id }),
    )
}

fn ec2_event(
    detail_type: &str,
    instance_id: &str,
    at: Timestamp,
    detail: serde_json::Value,
) -> String {
    json!({
        "version": "0",
        "id": format!("test-{detail_type}-{instance_id}-{}", at.as_millisecond()).replace(' ', "-"),
        "detail-type": detail_type,
        "source": "aws.ec2",
        "account": "123456789012",
        "time": at.to_string(),
        "region": "us-west-2",
        "resources": [format!("arn:aws:ec2:us-west-2:123456789012:instance/{instance_id}")],
        "detail": detail,
    })
    .to_string()
}
