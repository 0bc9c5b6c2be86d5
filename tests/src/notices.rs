//! EC2's notices as EventBridge delivers them to the interruption queue, for the tests and
//! benches that play EC2's part.

use jiff::Timestamp;
use serde_json::json;

/// The account the tests' instances live in (moto's, and the in-process orca's).
pub const ACCOUNT: &str = "123456789012";
/// The region of the tests' notices (the in-process configs' `provider.region`).
pub const REGION: &str = "us-west-2";

/// An EC2 spot interruption warning for `instance_id`, issued at `at`.
pub fn spot_warning(instance_id: &str, at: Timestamp) -> String {
    spot_warning_from(ACCOUNT, REGION, instance_id, at)
}

/// As [`spot_warning`], as a rule in `account` and `region` would send it.
pub fn spot_warning_from(account: &str, region: &str, instance_id: &str, at: Timestamp) -> String {
    ec2_event(
        (account, region),
        "EC2 Spot Instance Interruption Warning",
        instance_id,
        at,
        json!({ "instance-id": instance_id, "instance-action": "terminate" }),
    )
}

/// An EC2 rebalance recommendation for `instance_id`, issued at `at`.
pub fn rebalance_recommendation(instance_id: &str, at: Timestamp) -> String {
    ec2_event(
        (ACCOUNT, REGION),
        "EC2 Instance Rebalance Recommendation",
        instance_id,
        at,
        json!({ "instance-id": instance_id }),
    )
}

/// An EC2 instance state-change notification: `instance_id` entered `state` at `at`.
pub fn state_change(instance_id: &str, state: &str, at: Timestamp) -> String {
    ec2_event(
        (ACCOUNT, REGION),
        "EC2 Instance State-change Notification",
        instance_id,
        at,
        json!({ "instance-id": instance_id, "state": state }),
    )
}

fn ec2_event(
    (account, region): (&str, &str),
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
        "account": account,
        "time": at.to_string(),
        "region": region,
        "resources": [format!("arn:aws:ec2:{region}:{account}:instance/{instance_id}")],
        "detail": detail,
    })
    .to_string()
}
