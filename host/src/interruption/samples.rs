//! Test messages in the shapes AWS documents (EC2 User Guide: "Spot Instance interruption
//! notices", "EC2 instance rebalance recommendations", "EventBridge events for EC2 instance
//! state changes"; AWS Health User Guide: "Monitoring AWS Health events with Amazon
//! EventBridge"), with times and ids made concrete.

pub const SPOT_INTERRUPTION: &str = r#"{
    "version": "0",
    "id": "12345678-1234-1234-1234-123456789012",
    "detail-type": "EC2 Spot Instance Interruption Warning",
    "source": "aws.ec2",
    "account": "123456789012",
    "time": "2024-03-05T14:20:00Z",
    "region": "us-east-2",
    "resources": ["arn:aws:ec2:us-east-2:123456789012:instance/i-1234567890abcdef0"],
    "detail": {
        "instance-id": "i-1234567890abcdef0",
        "instance-action": "terminate"
    }
}"#;

pub const REBALANCE_RECOMMENDATION: &str = r#"{
    "version": "0",
    "id": "12345678-1234-1234-1234-123456789012",
    "detail-type": "EC2 Instance Rebalance Recommendation",
    "source": "aws.ec2",
    "account": "123456789012",
    "time": "2024-03-05T14:18:00Z",
    "region": "us-east-2",
    "resources": ["arn:aws:ec2:us-east-2:123456789012:instance/i-1234567890abcdef0"],
    "detail": {
        "instance-id": "i-1234567890abcdef0"
    }
}"#;

pub const STATE_CHANGE: &str = r#"{
    "version": "0",
    "id": "7bf73129-1428-4cd3-a780-95db273d1602",
    "detail-type": "EC2 Instance State-change Notification",
    "source": "aws.ec2",
    "account": "123456789012",
    "time": "2021-11-11T21:29:54Z",
    "region": "us-east-1",
    "resources": ["arn:aws:ec2:us-east-1:123456789012:instance/i-abcd1111"],
    "detail": {
        "instance-id": "i-abcd1111",
        "state": "stopping"
    }
}"#;

/// Two instances (one named in both places) and a volume, which is not an instance.
pub const SCHEDULED_CHANGE: &str = r#"{
    "version": "0",
    "id": "7bf73129-1428-4cd3-a780-95db273d1602",
    "detail-type": "AWS Health Event",
    "source": "aws.health",
    "account": "123456789012",
    "time": "2023-01-27T01:43:21Z",
    "region": "us-east-1",
    "resources": ["i-abcd1111", "vol-0123456789abcdef0"],
    "detail": {
        "eventArn": "arn:aws:health:us-east-1::event/EC2/AWS_EC2_PERSISTENT_INSTANCE_RETIREMENT_SCHEDULED/AWS_EC2_PERSISTENT_INSTANCE_RETIREMENT_SCHEDULED_ABC123-DEF456",
        "service": "EC2",
        "eventTypeCode": "AWS_EC2_PERSISTENT_INSTANCE_RETIREMENT_SCHEDULED",
        "eventTypeCategory": "scheduledChange",
        "eventScopeCode": "ACCOUNT_SPECIFIC",
        "communicationId": "1234abc01232a4012345678-1",
        "startTime": "Mon, 06 Feb 2023 10:00:00 GMT",
        "endTime": "Mon, 06 Feb 2023 12:00:00 GMT",
        "lastUpdatedTime": "Fri, 27 Jan 2023 01:43:21 GMT",
        "statusCode": "upcoming",
        "eventRegion": "us-east-1",
        "eventDescription": [{
            "language": "en_US",
            "latestDescription": "EC2 has detected degradation of the underlying hardware hosting your Amazon EC2 instance associated with this event in the us-east-1 region. Due to this degradation your instance could already be unreachable. We will stop your instance after 2023-02-06 10:00:00 UTC."
        }],
        "affectedEntities": [
            {"entityValue": "i-abcd1111", "lastUpdatedTime": "Fri, 27 Jan 2023 01:43:21 GMT", "status": "PENDING"},
            {"entityValue": "i-0123456789abcdef0", "lastUpdatedTime": "Fri, 27 Jan 2023 01:43:21 GMT", "status": "PENDING"}
        ]
    }
}"#;

/// A spot interruption warning for `instance_id`.
pub fn spot(instance_id: &str) -> String {
    SPOT_INTERRUPTION.replace("i-1234567890abcdef0", instance_id)
}

/// An AWS Health scheduled change naming `instance_ids` in its affected entities, from the
/// account and region of [`spot`]'s warnings.
pub fn scheduled(instance_ids: &[&str]) -> String {
    let entities: Vec<String> = instance_ids
        .iter()
        .map(|id| format!(r#"{{"entityValue": "{id}"}}"#))
        .collect();
    format!(
        r#"{{
    "version": "0",
    "id": "7bf73129-1428-4cd3-a780-95db273d1602",
    "detail-type": "AWS Health Event",
    "source": "aws.health",
    "account": "123456789012",
    "time": "2023-01-27T01:43:21Z",
    "region": "us-east-2",
    "resources": [],
    "detail": {{
        "service": "EC2",
        "eventTypeCode": "AWS_EC2_INSTANCE_RETIREMENT_SCHEDULED",
        "eventTypeCategory": "scheduledChange",
        "startTime": "Mon, 06 Feb 2023 10:00:00 GMT",
        "affectedEntities": [{}]
    }}
}}"#,
        entities.join(", ")
    )
}
