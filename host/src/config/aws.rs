//! `provider.aws`: how orca reaches EC2 and what every instance it launches gets.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::{
    ConfigError, ExecConfig, FleetConfig, InterruptionQueueConfig, LaunchApi, LogsConfig,
    PodMetricsConfig, Seconds,
};

/// How orca reaches EC2 and what every instance it launches gets.
#[derive(Debug, Clone, Deserialize, Serialize, JsonSchema)]
#[serde(deny_unknown_fields, rename_all = "camelCase", default)]
pub struct AwsConfig {
    /// Another EC2 endpoint (moto, LocalStack, a VPC endpoint); absent: the region's own.
    pub endpoint_url: Option<String>,
    /// The AMI for pods without an `orca.research/ami` annotation. Required with `kind: aws`.
    pub default_ami: Option<String>,
    /// Subnets to launch into; a pod's subnet is picked from its UID so retries land in the
    /// same one. Empty: the default VPC's default subnet.
    pub subnet_ids: Vec<String>,
    /// Empty: the VPC's default security group.
    pub security_group_ids: Vec<String>,
    /// Instance profile name or ARN, e.g. one allowing `ec2:CreateTags` on itself (the
    /// bootstrap reports the exit code as a tag).
    pub instance_profile: Option<String>,
    /// The EC2 key pair an instance is launched with, for SSH; absent: none.
    pub key_name: Option<String>,
    /// The root EBS volume of every instance.
    pub root_volume: RootVolumeConfig,
    /// How a launch reaches EC2: `fleet` (default: one `CreateFleet` lets EC2 choose among
    /// every candidate type in every subnet) or `runInstances` (one offering at a time).
    pub launch_api: LaunchApi,
    /// The allocation strategies of fleet launches, per market.
    pub fleet: FleetConfig,
    /// How long an offering (type × market × subnet) that answered with a capacity error is
    /// skipped by `runInstances` launches (fleets offer every pool every time).
    pub unavailable_offering_ttl: Seconds,
    /// Client-side limits below EC2's request token buckets, so a burst of launches never
    /// trips `RequestLimitExceeded`.
    pub rate_limit: RateLimitConfig,
    /// How often instance types and spot prices are refreshed from EC2 into the catalogue;
    /// `0s` turns the refresh off.
    pub catalogue_refresh: Seconds,
    /// The SQS queue EventBridge fills with EC2's interruption notices for this cluster;
    /// absent: orca learns of interruptions only from the instances' state.
    pub interruption_queue: Option<InterruptionQueueConfig>,
    /// Where containers' output goes (CloudWatch Logs); absent: `kubectl logs` reads the
    /// instance's console output, its last 64 KiB.
    pub logs: Option<LogsConfig>,
    /// The pods' CPU, memory and GPU usage, published by each instance to CloudWatch and read
    /// back for `kubectl top` and autoscalers; absent: nothing is sampled or served.
    pub metrics: Option<PodMetricsConfig>,
    /// `kubectl exec` through Systems Manager's Run Command: on by default.
    pub exec: ExecConfig,
    /// What an instance's local NVMe instance-store disks hold, as Karpenter's
    /// `instanceStorePolicy` says: `RAID0` (default) or `None`.
    pub instance_store_policy: InstanceStorePolicy,
}

impl Default for AwsConfig {
    fn default() -> Self {
        AwsConfig {
            endpoint_url: None,
            default_ami: None,
            subnet_ids: Vec::new(),
            security_group_ids: Vec::new(),
            instance_profile: None,
            key_name: None,
            root_volume: RootVolumeConfig::default(),
            launch_api: LaunchApi::Fleet,
            fleet: FleetConfig::default(),
            unavailable_offering_ttl: Seconds::from_secs(180),
            rate_limit: RateLimitConfig::default(),
            catalogue_refresh: Seconds::from_secs(3600),
            interruption_queue: None,
            logs: None,
            metrics: None,
            exec: ExecConfig::default(),
            instance_store_policy: InstanceStorePolicy::Raid0,
        }
    }
}

/// What an instance does with its local NVMe instance-store disks (p5, g6, i4i, …), spelled as
/// Karpenter's `instanceStorePolicy` spells it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Deserialize, Serialize, JsonSchema)]
pub enum InstanceStorePolicy {
    /// The disks (striped into RAID0 when there are several) hold Docker's data root and the
    /// pod's emptyDir volumes. An instance without any runs as with `None`; one whose disks
    /// cannot be set up runs on its root volume, the pod's log saying why.
    #[default]
    #[serde(rename = "RAID0")]
    Raid0,
    /// The disks are left alone: Docker and the volumes stay on the root volume.
    None,
}

/// The root EBS volume of every instance.
#[derive(Debug, Clone, Deserialize, Serialize, JsonSchema)]
#[serde(deny_unknown_fields, rename_all = "camelCase", default)]
pub struct RootVolumeConfig {
    /// The AMI's root device name (`/dev/xvda` on Amazon Linux).
    pub device_name: String,
    /// Its size in GiB: 1 to 65536.
    pub size_gib: u32,
    /// gp3, gp2, io1, io2, st1, sc1 or standard.
    pub volume_type: String,
    /// Encrypted with the account's default EBS key.
    pub encrypted: bool,
}

impl Default for RootVolumeConfig {
    fn default() -> Self {
        RootVolumeConfig {
            device_name: "/dev/xvda".to_owned(),
            size_gib: 50,
            volume_type: "gp3".to_owned(),
            encrypted: true,
        }
    }
}

/// Client-side token buckets below EC2's, per kind of call.
#[derive(Debug, Clone, Copy, Deserialize, Serialize, JsonSchema)]
#[serde(deny_unknown_fields, rename_all = "camelCase", default)]
pub struct RateLimitConfig {
    /// Sustained calls per second for mutating calls (RunInstances, TerminateInstances).
    pub mutating_per_second: u32,
    /// Calls allowed at once before the sustained rate applies.
    pub mutating_burst: u32,
    /// Sustained calls per second for describe calls.
    pub describe_per_second: u32,
    /// Describe calls allowed at once before the sustained rate applies.
    pub describe_burst: u32,
}

impl Default for RateLimitConfig {
    fn default() -> Self {
        // Below EC2's default request token buckets for an account.
        RateLimitConfig {
            mutating_per_second: 5,
            mutating_burst: 50,
            describe_per_second: 20,
            describe_burst: 100,
        }
    }
}

const VOLUME_TYPES: [&str; 7] = ["gp3", "gp2", "io1", "io2", "st1", "sc1", "standard"];

impl AwsConfig {
    /// Checks what `kind: aws` needs.
    pub(super) fn validate(&self) -> Result<(), ConfigError> {
        match &self.default_ami {
            None => {
                return Err(ConfigError::invalid(
                    "provider.aws.defaultAmi",
                    "",
                    "an AMI id such as ami-0123456789abcdef0 (required with kind: aws)",
                ));
            }
            Some(ami) if !is_resource_id(ami, "ami-") => {
                return Err(ConfigError::invalid(
                    "provider.aws.defaultAmi",
                    ami,
                    "an AMI id such as ami-0123456789abcdef0",
                ));
            }
            Some(_) => {}
        }
        for (index, subnet) in self.subnet_ids.iter().enumerate() {
            if !is_resource_id(subnet, "subnet-") {
                return Err(ConfigError::invalid(
                    format!("provider.aws.subnetIds[{index}]"),
                    subnet,
                    "a subnet id such as subnet-0123456789abcdef0",
                ));
            }
        }
        for (index, group) in self.security_group_ids.iter().enumerate() {
            if !is_resource_id(group, "sg-") {
                return Err(ConfigError::invalid(
                    format!("provider.aws.securityGroupIds[{index}]"),
                    group,
                    "a security group id such as sg-0123456789abcdef0",
                ));
            }
        }
        super::endpoint::check_endpoint_url(
            "provider.aws.endpointUrl",
            self.endpoint_url.as_deref(),
        )?;
        let volume = &self.root_volume;
        if !VOLUME_TYPES.contains(&volume.volume_type.as_str()) {
            return Err(ConfigError::invalid(
                "provider.aws.rootVolume.volumeType",
                &volume.volume_type,
                "one of gp3, gp2, io1, io2, st1, sc1, standard",
            ));
        }
        if !(1..=65536).contains(&volume.size_gib) {
            return Err(ConfigError::invalid(
                "provider.aws.rootVolume.sizeGib",
                volume.size_gib,
                "1 to 65536",
            ));
        }
        self.fleet.validate()?;
        let limits = self.rate_limit;
        for (field, value) in [
            ("mutatingPerSecond", limits.mutating_per_second),
            ("mutatingBurst", limits.mutating_burst),
            ("describePerSecond", limits.describe_per_second),
            ("describeBurst", limits.describe_burst),
        ] {
            if value == 0 {
                return Err(ConfigError::invalid(
                    format!("provider.aws.rateLimit.{field}"),
                    value,
                    "a positive number",
                ));
            }
        }
        if let Some(queue) = &self.interruption_queue {
            queue.validate()?;
        }
        if let Some(logs) = &self.logs {
            logs.validate()?;
        }
        if let Some(metrics) = &self.metrics {
            metrics.validate()?;
        }
        self.exec.validate()?;
        Ok(())
    }
}

/// `ami-0123abcd`: the prefix, then 8 or 17 lowercase hex digits.
pub fn is_resource_id(id: &str, prefix: &str) -> bool {
    id.strip_prefix(prefix).is_some_and(|hex| {
        (hex.len() == 8 || hex.len() == 17)
            && hex
                .bytes()
                .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b))
    })
}
