//! EC2's notices as EventBridge delivers them to the interruption queue, for the tests and
//! benches that play EC2's part.

use jiff::Timestamp;
use serde_json::json;

/// An EC2 spot interruption warning for `instance_id`, issued at `at`.
pub fn spot_warning(instance_id: &str, at: Timestamp) -> String {
    json!({
        "version": "0",
        "id": format!("test-{instance_id}-{}", at.as_millisecond()),
        "detail-type": "EC2 Spot Instance Interruption Warning",
        "source": "aws.ec2",
        "account": "123456789012",
        "time": at.to_string(),
        "region": "us-west-2",
        "resources": [format!("arn:aws:ec2:us-west-2:123456789012:instance/{instance_id}")],
        "detail": { "instance-id": instance_id, "instance-action": "terminate" }
    })
    .to_string()
}
