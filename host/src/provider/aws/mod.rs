//! The `aws` provider: one EC2 instance per pod.
//!
//! - Launch: by default one EC2 Fleet per market, carrying every candidate type in every
//!   subnet; EC2 picks the pool (see `fleet.rs`, where its exactly-once rules are). With
//!   `launchApi: runInstances`, the pod's offerings in order (see
//!   [`crate::provider::offerings`]), skipping those that recently had no capacity. Every `RunInstances` for a pod carries the same
//!   `ClientToken`, derived from the pod UID alone, and instances already tagged for the pod
//!   are adopted first: EC2 answers a repeated token with the instance it launched (same
//!   parameters) or refuses it (`IdempotentParameterMismatch`, other parameters), so no retry,
//!   crash, restart or changed plan creates a second instance.
//! - Status: one paginated `DescribeInstances` per sync period for the whole node.
//! - Terminate: by instance id, batched into `TerminateInstances`; when EC2 refuses a batch for
//!   one id, each id is asked alone, so one refusal fails only its own instance.
//! - Exit codes: the bootstrap's report on the serial console (`GetConsoleOutput`), per
//!   container, else its exit-code tag.
//! - Logs: CloudWatch Logs when `provider.aws.logs` is set (one stream per pod and container,
//!   read a page at a time, see `logs/`); the serial console before a container's stream exists
//!   (the boot log of an instance whose workload never started) and when logs are not shipped.

pub mod api;
mod batch;
mod calls;
pub mod census;
mod classify;
pub mod exec;
mod fleet;
pub mod listing;
pub mod logs;
mod measured;
#[cfg(test)]
mod permissions;
mod rate;
pub mod sdk;
mod sdk_fleet;
mod sdk_template;
mod status;
pub mod strays;
mod template;
mod token;
mod unavailable;
pub mod usage;
mod volumes;
pub mod workload;

#[cfg(test)]
pub(crate) mod fake;
#[cfg(test)]
mod tests;

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use jiff::Timestamp;
use sha2::{Digest, Sha256};

use self::api::{Ec2Api, Ec2Instance, Filter, RootVolume, RunRequest};
use self::batch::Batcher;
pub use self::calls::Ec2Calls;
use self::classify::{class_of, is_not_found, is_refusal_of_one_instance, provider_error};
use self::exec::SsmApi;
pub use self::fleet::FLEET_TOKENS_SPENT_ANNOTATION;
use self::fleet::FleetAttempts;
use self::logs::LogsApi;
use self::logs::LogsError;
use self::logs::read::StreamLog;
pub use self::measured::Measured;
pub use self::rate::RateLimited;
use self::template::NodeTemplate;
use self::unavailable::UnavailableOfferings;
use self::usage::CloudWatchApi;
use self::usage::read::UsageReader;
use super::ownership::{
    MANAGED_BY_VALUE, TAG_CLUSTER, TAG_CLUSTER_ID, TAG_MANAGED_BY, TAG_NODE, TAG_POD_UID,
};
use super::zones::ZoneConstraint;
use super::{
    Attached, Claimed, ExecOutcome, ExecRequest, InstanceState, InstanceStatus, LaunchFailed,
    LaunchRequest, Launched, LogCursor, LogLine, LogPage, LogStart, Offering, PassedOver, PodKey,
    PodUsage, Provider, ProviderError, Termination, UsageQuery, VolumeAttachment, WorkloadExit,
    offerings,
};
use crate::config::{AwsConfig, LaunchApi, PodMetricsConfig};
use crate::provider::plan::{LaunchPlan, Market};
use crate::workload::AMI_ANNOTATION;

/// `pods.launchVisibilityGrace`'s default.
const DEFAULT_VISIBILITY_GRACE: Duration = Duration::from_secs(120);
/// How long per-pod lookups and terminations wait for company before one batched call.
const BATCH_WINDOW: Duration = Duration::from_millis(50);
/// Values per `DescribeInstances` filter (EC2 accepts up to 200).
const MAX_FILTER_VALUES: usize = 200;
/// Instance ids per `TerminateInstances` call (EC2 accepts up to 1000).
const MAX_TERMINATE: usize = 1000;
/// Resource ids per `CreateTags` call (EC2 accepts up to 1000).
const MAX_TAGGED: usize = 1000;

/// What one instance id of a termination batch got.
type TerminationAnswer = Result<Termination, api::ApiError>;

/// States in which an instance still runs (or will) the pod's workload.
const LIVE_STATES: [&str; 4] = ["pending", "running", "stopping", "stopped"];

/// A subnet, or a zone's default subnet, or (both `None`) the default subnet.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct Place {
    pub subnet_id: Option<String>,
    pub zone: Option<String>,
}

/// Who this provider launches for: the node and cluster its tags name. Instances are listed by
/// the node's name and the cluster's id (the `kube-system` namespace's UID), never by the
/// configured cluster name, which two clusters may share (see [`super::ownership`]).
#[derive(Debug, Clone)]
pub struct Identity {
    pub node: String,
    /// `node.clusterName`, tagged for people.
    pub cluster: String,
    /// The UID of the cluster's `kube-system` namespace.
    pub cluster_id: String,
}

pub struct AwsProvider {
    api: Arc<dyn Ec2Api>,
    identity: Identity,
    config: AwsConfig,
    unavailable: UnavailableOfferings,
    lookups: Batcher<String, Ec2Instance>,
    terminations: Batcher<String, TerminationAnswer>,
    template: NodeTemplate,
    fleets: FleetAttempts,
    /// The configured subnets' zones, read once from `DescribeSubnets` when a pod first names
    /// zones.
    subnet_zones: tokio::sync::OnceCell<HashMap<String, String>>,
    /// How long an instance EC2 launched may take to show up by tag (`pods.launchVisibilityGrace`).
    visibility_grace: Duration,
    /// Pods created before this may have used fleet tokens this process does not remember.
    started: Timestamp,
    /// Where containers' output is read from, when it is shipped.
    logs: Option<ShippedLogs>,
    /// Where the pods' usage is read from, when instances publish it.
    usage: Option<UsageReader>,
    /// Systems Manager, which runs `kubectl exec`'s commands; absent: exec is turned off.
    ssm: Option<Arc<dyn SsmApi>>,
}

/// The CloudWatch Logs group containers write to, and the client that reads it.
struct ShippedLogs {
    api: Arc<dyn LogsApi>,
    group: String,
}

/// A CloudWatch Logs failure as the kubelet API reports it: throttling and unreachability
/// are worth another try, the rest is not.
fn logs_provider_error(error: &LogsError) -> ProviderError {
    match error {
        LogsError::Throttled { code, message } => {
            ProviderError::transient(code.clone(), message.clone())
        }
        other => ProviderError::permanent(other.code(), other.to_string()),
    }
}

impl AwsProvider {
    /// Must be called inside a tokio runtime (it spawns the batching tasks).
    pub fn new(api: Arc<dyn Ec2Api>, identity: Identity, config: AwsConfig) -> AwsProvider {
        let lookups = {
            let api = api.clone();
            let identity = identity.clone();
            Batcher::spawn(BATCH_WINDOW, MAX_FILTER_VALUES, move |uids: Vec<String>| {
                let api = api.clone();
                let identity = identity.clone();
                async move { live_instances_of(api.as_ref(), &identity, uids).await }
            })
        };
        let terminations = {
            let api = api.clone();
            Batcher::spawn(BATCH_WINDOW, MAX_TERMINATE, move |ids: Vec<String>| {
                let api = api.clone();
                async move { terminate_batch(api.as_ref(), ids).await }
            })
        };
        AwsProvider {
            unavailable: UnavailableOfferings::new(config.unavailable_offering_ttl.get()),
            template: NodeTemplate::new(&identity.node, &identity.cluster_id, &config),
            fleets: FleetAttempts::default(),
            subnet_zones: tokio::sync::OnceCell::new(),
            visibility_grace: DEFAULT_VISIBILITY_GRACE,
            started: Timestamp::now(),
            logs: None,
            usage: None,
            ssm: None,
            api,
            identity,
            config,
            lookups,
            terminations,
        }
    }

    /// How long an instance EC2 launched may take to show up by tag: a fleet token used by a
    /// forgotten request is given this long before the next token is taken.
    pub fn with_visibility_grace(mut self, grace: Duration) -> AwsProvider {
        self.visibility_grace = grace;
        self
    }

    /// Reads the pods' usage from CloudWatch (`provider.aws.metrics`), where the instances
    /// publish it.
    pub fn with_usage(
        mut self,
        api: Arc<dyn CloudWatchApi>,
        metrics: &PodMetricsConfig,
    ) -> AwsProvider {
        self.usage = Some(UsageReader {
            api,
            namespace: metrics.namespace.clone(),
            period_seconds: metrics.interval_seconds(),
        });
        self
    }

    /// Runs `kubectl exec`'s commands through Systems Manager (`provider.aws.exec`).
    pub fn with_exec(mut self, api: Arc<dyn SsmApi>) -> AwsProvider {
        self.ssm = Some(api);
        self
    }

    /// Reads containers' output from CloudWatch Logs (`provider.aws.logs`) rather than the
    /// console, once a container's stream exists.
    pub fn with_logs(mut self, api: Arc<dyn LogsApi>, group: &str) -> AwsProvider {
        self.logs = Some(ShippedLogs {
            api,
            group: group.to_owned(),
        });
        self
    }

    /// A page of the console: the boot log while the workload has not started, then the
    /// container's lines as the bootstrap echoes them (the last 64 KiB EC2 keeps).
    async fn console_page(
        &self,
        pod: &PodKey,
        container: &str,
        start: &LogStart,
    ) -> Result<LogPage, ProviderError> {
        let instance = self.newest_instance(pod).await?.ok_or_else(|| {
            ProviderError::permanent("InstanceNotFound", format!("pod {pod} has no instance"))
        })?;
        let console = self
            .api
            .console_output(&instance.instance_id)
            .await
            .map_err(provider_error)?
            .unwrap_or_default();
        let lines = workload::console::boot_lines(&console, instance.launch_time)
            .unwrap_or_else(|| workload::console::container_lines(&console, Some(container)))
            .into_iter()
            .map(LogLine::from)
            .collect();
        Ok(LogPage::of_whole(lines, start))
    }

    /// The pod's AMI (its annotation, validated when the request was built), else the
    /// configured default.
    fn image_for(&self, request: &LaunchRequest) -> Result<String, ProviderError> {
        match &request.machine_image {
            Some(ami) => Ok(ami.clone()),
            None => self.config.default_ami.clone().ok_or_else(|| {
                ProviderError::invalid_annotation(format!(
                    "no {AMI_ANNOTATION} annotation and no provider.aws.defaultAmi"
                ))
            }),
        }
    }

    /// Where the pod may launch: the configured subnets (or the default subnet) in the zones
    /// it admits. A pod that admits none of them fails before anything is launched.
    async fn places(&self, constraint: &ZoneConstraint) -> Result<Vec<Place>, ProviderError> {
        let subnets = &self.config.subnet_ids;
        if !constraint.is_constrained() {
            return Ok(if subnets.is_empty() {
                vec![Place::default()]
            } else {
                subnets
                    .iter()
                    .map(|subnet| Place {
                        subnet_id: Some(subnet.clone()),
                        zone: None,
                    })
                    .collect()
            });
        }
        let (places, offered): (Vec<Place>, Vec<String>) = if subnets.is_empty() {
            // No subnets configured: each zone the pod names, in its default subnet.
            let named = constraint.named_zones();
            let places = named
                .iter()
                .filter(|zone| constraint.admits(zone))
                .map(|zone| Place {
                    subnet_id: None,
                    zone: Some(zone.clone()),
                })
                .collect();
            (
                places,
                vec!["the default subnet of any zone the pod names by value".into()],
            )
        } else {
            let zones = self.configured_subnet_zones().await?;
            let places = subnets
                .iter()
                .filter_map(|subnet| {
                    let zone = zones.get(subnet)?;
                    constraint.admits(zone).then(|| Place {
                        subnet_id: Some(subnet.clone()),
                        zone: Some(zone.clone()),
                    })
                })
                .collect();
            let offered = subnets
                .iter()
                .map(|subnet| match zones.get(subnet) {
                    Some(zone) => format!("{subnet} ({zone})"),
                    None => format!("{subnet} (not found)"),
                })
                .collect();
            (places, offered)
        };
        if places.is_empty() {
            return Err(ProviderError::permanent(
                "NoSubnetInZone",
                format!(
                    "the pod admits zones {}; orca launches into {}",
                    constraint.describe(),
                    offered.join(", ")
                ),
            ));
        }
        Ok(places)
    }

    /// The configured subnets' zones, read once.
    async fn configured_subnet_zones(&self) -> Result<&HashMap<String, String>, ProviderError> {
        self.subnet_zones
            .get_or_try_init(|| self.api.subnet_zones(&self.config.subnet_ids))
            .await
            .map_err(provider_error)
    }

    /// One of `places` for the pod: stable per pod, so retries of the walk land in the same
    /// one.
    fn place_for(pod: &PodKey, places: &[Place]) -> Place {
        let digest = Sha256::digest(pod.uid.as_bytes());
        let index = usize::from(digest[0]) << 8 | usize::from(digest[1]);
        places
            .get(index % places.len().max(1))
            .cloned()
            .unwrap_or_default()
    }

    fn run_request(
        &self,
        key: &PodKey,
        plan: &LaunchPlan,
        offering: &Offering,
        place: &Place,
        image_id: &str,
        user_data: &str,
    ) -> RunRequest {
        let volume = &self.config.root_volume;
        RunRequest {
            client_token: token::client_token(&key.uid),
            instance_type: offering.instance_type.clone(),
            market: offering.market,
            max_price: match offering.market {
                Market::Spot => plan.market.max_price,
                Market::OnDemand => None,
            },
            image_id: image_id.to_owned(),
            subnet_id: place.subnet_id.clone(),
            // A subnet names its zone; without one, the pod's zone picks its default subnet.
            zone: match place.subnet_id {
                Some(_) => None,
                None => place.zone.clone(),
            },
            security_group_ids: self.config.security_group_ids.clone(),
            instance_profile: self.config.instance_profile.clone(),
            key_name: self.config.key_name.clone(),
            root_volume: Some(RootVolume {
                device_name: volume.device_name.clone(),
                size_gib: volume.size_gib,
                volume_type: volume.volume_type.clone(),
                encrypted: volume.encrypted,
                delete_on_termination: true,
            }),
            user_data: user_data.to_owned(),
            tags: self.launch_tags(plan),
        }
    }

    /// The tags of a launch: the plan's (the ownership tags among them) and the cluster's id,
    /// set here, beside the filter every listing uses, so no instance is ever launched
    /// without what finds it again.
    fn launch_tags(&self, plan: &LaunchPlan) -> std::collections::BTreeMap<String, String> {
        let mut tags = plan.tags.clone();
        tags.insert(TAG_CLUSTER_ID.to_owned(), self.identity.cluster_id.clone());
        tags
    }

    /// One `RunInstances` for one offering: the instance, or why not. A capacity refusal
    /// is remembered, so the next pods skip the offering for a while.
    async fn run_offering(
        &self,
        key: &PodKey,
        offering: &Offering,
        request: &RunRequest,
    ) -> Result<Ec2Instance, LaunchFailed> {
        let error = match self.api.run_instance(request).await {
            Ok(instance) => return Ok(instance),
            Err(error) => error,
        };
        // No answer, or a server error: EC2 may have launched it all the same. A token EC2
        // already answered with other parameters: it did.
        let in_doubt = error.kind == api::ApiErrorKind::Transport
            || error.status.is_some_and(|status| status >= 500)
            || error.code == "IdempotentParameterMismatch";
        let error = launch_error(error, &request.client_token);
        if error.class == super::ErrorClass::Capacity {
            tracing::info!(pod = %key, %offering, %error, "offering unavailable");
            self.unavailable
                .mark(offering, request.subnet_id.as_deref(), &error);
        }
        Err(LaunchFailed {
            error,
            passed_over: Vec::new(),
            in_doubt,
            progress: None,
        })
    }

    /// The pod's newest instance in any state, for logs.
    async fn newest_instance(&self, pod: &PodKey) -> Result<Option<Ec2Instance>, ProviderError> {
        let mut filters = self.identity_filters();
        filters.push(Filter::tag(TAG_POD_UID, pod.uid.clone()));
        let found = self
            .api
            .describe_instances(&filters)
            .await
            .map_err(provider_error)?;
        Ok(found.into_iter().max_by_key(|i| i.launch_time))
    }

    /// Launches (or adopts) the pod's instance; [`Provider::create`] adds its volumes.
    async fn launch_instance(&self, request: &LaunchRequest) -> Result<Launched, LaunchFailed> {
        let image_id = self.image_for(request)?;
        let all = offerings(&request.plan);
        let Some((last, earlier)) = all.split_last() else {
            return Err(ProviderError::permanent(
                "NoInstanceType",
                "the launch plan has no instance type",
            )
            .into());
        };
        if let Some(existing) = self.adopt_existing(&request.pod).await? {
            return Ok(existing);
        }
        let attachments = workload::attachments(&request.workload)
            .map_err(|error| ProviderError::permanent("UnsupportedPodSpec", error.to_string()))?;
        let zones = self.volume_zones(&request.zones, &attachments).await?;
        // The volumes to attach travel as the instance's tags, so whoever serves the pod
        // attaches them from a listing.
        let tagged;
        let request = if attachments.is_empty() {
            request
        } else {
            let mut copy = request.clone();
            copy.plan
                .tags
                .extend(attachments.iter().map(workload::Attachment::tag));
            tagged = copy;
            &tagged
        };
        let shipping = (self.config.logs.as_ref())
            .map(|logs| workload::LogShipping::of(logs, &request.pod.uid));
        let publishing = (self.config.metrics.as_ref())
            .map(|metrics| workload::MetricPublishing::of(metrics, &request.pod.uid));
        let options = workload::UserDataOptions {
            shipping: shipping.as_ref(),
            publishing: publishing.as_ref(),
            instance_store: self.config.instance_store_policy,
        };
        let user_data = workload::user_data(&request.workload, &options)
            .map_err(|error| ProviderError::permanent("UnsupportedPodSpec", error.to_string()))?;
        let places = self.places(&zones).await?;
        if self.config.launch_api == LaunchApi::Fleet {
            return self
                .launch_by_fleet(request, &places, &image_id, &user_data)
                .await;
        }
        self.launch_by_run_instances(request, (earlier, last), &places, &image_id, &user_data)
            .await
    }

    fn identity_filters(&self) -> Vec<Filter> {
        identity_filters(&self.identity)
    }
}

fn identity_filters(identity: &Identity) -> Vec<Filter> {
    vec![
        Filter::tag(TAG_MANAGED_BY, MANAGED_BY_VALUE),
        Filter::tag(TAG_NODE, identity.node.clone()),
        Filter::tag(TAG_CLUSTER_ID, identity.cluster_id.clone()),
    ]
}

/// The live instance of each pod in `uids`, in one `DescribeInstances`.
async fn live_instances_of(
    api: &dyn Ec2Api,
    identity: &Identity,
    uids: Vec<String>,
) -> Result<HashMap<String, Ec2Instance>, api::ApiError> {
    let mut filters = identity_filters(identity);
    filters.push(Filter::new(format!("tag:{TAG_POD_UID}"), uids));
    filters.push(Filter::new(
        "instance-state-name",
        LIVE_STATES.map(str::to_owned),
    ));
    let mut found: HashMap<String, Ec2Instance> = HashMap::new();
    for instance in api.describe_instances(&filters).await? {
        let Some(uid) = instance.tags.get(TAG_POD_UID).cloned() else {
            continue;
        };
        // Of two live instances for one pod, the oldest is its own (a look-alike is newer),
        // as the pod controller decides (`pods::instances`).
        let keep = found.get(&uid).is_none_or(|kept| {
            (
                instance.launch_time,
                std::cmp::Reverse(&instance.instance_id),
            ) < (kept.launch_time, std::cmp::Reverse(&kept.instance_id))
        });
        if keep {
            found.insert(uid, instance);
        }
    }
    Ok(found)
}

/// Terminates one batch of instances in one `TerminateInstances`. EC2 refuses a whole call
/// for one id it will not terminate (unknown, protected, in the wrong state), and with
/// termination protection even terminates some of the others (those in other Availability
/// Zones) behind the error, so after such a refusal each id is asked alone: every instance gets
/// its own answer, and asking again is harmless. A refusal of the call itself (throttling,
/// credentials) is every instance's answer.
async fn terminate_batch(
    api: &dyn Ec2Api,
    ids: Vec<String>,
) -> Result<HashMap<String, TerminationAnswer>, api::ApiError> {
    match api.terminate_instances(&ids).await {
        Ok(_) => Ok(ids
            .into_iter()
            .map(|id| (id, Ok(Termination::Requested)))
            .collect()),
        Err(error) if ids.len() == 1 => Ok(ids
            .into_iter()
            .map(|id| (id, answer_of_one(error.clone())))
            .collect()),
        Err(error) if is_refusal_of_one_instance(&error) => {
            let mut answers = HashMap::with_capacity(ids.len());
            for id in ids {
                let answer = match api.terminate_instances(std::slice::from_ref(&id)).await {
                    Ok(_) => Ok(Termination::Requested),
                    Err(error) => answer_of_one(error),
                };
                answers.insert(id, answer);
            }
            Ok(answers)
        }
        Err(error) => Err(error),
    }
}

/// A single-id `TerminateInstances` refused with `error`.
fn answer_of_one(error: api::ApiError) -> TerminationAnswer {
    if is_not_found(&error) {
        Ok(Termination::Unknown)
    } else {
        Err(error)
    }
}

impl AwsProvider {
    /// The instance launched for this pod before (a retry, a restart), if EC2 lists one by
    /// the pod's tags: it is the pod's instance.
    async fn adopt_existing(&self, key: &PodKey) -> Result<Option<Launched>, ProviderError> {
        let Some(existing) = self
            .lookups
            .call(key.uid.clone())
            .await
            .map_err(provider_error)?
        else {
            return Ok(None);
        };
        Ok(Some(Launched {
            offering: Offering {
                instance_type: existing.instance_type.clone(),
                market: existing.market(),
            },
            zone: existing.zone.clone(),
            instance_id: existing.instance_id,
            adopted: true,
            passed_over: Vec::new(),
            chosen_by: None,
            volumes: Vec::new(),
        }))
    }

    /// Launches the pod's instance by `RunInstances`, one offering at a time in the plan's
    /// order, in the pod's one place: the `earlier` ones while they answer with a capacity
    /// error (or the unavailable-offering cache says they would), then the `last`.
    async fn launch_by_run_instances(
        &self,
        request: &LaunchRequest,
        (earlier, last): (&[Offering], &Offering),
        places: &[Place],
        image_id: &str,
        user_data: &str,
    ) -> Result<Launched, LaunchFailed> {
        let (key, plan) = (&request.pod, &request.plan);
        let place = Self::place_for(key, places);
        let request_for = |offering: &Offering| {
            self.run_request(key, plan, offering, &place, image_id, user_data)
        };
        let launched = |offering: &Offering, instance: Ec2Instance, passed_over| Launched {
            instance_id: instance.instance_id,
            offering: offering.clone(),
            adopted: false,
            passed_over,
            chosen_by: None,
            zone: instance.zone.or_else(|| place.zone.clone()),
            volumes: Vec::new(),
        };

        let mut passed_over = Vec::new();
        for offering in earlier {
            let error = match self.unavailable.check(offering, place.subnet_id.as_deref()) {
                Some(error) => error,
                None => match self
                    .run_offering(key, offering, &request_for(offering))
                    .await
                {
                    Ok(instance) => return Ok(launched(offering, instance, passed_over)),
                    Err(failure) if failure.error.class == super::ErrorClass::Capacity => {
                        failure.error
                    }
                    Err(failure) => {
                        return Err(LaunchFailed {
                            passed_over,
                            ..failure
                        });
                    }
                },
            };
            passed_over.push(PassedOver {
                offering: offering.clone(),
                error,
            });
        }
        // The cache never skips the last offering: only EC2's answer to the pod's own token
        // tells that no instance was launched for it before (an answer lost, a restart), so a
        // pod never fails on other pods' answers. It also tells when capacity came back.
        match self.run_offering(key, last, &request_for(last)).await {
            Ok(instance) => Ok(launched(last, instance, passed_over)),
            Err(failure) => {
                if failure.error.class == super::ErrorClass::Capacity {
                    passed_over.push(PassedOver {
                        offering: last.clone(),
                        error: failure.error.clone(),
                    });
                }
                Err(LaunchFailed {
                    passed_over,
                    ..failure
                })
            }
        }
    }
}

#[async_trait]
impl Provider for AwsProvider {
    async fn create(&self, request: &LaunchRequest) -> Result<Launched, LaunchFailed> {
        let attachments = workload::attachments(&request.workload)
            .map_err(|error| ProviderError::permanent("UnsupportedPodSpec", error.to_string()))?;
        let mut launched = self.launch_instance(request).await?;
        launched.volumes = attachments
            .iter()
            .map(|attachment| VolumeAttachment {
                volume_id: attachment.volume_id.clone(),
                device: attachment.device(),
                attached: false,
            })
            .collect();
        Ok(launched)
    }

    async fn terminate(&self, instance_id: &str) -> Result<Termination, ProviderError> {
        match self.terminations.call(instance_id.to_owned()).await {
            Ok(Some(answer)) => answer.map_err(provider_error),
            // The batch answered every id it was given.
            Ok(None) => Err(ProviderError::transient(
                "TerminationUnanswered",
                format!("the termination batch gave no answer for {instance_id}"),
            )),
            Err(error) => Err(provider_error(error)),
        }
    }

    async fn lookup(
        &self,
        pod: &PodKey,
        instance_id: &str,
    ) -> Result<Option<InstanceStatus>, ProviderError> {
        // By id alone: the ownership tags may not show yet. A filter, not InstanceIds: an id
        // EC2 does not know yet is an empty answer, not an error.
        let filters = [Filter::new("instance-id", [instance_id.to_owned()])];
        let found = self
            .api
            .describe_instances(&filters)
            .await
            .map_err(provider_error)?;
        Ok(found
            .iter()
            .find(|instance| instance.instance_id == instance_id)
            .map(|instance| status::status_of_pod(instance, pod)))
    }

    async fn workload_exit(
        &self,
        instance: &InstanceStatus,
    ) -> Result<Option<WorkloadExit>, ProviderError> {
        let console = self
            .api
            .console_output(&instance.instance_id)
            .await
            .or_else(|error| {
                // Gone from EC2 already: only the tag can tell.
                if is_not_found(&error) {
                    Ok(None)
                } else {
                    Err(provider_error(error))
                }
            })?
            .unwrap_or_default();
        Ok(status::exit_from_console(&console, instance))
    }

    async fn statuses(&self) -> Result<Vec<InstanceStatus>, ProviderError> {
        let instances = self
            .api
            .describe_instances(&self.identity_filters())
            .await
            .map_err(provider_error)?;
        Ok(status::statuses(&instances))
    }

    async fn log_page(
        &self,
        pod: &PodKey,
        container: &str,
        start: &LogStart,
    ) -> Result<LogPage, ProviderError> {
        if let Some(shipped) = &self.logs {
            let stream = StreamLog {
                api: shipped.api.clone(),
                group: shipped.group.clone(),
                stream: workload::log_stream(&pod.uid, container),
            };
            match stream.page(start).await {
                Ok(page) => return Ok(page),
                // Not written yet: the container has not run, so the console explains.
                Err(LogsError::NotFound(_))
                    if !matches!(start, LogStart::After(LogCursor::Token { .. })) => {}
                Err(error) => return Err(logs_provider_error(&error)),
            }
        }
        self.console_page(pod, container, start).await
    }

    async fn usage(&self, pods: &[UsageQuery]) -> Result<Vec<PodUsage>, ProviderError> {
        let Some(reader) = &self.usage else {
            return Ok(Vec::new());
        };
        reader
            .read(pods, Timestamp::now())
            .await
            .map_err(|error| match error.transient {
                true => ProviderError::transient(error.code.clone(), error.message.clone()),
                false => ProviderError::permanent(error.code.clone(), error.message.clone()),
            })
    }

    async fn attach(&self, instance: &InstanceStatus) -> Result<Vec<Attached>, ProviderError> {
        self.attach_volumes(instance).await
    }

    async fn exec(
        &self,
        pod: &PodKey,
        request: &ExecRequest,
    ) -> Result<ExecOutcome, ProviderError> {
        let Some(ssm) = &self.ssm else {
            return Err(ProviderError::permanent(
                "ExecDisabled",
                "exec is turned off on this node (provider.aws.exec.enabled: false)",
            ));
        };
        let instance = self.newest_instance(pod).await?.ok_or_else(|| {
            ProviderError::permanent("InstanceNotFound", format!("pod {pod} has no instance yet"))
        })?;
        if instance.state != InstanceState::Running {
            return Err(ProviderError::permanent(
                "InstanceNotRunning",
                format!(
                    "pod {pod}'s instance {} is {:?}, not running",
                    instance.instance_id, instance.state
                ),
            ));
        }
        exec::run(
            ssm.clone(),
            &instance.instance_id,
            request,
            self.config.exec.timeout.get(),
        )
        .await
    }

    async fn ping(&self) -> Result<(), ProviderError> {
        self.api.ping().await.map_err(provider_error)
    }

    fn retain_pods(&self, present: &std::collections::HashSet<String>) {
        self.fleets.retain(present);
    }

    async fn claim_untagged(
        &self,
        present: &std::collections::HashSet<String>,
    ) -> Result<Claimed, ProviderError> {
        // What identified this node's instances before they carried the cluster's id.
        let filters = [
            Filter::tag(TAG_MANAGED_BY, MANAGED_BY_VALUE),
            Filter::tag(TAG_NODE, self.identity.node.clone()),
            Filter::tag(TAG_CLUSTER, self.identity.cluster.clone()),
            Filter::new("instance-state-name", LIVE_STATES.map(str::to_owned)),
        ];
        let listed = self
            .api
            .describe_instances(&filters)
            .await
            .map_err(provider_error)?;
        let decided = claims(&listed, present);
        let tags = std::collections::BTreeMap::from([(
            TAG_CLUSTER_ID.to_owned(),
            self.identity.cluster_id.clone(),
        )]);
        for ids in decided.claimed.chunks(MAX_TAGGED) {
            self.api
                .create_tags(ids, &tags)
                .await
                .map_err(provider_error)?;
        }
        Ok(decided)
    }
}

/// Which of `listed` (instances under this node's names) to claim for this cluster: those
/// without any cluster id whose pod is in `present`. One with a cluster id is claimed already,
/// by this cluster or another; one whose pod is not here is left alone.
fn claims(listed: &[Ec2Instance], present: &std::collections::HashSet<String>) -> Claimed {
    let mut decided = Claimed::default();
    for instance in listed {
        if instance.tags.contains_key(TAG_CLUSTER_ID) {
            continue;
        }
        let ours = instance
            .tags
            .get(TAG_POD_UID)
            .is_some_and(|uid| present.contains(uid));
        let list = if ours {
            &mut decided.claimed
        } else {
            &mut decided.unclaimed
        };
        list.push(instance.instance_id.clone());
    }
    decided
}

/// A launch error in the pod's words. A token EC2 already answered means the pod's instance
/// exists: launched by an earlier attempt (whose answer was lost) with other parameters, or
/// already terminated.
fn launch_error(error: api::ApiError, client_token: &str) -> ProviderError {
    match error.code.as_str() {
        "IdempotentParameterMismatch" => ProviderError::transient(
            error.code,
            format!(
                "an instance was already launched for this pod with other parameters \
                 (ClientToken {client_token}); waiting for EC2 to list it"
            ),
        ),
        "IdempotentInstanceTerminated" => ProviderError::already_ended(
            error.code,
            format!(
                "the instance launched for this pod (ClientToken {client_token}) has already \
                 terminated"
            ),
        ),
        _ => ProviderError {
            class: class_of(&error),
            code: error.code,
            message: error.message,
        },
    }
}
