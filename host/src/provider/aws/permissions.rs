//! Every AWS call orca and its workload make, and what IAM authorizes it by: the list the
//! policies in `deploy/iam/` are checked against (`permissions/tests.rs`). The source of truth
//! for each call's actions and resource types is AWS's Service Authorization Reference (EC2,
//! SQS, STS, IAM) and, for what one call implies, the EC2 documentation: a launch with
//! `TagSpecifications` is also authorized as `ec2:CreateTags` (with `ec2:CreateAction`), a
//! launch with an instance profile as `iam:PassRole`, and an EC2 Fleet's launch as the caller's
//! `ec2:RunInstances`.
//!
//! The tests read the production source for the calls it makes (every zero-argument call named
//! like an operation of an AWS SDK client orca depends on), the bootstrap script for the
//! workload's, and fail when a call is missing here, when a permission listed here is missing
//! from its policy, or when a policy grants an action no call needs.

/// An AWS service orca calls, by its SDK crate and its IAM action prefix.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Service {
    Ec2,
    Sqs,
    Sts,
    Logs,
    CloudWatch,
    Ssm,
}

impl Service {
    pub const ALL: [Service; 6] = [
        Service::Ec2,
        Service::Sqs,
        Service::Sts,
        Service::Logs,
        Service::CloudWatch,
        Service::Ssm,
    ];

    /// The SDK crate orca calls it through.
    pub fn sdk_crate(self) -> &'static str {
        match self {
            Service::Ec2 => "aws-sdk-ec2",
            Service::Sqs => "aws-sdk-sqs",
            Service::Sts => "aws-sdk-sts",
            Service::Logs => "aws-sdk-cloudwatchlogs",
            Service::CloudWatch => "aws-sdk-cloudwatch",
            Service::Ssm => "aws-sdk-ssm",
        }
    }

    /// As the AWS CLI names it (`aws ec2 …`).
    pub fn cli_name(self) -> &'static str {
        match self {
            Service::Ec2 => "ec2",
            Service::Sqs => "sqs",
            Service::Sts => "sts",
            Service::Logs => "logs",
            Service::CloudWatch => "cloudwatch",
            Service::Ssm => "ssm",
        }
    }
}

/// What a permission must be granted on: one of the action's resource types in the Service
/// Authorization Reference, or `*` for an action with no resource-level permissions.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum On {
    /// The action supports no resource-level permissions: the policy grants it on `*`.
    Any,
    /// An EC2 resource type: `arn:aws:ec2:REGION:ACCOUNT:{type}/…`.
    Ec2(&'static str),
    /// The interruption queue: `arn:aws:sqs:REGION:ACCOUNT:{name}`.
    Queue,
    /// The workload's role: `arn:aws:iam::ACCOUNT:role/{name}`.
    Role,
    /// The containers' log group: `arn:aws:logs:REGION:ACCOUNT:log-group:{name}`.
    LogGroup,
    /// A stream of it: `arn:aws:logs:REGION:ACCOUNT:log-group:{name}:log-stream:{stream}`,
    /// which `…:log-group:{name}:*` covers.
    LogStream,
    /// A Systems Manager document: `arn:aws:ssm:REGION::document/{name}` (AWS's own).
    Document,
}

impl On {
    /// Whether a statement's `Resource` entry covers this resource type.
    pub fn covered_by(self, resource: &str) -> bool {
        if resource == "*" {
            return true;
        }
        match self {
            On::Any => false,
            On::Ec2(kind) => {
                resource.starts_with("arn:aws:ec2:") && resource.contains(&format!(":{kind}/"))
            }
            On::Queue => resource.starts_with("arn:aws:sqs:"),
            On::Role => resource.starts_with("arn:aws:iam::") && resource.contains(":role/"),
            On::LogGroup => {
                resource.starts_with("arn:aws:logs:")
                    && resource.contains(":log-group:")
                    && !resource.ends_with(":*")
                    && !resource.contains(":log-stream:")
            }
            On::LogStream => {
                resource.starts_with("arn:aws:logs:")
                    && resource.contains(":log-group:")
                    && (resource.ends_with(":*") || resource.contains(":log-stream:"))
            }
            On::Document => resource.starts_with("arn:aws:ssm:") && resource.contains(":document/"),
        }
    }
}

/// One IAM action a call needs, and on what.
#[derive(Debug, Clone, Copy)]
pub struct Permission {
    pub action: &'static str,
    pub on: &'static [On],
}

/// One AWS operation, with every permission AWS checks when orca calls it the way it does.
#[derive(Debug, Clone, Copy)]
pub struct AwsCall {
    pub service: Service,
    /// As the API names it (`DescribeInstances`).
    pub operation: &'static str,
    pub needs: &'static [Permission],
}

const fn needs(action: &'static str, on: &'static [On]) -> Permission {
    Permission { action, on }
}

const fn logs(operation: &'static str, needs: &'static [Permission]) -> AwsCall {
    AwsCall {
        service: Service::Logs,
        operation,
        needs,
    }
}

const fn ec2(operation: &'static str, needs: &'static [Permission]) -> AwsCall {
    AwsCall {
        service: Service::Ec2,
        operation,
        needs,
    }
}

/// What a launch into a subnet with security groups, from an AMI, with a root volume, a key
/// pair (`keyName`) and for spot a spot request, is authorized against as `ec2:RunInstances`.
const RUN_INSTANCES_ON: &[On] = &[
    On::Ec2("instance"),
    On::Ec2("volume"),
    On::Ec2("network-interface"),
    On::Ec2("subnet"),
    On::Ec2("security-group"),
    On::Ec2("image"),
    On::Ec2("key-pair"),
    On::Ec2("spot-instances-request"),
];

/// The same for a fleet's launch, which also names the node's launch template.
const FLEET_RUN_INSTANCES_ON: &[On] = &[
    On::Ec2("instance"),
    On::Ec2("volume"),
    On::Ec2("network-interface"),
    On::Ec2("subnet"),
    On::Ec2("security-group"),
    On::Ec2("image"),
    On::Ec2("key-pair"),
    On::Ec2("spot-instances-request"),
    On::Ec2("launch-template"),
];

/// Every call orca's role makes (`deploy/iam/orca.json`).
pub const ORCA_CALLS: &[AwsCall] = &[
    ec2(
        "RunInstances",
        &[
            needs("ec2:RunInstances", RUN_INSTANCES_ON),
            needs("ec2:CreateTags", &[On::Ec2("instance"), On::Ec2("volume")]),
            needs("iam:PassRole", &[On::Role]),
        ],
    ),
    ec2(
        "CreateFleet",
        &[
            needs("ec2:CreateFleet", &[On::Ec2("fleet")]),
            needs("ec2:RunInstances", FLEET_RUN_INSTANCES_ON),
            needs(
                "ec2:CreateTags",
                &[On::Ec2("fleet"), On::Ec2("instance"), On::Ec2("volume")],
            ),
            needs("iam:PassRole", &[On::Role]),
        ],
    ),
    ec2(
        "CreateLaunchTemplate",
        &[needs(
            "ec2:CreateLaunchTemplate",
            &[On::Ec2("launch-template")],
        )],
    ),
    ec2(
        "DescribeLaunchTemplateVersions",
        &[needs("ec2:DescribeLaunchTemplateVersions", &[On::Any])],
    ),
    ec2(
        "DescribeSubnets",
        &[needs("ec2:DescribeSubnets", &[On::Any])],
    ),
    ec2(
        "DescribeInstances",
        &[needs("ec2:DescribeInstances", &[On::Any])],
    ),
    ec2(
        "DescribeVolumes",
        &[needs("ec2:DescribeVolumes", &[On::Any])],
    ),
    // A pod's EBS volumes: AWS authorizes the instance (orca's own, by its tags) and the
    // volume (the user's; any, unless the policy is narrowed to tagged volumes).
    ec2(
        "AttachVolume",
        &[needs(
            "ec2:AttachVolume",
            &[On::Ec2("instance"), On::Ec2("volume")],
        )],
    ),
    ec2(
        "TerminateInstances",
        &[needs("ec2:TerminateInstances", &[On::Ec2("instance")])],
    ),
    ec2(
        "CreateTags",
        &[needs("ec2:CreateTags", &[On::Ec2("instance")])],
    ),
    ec2(
        "GetConsoleOutput",
        &[needs("ec2:GetConsoleOutput", &[On::Ec2("instance")])],
    ),
    ec2(
        "DescribeInstanceTypes",
        &[needs("ec2:DescribeInstanceTypes", &[On::Any])],
    ),
    ec2(
        "DescribeSpotPriceHistory",
        &[needs("ec2:DescribeSpotPriceHistory", &[On::Any])],
    ),
    ec2(
        "DescribeInstanceTypeOfferings",
        &[needs("ec2:DescribeInstanceTypeOfferings", &[On::Any])],
    ),
    ec2(
        "DescribeAvailabilityZones",
        &[needs("ec2:DescribeAvailabilityZones", &[On::Any])],
    ),
    AwsCall {
        service: Service::Sqs,
        operation: "ReceiveMessage",
        needs: &[needs("sqs:ReceiveMessage", &[On::Queue])],
    },
    AwsCall {
        service: Service::Sqs,
        operation: "DeleteMessageBatch",
        needs: &[needs("sqs:DeleteMessage", &[On::Queue])],
    },
    AwsCall {
        service: Service::Sqs,
        operation: "ChangeMessageVisibilityBatch",
        needs: &[needs("sqs:ChangeMessageVisibility", &[On::Queue])],
    },
    logs(
        "CreateLogGroup",
        &[needs("logs:CreateLogGroup", &[On::LogGroup])],
    ),
    logs(
        "PutRetentionPolicy",
        &[needs("logs:PutRetentionPolicy", &[On::LogGroup])],
    ),
    logs(
        "GetLogEvents",
        &[needs("logs:GetLogEvents", &[On::LogStream])],
    ),
    // The pods' usage (`provider.aws.metrics`): CloudWatch's metric actions have no
    // resource-level permissions.
    AwsCall {
        service: Service::CloudWatch,
        operation: "GetMetricData",
        needs: &[needs("cloudwatch:GetMetricData", &[On::Any])],
    },
    // `kubectl exec` (`provider.aws.exec`): Run Command is authorized on the instance (orca's
    // own, by its tags, with `ssm:resourceTag`) and on the document; reading and cancelling
    // an invocation have no resource-level permissions.
    AwsCall {
        service: Service::Ssm,
        operation: "SendCommand",
        needs: &[needs(
            "ssm:SendCommand",
            &[On::Ec2("instance"), On::Document],
        )],
    },
    AwsCall {
        service: Service::Ssm,
        operation: "GetCommandInvocation",
        needs: &[needs("ssm:GetCommandInvocation", &[On::Any])],
    },
    AwsCall {
        service: Service::Ssm,
        operation: "CancelCommand",
        needs: &[needs("ssm:CancelCommand", &[On::Any])],
    },
    // Needs no permission: AWS answers it for any valid credentials, even under an explicit
    // deny.
    AwsCall {
        service: Service::Sts,
        operation: "GetCallerIdentity",
        needs: &[],
    },
];

/// Every call the workload's instance makes with its role (`deploy/iam/workload.json`): the
/// bootstrap tags its own instance with the exit code and publishes the pod's usage
/// (`provider.aws.metrics`; no resource-level permissions, so the policy holds it to the
/// namespace with `cloudwatch:namespace`), and Docker's `awslogs` driver writes each
/// container's output ([`LOG_DRIVER_CALLS`]).
pub const WORKLOAD_CALLS: &[AwsCall] = &[
    ec2(
        "CreateTags",
        &[needs("ec2:CreateTags", &[On::Ec2("instance")])],
    ),
    AwsCall {
        service: Service::CloudWatch,
        operation: "PutMetricData",
        needs: &[needs("cloudwatch:PutMetricData", &[On::Any])],
    },
    LOG_DRIVER_CALLS[0],
    LOG_DRIVER_CALLS[1],
];

/// What Docker's `awslogs` driver calls with the instance's role when orca runs containers with
/// it (`provider.aws.logs`; `awslogs-create-group=false`, so never `CreateLogGroup`).
pub const LOG_DRIVER_CALLS: [AwsCall; 2] = [
    logs(
        "CreateLogStream",
        &[needs("logs:CreateLogStream", &[On::LogGroup])],
    ),
    logs(
        "PutLogEvents",
        &[needs("logs:PutLogEvents", &[On::LogStream])],
    ),
];

mod conditions;
mod tests;
