//! The narrow seam between the provider and EC2: only the calls orca makes, in orca's own
//! types. The SDK client implements it for real; fakes implement it in unit tests for what
//! moto cannot show (capacity errors, throttling, eventual consistency, crashes mid-call).

use std::collections::{BTreeMap, HashMap};
use std::fmt;
use std::net::IpAddr;

use async_trait::async_trait;
use jiff::Timestamp;

use crate::provider::plan::{AllocationStrategy, Market};
use crate::provider::{InstanceState, StateReason};

/// Everything one `RunInstances` call carries.
#[derive(Debug, Clone, PartialEq)]
pub struct RunRequest {
    /// Makes the call idempotent: EC2 answers a repeated token with the instance it launched.
    pub client_token: String,
    pub instance_type: String,
    pub market: Market,
    /// Spot only: USD per hour; absent: up to the on-demand price.
    pub max_price: Option<f64>,
    pub image_id: String,
    pub subnet_id: Option<String>,
    /// Without a subnet: the zone whose default subnet EC2 launches into.
    pub zone: Option<String>,
    pub security_group_ids: Vec<String>,
    /// Name or ARN.
    pub instance_profile: Option<String>,
    pub key_name: Option<String>,
    pub root_volume: Option<RootVolume>,
    /// Raw user data (the SDK call base64-encodes it).
    pub user_data: String,
    /// Put on the instance and its volumes at launch.
    pub tags: BTreeMap<String, String>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RootVolume {
    pub device_name: String,
    pub size_gib: u32,
    pub volume_type: String,
    pub encrypted: bool,
    /// Whether the volume goes with its instance (orca: always).
    pub delete_on_termination: bool,
}

/// What every instance of a node shares, kept in one EC2 launch template (a fleet launches
/// only from a template), the fixed settings included. What differs per pod travels in the
/// fleet request.
#[derive(Debug, Clone, PartialEq)]
pub struct LaunchTemplateSpec {
    pub name: String,
    pub security_group_ids: Vec<String>,
    /// Name or ARN.
    pub instance_profile: Option<String>,
    pub key_name: Option<String>,
    pub root_volume: Option<RootVolume>,
    pub metadata: MetadataOptions,
    /// What the instance does when its operating system shuts down.
    pub shutdown: ShutdownBehaviour,
}

/// The instance metadata service as the node's instances offer it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MetadataOptions {
    /// IMDSv2 only: every metadata request needs a session token.
    pub tokens_required: bool,
    pub endpoint_enabled: bool,
    /// How many network hops a metadata answer travels (1: not into a container's network).
    pub hop_limit: u8,
}

/// `InstanceInitiatedShutdownBehavior`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ShutdownBehaviour {
    Stop,
    Terminate,
}

/// One version of one launch template, exactly: what a fleet launches from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LaunchTemplateRef {
    pub id: String,
    pub version: u64,
}

/// A launch template's content as `DescribeLaunchTemplateVersions` shows it, one entry per
/// setting: the key is the path of EC2's names (`MetadataOptions.HttpTokens`,
/// `BlockDeviceMappings./dev/xvda.Ebs.VolumeSize`), the value as EC2 spells it. Every setting
/// the version has is listed, those orca never sets included.
pub type TemplateSettings = BTreeMap<String, String>;

/// One version of a launch template, as `DescribeLaunchTemplateVersions` lists it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LaunchTemplateVersion {
    pub template: LaunchTemplateRef,
    /// Whether it is the template's default version.
    pub default: bool,
    pub settings: TemplateSettings,
}

/// One pool of a fleet request: an instance type in a subnet (its zone).
#[derive(Debug, Clone, PartialEq)]
pub struct FleetPool {
    pub instance_type: String,
    pub subnet_id: Option<String>,
    /// Without a subnet: the zone whose default subnet EC2 launches into.
    pub zone: Option<String>,
    /// `prioritized` only: lower goes first.
    pub priority: Option<f64>,
}

/// One `CreateFleet` of type `instant` for one instance in one market.
#[derive(Debug, Clone, PartialEq)]
pub struct FleetRequest {
    /// Used up by the first answer, even one that launched nothing (see `fleet.rs`).
    pub client_token: String,
    /// The token's place in the pod's sequence, tagged on the fleet (`TAG_LAUNCH_ATTEMPT`).
    pub place: u32,
    /// The node's template, by id and exact version (never `$Latest` or `$Default`).
    pub template: LaunchTemplateRef,
    pub market: Market,
    pub allocation_strategy: AllocationStrategy,
    pub pools: Vec<FleetPool>,
    pub image_id: String,
    /// Spot only: USD per hour; absent: up to the on-demand price.
    pub max_price: Option<f64>,
    /// Raw user data (the SDK call base64-encodes it).
    pub user_data: String,
    /// Put on the fleet, the instance and its volumes.
    pub tags: BTreeMap<String, String>,
}

/// On the fleet only: which place in the pod's token sequence it used, for people reading
/// the account's fleets.
pub const TAG_LAUNCH_ATTEMPT: &str = "orca.research/launch-attempt";

/// An instance a fleet launched, and the pool it came from.
#[derive(Debug, Clone, PartialEq)]
pub struct FleetInstance {
    pub instance_id: String,
    pub instance_type: String,
    pub market: Market,
    pub subnet_id: Option<String>,
    pub zone: Option<String>,
}

/// A pool a fleet could not launch in, and why.
#[derive(Debug, Clone, PartialEq)]
pub struct FleetError {
    pub instance_type: Option<String>,
    pub subnet_id: Option<String>,
    pub zone: Option<String>,
    pub code: String,
    pub message: String,
}

/// `CreateFleet`'s answer.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct FleetAnswer {
    pub fleet_id: String,
    pub instances: Vec<FleetInstance>,
    pub errors: Vec<FleetError>,
}

/// One instance as `DescribeInstances` or `RunInstances` shows it.
#[derive(Debug, Clone, PartialEq)]
pub struct Ec2Instance {
    pub instance_id: String,
    pub instance_type: String,
    pub state: InstanceState,
    pub private_ip: Option<IpAddr>,
    pub launch_time: Timestamp,
    pub spot: bool,
    pub state_reason: Option<StateReason>,
    pub tags: BTreeMap<String, String>,
    /// The availability zone it runs in (`Placement.AvailabilityZone`).
    pub zone: Option<String>,
    /// The EBS volumes its block device mappings show attached (or attaching), the root
    /// volume among them.
    pub volume_ids: Vec<String>,
    /// When it was asked to stop or terminate, from `StateTransitionReason`
    /// (`User initiated (2026-11-27 22:00:00 GMT)`), when EC2 says.
    pub ended_at: Option<Timestamp>,
}

impl Ec2Instance {
    /// The market it runs in, from its lifecycle.
    pub fn market(&self) -> Market {
        if self.spot {
            Market::Spot
        } else {
            Market::OnDemand
        }
    }
}

/// One EBS volume as `DescribeVolumes` shows it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Ec2Volume {
    pub volume_id: String,
    /// The availability zone it is in: it attaches only to instances there.
    pub zone: String,
    pub state: VolumeState,
    /// The instances it is attached to (or attaching to, or detaching from).
    pub attached_to: Vec<String>,
}

/// An EBS volume's state (`creating`, `available`, `in-use`, `deleting`, `deleted`, `error`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum VolumeState {
    Creating,
    Available,
    InUse,
    Deleting,
    Deleted,
    Error,
}

impl VolumeState {
    pub fn parse(value: &str) -> Option<VolumeState> {
        Some(match value {
            "creating" => VolumeState::Creating,
            "available" => VolumeState::Available,
            "in-use" => VolumeState::InUse,
            "deleting" => VolumeState::Deleting,
            "deleted" => VolumeState::Deleted,
            "error" => VolumeState::Error,
            _ => return None,
        })
    }

    pub fn as_str(self) -> &'static str {
        match self {
            VolumeState::Creating => "creating",
            VolumeState::Available => "available",
            VolumeState::InUse => "in-use",
            VolumeState::Deleting => "deleting",
            VolumeState::Deleted => "deleted",
            VolumeState::Error => "error",
        }
    }
}

/// A `Name=tag:…, Values=[…]` style filter.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Filter {
    pub name: String,
    pub values: Vec<String>,
}

impl Filter {
    pub fn new(name: impl Into<String>, values: impl IntoIterator<Item = String>) -> Filter {
        Filter {
            name: name.into(),
            values: values.into_iter().collect(),
        }
    }

    pub fn tag(key: &str, value: impl Into<String>) -> Filter {
        Filter::new(format!("tag:{key}"), [value.into()])
    }

    /// The instances orca launched for the cluster whose id is `cluster_id`
    /// (`ManagedBy=ORCA` and `orca.research/cluster-id`): what every listing of the cluster's
    /// instances starts from, so no second cluster's instance is ever counted or touched.
    pub fn cluster_instances(cluster_id: &str) -> [Filter; 2] {
        use crate::provider::ownership::{MANAGED_BY_VALUE, TAG_CLUSTER_ID, TAG_MANAGED_BY};
        [
            Filter::tag(TAG_MANAGED_BY, MANAGED_BY_VALUE),
            Filter::tag(TAG_CLUSTER_ID, cluster_id),
        ]
    }
}

/// The specs `DescribeInstanceTypes` reports, for the catalogue refresh.
#[derive(Debug, Clone, PartialEq)]
pub struct InstanceTypeInfo {
    pub name: String,
    pub vcpus: u32,
    pub memory_mib: u64,
    pub gpus: u32,
    pub gpu_model: Option<String>,
    /// `x86_64`, `arm64`, … as EC2 names them.
    pub architectures: Vec<String>,
}

/// One batched `DescribeSpotPriceHistory` (Linux/UNIX): every price change since `since` of
/// the pools of `instance_types` in `zones` (every zone when empty), and the price in effect
/// at `since`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SpotHistoryQuery {
    pub instance_types: Vec<String>,
    pub zones: Vec<String>,
    pub since: Timestamp,
}

/// One price change of one spot pool, as `DescribeSpotPriceHistory` answers it.
#[derive(Debug, Clone, PartialEq)]
pub struct SpotPriceChange {
    pub instance_type: String,
    pub zone: String,
    /// USD per hour from `at` on.
    pub usd_per_hour: f64,
    pub at: Timestamp,
}

/// What kind of failure a call met, before any class is assigned.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ApiErrorKind {
    /// EC2 answered with an error code.
    Service,
    /// The request never got an answer (connection, DNS, TLS, timeout).
    Transport,
}

/// A failed call: EC2's code and message, or what went wrong on the way.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ApiError {
    pub kind: ApiErrorKind,
    pub code: String,
    pub message: String,
    /// The HTTP status when there was an answer.
    pub status: Option<u16>,
}

impl ApiError {
    pub fn service(code: impl Into<String>, message: impl Into<String>) -> ApiError {
        ApiError {
            kind: ApiErrorKind::Service,
            code: code.into(),
            message: message.into(),
            status: Some(400),
        }
    }

    pub fn transport(message: impl Into<String>) -> ApiError {
        ApiError {
            kind: ApiErrorKind::Transport,
            code: "RequestFailed".to_owned(),
            message: message.into(),
            status: None,
        }
    }
}

impl fmt::Display for ApiError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", self.code, self.message)
    }
}

impl std::error::Error for ApiError {}

/// The EC2 calls orca makes.
///
/// # Guarantees an implementation gives
/// - `describe_instances` returns every page.
/// - `terminate_instances` of an instance that no longer exists is not an error for the
///   others in the call (the caller treats `InvalidInstanceID.NotFound` as done).
#[async_trait]
pub trait Ec2Api: Send + Sync + 'static {
    async fn run_instance(&self, request: &RunRequest) -> Result<Ec2Instance, ApiError>;
    /// Creates the template and answers its id and version (1);
    /// `InvalidLaunchTemplateName.AlreadyExistsException` when one of that name exists.
    async fn create_launch_template(
        &self,
        spec: &LaunchTemplateSpec,
    ) -> Result<LaunchTemplateRef, ApiError>;
    /// Every version of the template named `name` (every page);
    /// `InvalidLaunchTemplateName.NotFoundException` when EC2 knows no template of that name
    /// (none, or one too new to show yet).
    async fn describe_launch_template_versions(
        &self,
        name: &str,
    ) -> Result<Vec<LaunchTemplateVersion>, ApiError>;
    /// One `CreateFleet` of type `instant`.
    async fn create_fleet(&self, request: &FleetRequest) -> Result<FleetAnswer, ApiError>;
    /// Subnet id → its Availability Zone.
    async fn subnet_zones(
        &self,
        subnet_ids: &[String],
    ) -> Result<HashMap<String, String>, ApiError>;
    async fn describe_instances(&self, filters: &[Filter]) -> Result<Vec<Ec2Instance>, ApiError>;
    /// The volumes of `volume_ids` that exist (by filter: an unknown id is left out, not an
    /// error).
    async fn describe_volumes(&self, volume_ids: &[String]) -> Result<Vec<Ec2Volume>, ApiError>;
    /// `AttachVolume`: `volume_id` to `instance_id` at `device`, not deleted when the
    /// instance terminates.
    async fn attach_volume(
        &self,
        volume_id: &str,
        instance_id: &str,
        device: &str,
    ) -> Result<(), ApiError>;
    /// Returns the ids EC2 accepted.
    async fn terminate_instances(&self, instance_ids: &[String]) -> Result<Vec<String>, ApiError>;
    /// Adds (or overwrites) `tags` on every instance in `instance_ids`; all or nothing.
    async fn create_tags(
        &self,
        instance_ids: &[String],
        tags: &BTreeMap<String, String>,
    ) -> Result<(), ApiError>;
    /// The latest serial console output, decoded; `None` when there is none yet.
    async fn console_output(&self, instance_id: &str) -> Result<Option<String>, ApiError>;
    async fn describe_instance_types(&self) -> Result<Vec<InstanceTypeInfo>, ApiError>;
    /// The current Linux spot price per instance type (the lowest across zones).
    async fn spot_prices(&self) -> Result<HashMap<String, f64>, ApiError>;
    /// The spot price history of the pools `query` names, every page of one
    /// `DescribeSpotPriceHistory` (see [`SpotHistoryQuery`]).
    async fn spot_price_history(
        &self,
        query: &SpotHistoryQuery,
    ) -> Result<Vec<SpotPriceChange>, ApiError>;
    /// The availability zones offering each instance type (`DescribeInstanceTypeOfferings`).
    async fn instance_type_zones(&self) -> Result<HashMap<String, Vec<String>>, ApiError>;
    /// A cheap call that proves credentials and endpoint work.
    async fn ping(&self) -> Result<(), ApiError>;
}

/// A shared client is a client: layers (rate limit, metrics) wrap an `Arc<dyn Ec2Api>` as
/// they wrap the SDK client.
#[async_trait]
impl<T: Ec2Api + ?Sized> Ec2Api for std::sync::Arc<T> {
    async fn run_instance(&self, request: &RunRequest) -> Result<Ec2Instance, ApiError> {
        (**self).run_instance(request).await
    }

    async fn create_launch_template(
        &self,
        spec: &LaunchTemplateSpec,
    ) -> Result<LaunchTemplateRef, ApiError> {
        (**self).create_launch_template(spec).await
    }

    async fn describe_launch_template_versions(
        &self,
        name: &str,
    ) -> Result<Vec<LaunchTemplateVersion>, ApiError> {
        (**self).describe_launch_template_versions(name).await
    }

    async fn create_fleet(&self, request: &FleetRequest) -> Result<FleetAnswer, ApiError> {
        (**self).create_fleet(request).await
    }

    async fn subnet_zones(
        &self,
        subnet_ids: &[String],
    ) -> Result<HashMap<String, String>, ApiError> {
        (**self).subnet_zones(subnet_ids).await
    }

    async fn describe_instances(&self, filters: &[Filter]) -> Result<Vec<Ec2Instance>, ApiError> {
        (**self).describe_instances(filters).await
    }

    async fn describe_volumes(&self, volume_ids: &[String]) -> Result<Vec<Ec2Volume>, ApiError> {
        (**self).describe_volumes(volume_ids).await
    }

    async fn attach_volume(
        &self,
        volume_id: &str,
        instance_id: &str,
        device: &str,
    ) -> Result<(), ApiError> {
        (**self).attach_volume(volume_id, instance_id, device).await
    }

    async fn terminate_instances(&self, instance_ids: &[String]) -> Result<Vec<String>, ApiError> {
        (**self).terminate_instances(instance_ids).await
    }

    async fn create_tags(
        &self,
        instance_ids: &[String],
        tags: &BTreeMap<String, String>,
    ) -> Result<(), ApiError> {
        (**self).create_tags(instance_ids, tags).await
    }

    async fn console_output(&self, instance_id: &str) -> Result<Option<String>, ApiError> {
        (**self).console_output(instance_id).await
    }

    async fn describe_instance_types(&self) -> Result<Vec<InstanceTypeInfo>, ApiError> {
        (**self).describe_instance_types().await
    }

    async fn spot_prices(&self) -> Result<HashMap<String, f64>, ApiError> {
        (**self).spot_prices().await
    }

    async fn spot_price_history(
        &self,
        query: &SpotHistoryQuery,
    ) -> Result<Vec<SpotPriceChange>, ApiError> {
        (**self).spot_price_history(query).await
    }

    async fn instance_type_zones(&self) -> Result<HashMap<String, Vec<String>>, ApiError> {
        (**self).instance_type_zones().await
    }

    async fn ping(&self) -> Result<(), ApiError> {
        (**self).ping().await
    }
}
