//! [`Ec2Api`] over aws-sdk-ec2: credentials from aws-config's default chain (environment,
//! profile, IRSA web identity, instance role), the SDK's standard retries for throttling and
//! 5xx answers, and per-call timeouts so a hung endpoint cannot stall a reconcile.

pub(super) mod error;
pub(super) mod tags;

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use aws_sdk_ec2::Client;
use aws_sdk_ec2::operation::run_instances::builders::RunInstancesFluentBuilder;
use aws_sdk_ec2::types::{
    self as ec2, BlockDeviceMapping, EbsBlockDevice, HttpTokensState,
    IamInstanceProfileSpecification, InstanceInterruptionBehavior, InstanceMarketOptionsRequest,
    InstanceMetadataEndpointState, InstanceMetadataOptionsRequest, MarketType, Placement,
    ResourceType, ShutdownBehavior, SpotInstanceType, SpotMarketOptions,
};
use base64::Engine as _;
use jiff::Timestamp;

use super::api::{
    ApiError, Ec2Api, Ec2Instance, Ec2Volume, Filter, FleetAnswer, FleetRequest, InstanceTypeInfo,
    LaunchTemplateRef, LaunchTemplateSpec, LaunchTemplateVersion, RunRequest, SpotHistoryQuery,
    SpotPriceChange, VolumeState,
};
use super::calls::{CountRequests, Ec2Calls};
use super::{sdk_fleet, sdk_template};
use crate::provider::plan::Market;
use crate::provider::{InstanceState, StateReason};
use crate::support::aws_config::{ClientSettings, load_for};
use error::api_error;

/// Attempts per call, the first included; the SDK backs off between them.
const MAX_ATTEMPTS: u32 = 4;
const CALL_TIMEOUT: Duration = Duration::from_secs(30);
const ATTEMPT_TIMEOUT: Duration = Duration::from_secs(10);

pub struct SdkEc2 {
    client: Client,
}

impl SdkEc2 {
    /// A client for `region`, optionally at another endpoint (moto, LocalStack, a VPC
    /// endpoint).
    /// Every HTTP request is counted in `calls`.
    pub async fn connect(region: &str, endpoint_url: Option<&str>, calls: Arc<Ec2Calls>) -> SdkEc2 {
        Self::connect_with_timeouts(region, endpoint_url, calls, ATTEMPT_TIMEOUT, CALL_TIMEOUT)
            .await
    }

    /// [`Self::connect`] with other timeouts: for endpoints far slower than EC2 (moto takes
    /// about 10 s to filter a describe of 1000 instances, EC2 about 1 s).
    pub async fn connect_with_timeouts(
        region: &str,
        endpoint_url: Option<&str>,
        calls: Arc<Ec2Calls>,
        attempt_timeout: std::time::Duration,
        call_timeout: std::time::Duration,
    ) -> SdkEc2 {
        let settings = ClientSettings {
            max_attempts: MAX_ATTEMPTS,
            attempt_timeout,
            call_timeout,
        };
        let mut config = aws_sdk_ec2::config::Builder::from(&load_for(region, &settings).await)
            .interceptor(CountRequests(calls));
        if let Some(url) = endpoint_url {
            config = config.endpoint_url(url);
        }
        SdkEc2 {
            client: Client::from_conf(config.build()),
        }
    }
}

/// The request's security groups, instance profile (by ARN or by name) and root volume, for
/// those it names.
fn with_instance_options(
    mut call: RunInstancesFluentBuilder,
    request: &RunRequest,
) -> RunInstancesFluentBuilder {
    if !request.security_group_ids.is_empty() {
        call = call.set_security_group_ids(Some(request.security_group_ids.clone()));
    }
    if let Some(profile) = &request.instance_profile {
        let spec = IamInstanceProfileSpecification::builder();
        call = call.iam_instance_profile(if profile.starts_with("arn:") {
            spec.arn(profile).build()
        } else {
            spec.name(profile).build()
        });
    }
    if let Some(volume) = &request.root_volume {
        call = call.block_device_mappings(
            BlockDeviceMapping::builder()
                .device_name(&volume.device_name)
                .ebs(
                    EbsBlockDevice::builder()
                        .volume_size(i32::try_from(volume.size_gib).unwrap_or(i32::MAX))
                        .volume_type(ec2::VolumeType::from(volume.volume_type.as_str()))
                        .encrypted(volume.encrypted)
                        .delete_on_termination(volume.delete_on_termination)
                        .build(),
                )
                .build(),
        );
    }
    call
}

/// A one-time spot request, terminated on interruption, at the request's price cap; `None`
/// on demand.
fn spot_market_options(request: &RunRequest) -> Option<InstanceMarketOptionsRequest> {
    if request.market != Market::Spot {
        return None;
    }
    let mut spot = SpotMarketOptions::builder()
        .spot_instance_type(SpotInstanceType::OneTime)
        .instance_interruption_behavior(InstanceInterruptionBehavior::Terminate);
    if let Some(price) = request.max_price {
        spot = spot.max_price(format!("{price}"));
    }
    Some(
        InstanceMarketOptionsRequest::builder()
            .market_type(MarketType::Spot)
            .spot_options(spot.build())
            .build(),
    )
}

#[async_trait]
impl Ec2Api for SdkEc2 {
    /// Launches one instance for the request: it and its volumes tagged, IMDSv2 required,
    /// terminated when it powers off.
    async fn run_instance(&self, request: &RunRequest) -> Result<Ec2Instance, ApiError> {
        let tags = tags::ec2_tags(&request.tags);
        let tag_spec = |resource| tags::tag_specification(resource, tags.clone());
        let mut call = self
            .client
            .run_instances()
            .client_token(&request.client_token)
            .instance_type(ec2::InstanceType::from(request.instance_type.as_str()))
            .image_id(&request.image_id)
            .min_count(1)
            .max_count(1)
            .set_subnet_id(request.subnet_id.clone())
            .set_placement(
                request
                    .zone
                    .as_ref()
                    .map(|zone| Placement::builder().availability_zone(zone).build()),
            )
            .set_key_name(request.key_name.clone())
            .user_data(base64::engine::general_purpose::STANDARD.encode(&request.user_data))
            // The bootstrap powers off when the workload ends: that ends the instance.
            .instance_initiated_shutdown_behavior(ShutdownBehavior::Terminate)
            .metadata_options(
                InstanceMetadataOptionsRequest::builder()
                    .http_tokens(HttpTokensState::Required)
                    .http_endpoint(InstanceMetadataEndpointState::Enabled)
                    .http_put_response_hop_limit(1)
                    .build(),
            )
            .tag_specifications(tag_spec(ResourceType::Instance))
            .tag_specifications(tag_spec(ResourceType::Volume));
        call = with_instance_options(call, request);
        if let Some(options) = spot_market_options(request) {
            call = call.instance_market_options(options);
        }
        let output = call.send().await.map_err(api_error)?;
        output
            .instances()
            .first()
            .map(instance)
            .ok_or_else(|| ApiError::transport("RunInstances answered without an instance"))
    }

    async fn create_launch_template(
        &self,
        spec: &LaunchTemplateSpec,
    ) -> Result<LaunchTemplateRef, ApiError> {
        sdk_template::create_launch_template(&self.client, spec).await
    }

    async fn describe_launch_template_versions(
        &self,
        name: &str,
    ) -> Result<Vec<LaunchTemplateVersion>, ApiError> {
        sdk_template::describe_launch_template_versions(&self.client, name).await
    }

    async fn create_fleet(&self, request: &FleetRequest) -> Result<FleetAnswer, ApiError> {
        sdk_fleet::create_fleet(&self.client, request).await
    }

    async fn subnet_zones(
        &self,
        subnet_ids: &[String],
    ) -> Result<HashMap<String, String>, ApiError> {
        let output = self
            .client
            .describe_subnets()
            .set_subnet_ids(Some(subnet_ids.to_vec()))
            .send()
            .await
            .map_err(api_error)?;
        Ok(output
            .subnets()
            .iter()
            .filter_map(|subnet| {
                Some((
                    subnet.subnet_id()?.to_owned(),
                    subnet.availability_zone()?.to_owned(),
                ))
            })
            .collect())
    }

    async fn describe_volumes(&self, volume_ids: &[String]) -> Result<Vec<Ec2Volume>, ApiError> {
        let filter = ec2::Filter::builder()
            .name("volume-id")
            .set_values(Some(volume_ids.to_vec()))
            .build();
        let mut pages = self
            .client
            .describe_volumes()
            .filters(filter)
            .into_paginator()
            .send();
        let mut volumes = Vec::new();
        while let Some(page) = pages.next().await {
            let page = page.map_err(api_error)?;
            volumes.extend(page.volumes().iter().filter_map(volume));
        }
        Ok(volumes)
    }

    async fn attach_volume(
        &self,
        volume_id: &str,
        instance_id: &str,
        device: &str,
    ) -> Result<(), ApiError> {
        self.client
            .attach_volume()
            .volume_id(volume_id)
            .instance_id(instance_id)
            .device(device)
            .send()
            .await
            .map(|_| ())
            .map_err(api_error)
    }

    async fn describe_instances(&self, filters: &[Filter]) -> Result<Vec<Ec2Instance>, ApiError> {
        let filters: Vec<ec2::Filter> = filters
            .iter()
            .map(|f| {
                ec2::Filter::builder()
                    .name(&f.name)
                    .set_values(Some(f.values.clone()))
                    .build()
            })
            .collect();
        let mut pages = self
            .client
            .describe_instances()
            .set_filters(Some(filters))
            .max_results(1000)
            .into_paginator()
            .send();
        let mut found = Vec::new();
        while let Some(page) = pages.next().await {
            let page = page.map_err(api_error)?;
            for reservation in page.reservations() {
                found.extend(reservation.instances().iter().map(instance));
            }
        }
        Ok(found)
    }

    async fn terminate_instances(&self, instance_ids: &[String]) -> Result<Vec<String>, ApiError> {
        let output = self
            .client
            .terminate_instances()
            .set_instance_ids(Some(instance_ids.to_vec()))
            .send()
            .await
            .map_err(api_error)?;
        Ok(output
            .terminating_instances()
            .iter()
            .filter_map(|change| change.instance_id().map(str::to_owned))
            .collect())
    }

    async fn create_tags(
        &self,
        instance_ids: &[String],
        tags: &BTreeMap<String, String>,
    ) -> Result<(), ApiError> {
        self.client
            .create_tags()
            .set_resources(Some(instance_ids.to_vec()))
            .set_tags(Some(tags::ec2_tags(tags)))
            .send()
            .await
            .map_err(api_error)?;
        Ok(())
    }

    async fn console_output(&self, instance_id: &str) -> Result<Option<String>, ApiError> {
        let output = self
            .client
            .get_console_output()
            .instance_id(instance_id)
            .latest(true)
            .send()
            .await
            .map_err(api_error)?;
        let Some(encoded) = output.output() else {
            return Ok(None);
        };
        let bytes = base64::engine::general_purpose::STANDARD
            .decode(encoded.trim())
            .map_err(|error| {
                ApiError::transport(format!("console output is not base64: {error}"))
            })?;
        Ok(Some(String::from_utf8_lossy(&bytes).into_owned()))
    }

    async fn describe_instance_types(&self) -> Result<Vec<InstanceTypeInfo>, ApiError> {
        let mut pages = self
            .client
            .describe_instance_types()
            .max_results(100)
            .into_paginator()
            .send();
        let mut types = Vec::new();
        while let Some(page) = pages.next().await {
            let page = page.map_err(api_error)?;
            types.extend(page.instance_types().iter().filter_map(instance_type_info));
        }
        Ok(types)
    }

    async fn spot_prices(&self) -> Result<HashMap<String, f64>, ApiError> {
        // With a start time of now, EC2 answers the current price per type and zone.
        let mut pages = self
            .client
            .describe_spot_price_history()
            .product_descriptions("Linux/UNIX")
            .start_time(aws_sdk_ec2::primitives::DateTime::from_secs(
                Timestamp::now().as_second(),
            ))
            .max_results(1000)
            .into_paginator()
            .send();
        let mut prices: HashMap<String, f64> = HashMap::new();
        while let Some(page) = pages.next().await {
            let page = page.map_err(api_error)?;
            for entry in page.spot_price_history() {
                let (Some(kind), Some(price)) = (
                    entry.instance_type(),
                    entry.spot_price().and_then(|p| p.parse::<f64>().ok()),
                ) else {
                    continue;
                };
                let lowest = prices.entry(kind.as_str().to_owned()).or_insert(price);
                *lowest = lowest.min(price);
            }
        }
        Ok(prices)
    }

    async fn spot_price_history(
        &self,
        query: &SpotHistoryQuery,
    ) -> Result<Vec<SpotPriceChange>, ApiError> {
        let mut request = self
            .client
            .describe_spot_price_history()
            .product_descriptions("Linux/UNIX")
            .start_time(aws_sdk_ec2::primitives::DateTime::from_secs(
                query.since.as_second(),
            ))
            .max_results(1000);
        for instance_type in &query.instance_types {
            request = request.instance_types(ec2::InstanceType::from(instance_type.as_str()));
        }
        if !query.zones.is_empty() {
            request = request.filters(
                ec2::Filter::builder()
                    .name("availability-zone")
                    .set_values(Some(query.zones.clone()))
                    .build(),
            );
        }
        let mut pages = request.into_paginator().send();
        let mut changes = Vec::new();
        while let Some(page) = pages.next().await {
            let page = page.map_err(api_error)?;
            changes.extend(
                page.spot_price_history()
                    .iter()
                    .filter_map(spot_price_change),
            );
        }
        Ok(changes)
    }

    async fn instance_type_zones(&self) -> Result<HashMap<String, Vec<String>>, ApiError> {
        let mut pages = self
            .client
            .describe_instance_type_offerings()
            .location_type(aws_sdk_ec2::types::LocationType::AvailabilityZone)
            .max_results(1000)
            .into_paginator()
            .send();
        let mut zones: HashMap<String, Vec<String>> = HashMap::new();
        while let Some(page) = pages.next().await {
            let page = page.map_err(api_error)?;
            for offering in page.instance_type_offerings() {
                let (Some(kind), Some(zone)) = (offering.instance_type(), offering.location())
                else {
                    continue;
                };
                zones
                    .entry(kind.as_str().to_owned())
                    .or_default()
                    .push(zone.to_owned());
            }
        }
        Ok(zones)
    }

    async fn ping(&self) -> Result<(), ApiError> {
        self.client
            .describe_availability_zones()
            .send()
            .await
            .map(|_| ())
            .map_err(api_error)
    }
}

fn instance(raw: &ec2::Instance) -> Ec2Instance {
    Ec2Instance {
        instance_id: raw.instance_id().unwrap_or_default().to_owned(),
        instance_type: raw
            .instance_type()
            .map(|t| t.as_str().to_owned())
            .unwrap_or_default(),
        state: raw
            .state()
            .and_then(|s| s.name())
            .map_or(InstanceState::Pending, state),
        private_ip: raw.private_ip_address().and_then(|ip| ip.parse().ok()),
        launch_time: raw
            .launch_time()
            .and_then(|t| Timestamp::from_second(t.secs()).ok())
            .unwrap_or_else(Timestamp::now),
        spot: raw.instance_lifecycle() == Some(&ec2::InstanceLifecycleType::Spot),
        zone: raw
            .placement()
            .and_then(|placement| placement.availability_zone())
            .map(str::to_owned),
        state_reason: raw.state_reason().and_then(|reason| {
            Some(StateReason {
                code: reason.code()?.to_owned(),
                message: reason.message().unwrap_or_default().to_owned(),
            })
        }),
        tags: raw
            .tags()
            .iter()
            .filter_map(|tag| Some((tag.key()?.to_owned(), tag.value()?.to_owned())))
            .collect::<BTreeMap<_, _>>(),
        volume_ids: raw
            .block_device_mappings()
            .iter()
            .filter_map(|mapping| Some(mapping.ebs()?.volume_id()?.to_owned()))
            .collect(),
        ended_at: raw.state_transition_reason().and_then(transition_time),
    }
}

fn spot_price_change(raw: &ec2::SpotPrice) -> Option<SpotPriceChange> {
    Some(SpotPriceChange {
        instance_type: raw.instance_type()?.as_str().to_owned(),
        zone: raw.availability_zone()?.to_owned(),
        usd_per_hour: raw.spot_price()?.parse().ok()?,
        at: Timestamp::from_second(raw.timestamp()?.secs()).ok()?,
    })
}

/// The time in `User initiated (2026-11-27 22:00:00 GMT)`, EC2's `StateTransitionReason` of
/// a stopped or terminated instance (moto writes `UTC`).
pub fn transition_time(reason: &str) -> Option<Timestamp> {
    let (_, rest) = reason.split_once('(')?;
    let inside = rest.split_once(')')?.0;
    let stamp = inside
        .strip_suffix(" GMT")
        .or_else(|| inside.strip_suffix(" UTC"))?;
    let civil: jiff::civil::DateTime = stamp.parse().ok()?;
    civil
        .to_zoned(jiff::tz::TimeZone::UTC)
        .ok()
        .map(|z| z.timestamp())
}

fn volume(raw: &ec2::Volume) -> Option<Ec2Volume> {
    Some(Ec2Volume {
        volume_id: raw.volume_id()?.to_owned(),
        zone: raw.availability_zone()?.to_owned(),
        state: VolumeState::parse(raw.state()?.as_str())?,
        attached_to: raw
            .attachments()
            .iter()
            .filter(|attachment| attachment.state() != Some(&ec2::VolumeAttachmentState::Detached))
            .filter_map(|attachment| Some(attachment.instance_id()?.to_owned()))
            .collect(),
    })
}

fn state(name: &ec2::InstanceStateName) -> InstanceState {
    match name {
        ec2::InstanceStateName::Running => InstanceState::Running,
        ec2::InstanceStateName::ShuttingDown => InstanceState::ShuttingDown,
        ec2::InstanceStateName::Terminated => InstanceState::Terminated,
        ec2::InstanceStateName::Stopping => InstanceState::Stopping,
        ec2::InstanceStateName::Stopped => InstanceState::Stopped,
        _ => InstanceState::Pending,
    }
}

fn instance_type_info(raw: &ec2::InstanceTypeInfo) -> Option<InstanceTypeInfo> {
    let gpus = raw.gpu_info().map(|info| info.gpus()).unwrap_or_default();
    Some(InstanceTypeInfo {
        name: raw.instance_type()?.as_str().to_owned(),
        vcpus: u32::try_from(raw.v_cpu_info()?.default_v_cpus()?).ok()?,
        memory_mib: u64::try_from(raw.memory_info()?.size_in_mib()?).ok()?,
        gpus: gpus
            .iter()
            .filter_map(|gpu| u32::try_from(gpu.count()?).ok())
            .sum(),
        gpu_model: gpus.first().and_then(|gpu| {
            let name = gpu.name()?;
            Some(match gpu.manufacturer() {
                Some(maker) => format!("{maker} {name}"),
                None => name.to_owned(),
            })
        }),
        architectures: raw
            .processor_info()
            .map(|p| {
                p.supported_architectures()
                    .iter()
                    .map(|a| a.as_str().to_owned())
                    .collect()
            })
            .unwrap_or_default(),
    })
}
