//! The fleet call of [`super::sdk::SdkEc2`]: `CreateFleet` (type `instant`), translated
//! between aws-sdk-ec2 and orca's types (the launch template calls are in `sdk_template.rs`).

use aws_sdk_ec2::Client;
use aws_sdk_ec2::operation::create_fleet::CreateFleetOutput;
use aws_sdk_ec2::operation::create_fleet::builders::CreateFleetFluentBuilder;
use aws_sdk_ec2::types::{
    self as ec2, DefaultTargetCapacityType, FleetLaunchTemplateConfigRequest,
    FleetLaunchTemplateOverridesRequest, FleetLaunchTemplateSpecificationRequest,
    FleetOnDemandAllocationStrategy, FleetType, InstanceLifecycle,
    LaunchTemplateAndOverridesResponse, OnDemandOptionsRequest, ResourceType,
    SpotAllocationStrategy, SpotInstanceInterruptionBehavior, SpotOptionsRequest, TagSpecification,
    TargetCapacitySpecificationRequest,
};
use base64::Engine as _;

use super::api::{
    ApiError, FleetAnswer, FleetError, FleetInstance, FleetRequest, TAG_LAUNCH_ATTEMPT,
};
use super::sdk::error::api_error;
use super::sdk::tags::{ec2_tags, tag_specification};
use crate::provider::plan::{AllocationStrategy, Market};

/// Sends the request as one instant fleet for one instance, and reads EC2's answer.
pub(super) async fn create_fleet(
    client: &Client,
    request: &FleetRequest,
) -> Result<FleetAnswer, ApiError> {
    let capacity_type = match request.market {
        Market::Spot => DefaultTargetCapacityType::Spot,
        Market::OnDemand => DefaultTargetCapacityType::OnDemand,
    };
    let call = client
        .create_fleet()
        .r#type(FleetType::Instant)
        .client_token(&request.client_token)
        .target_capacity_specification(
            TargetCapacitySpecificationRequest::builder()
                .total_target_capacity(1)
                .default_target_capacity_type(capacity_type)
                .build(),
        )
        .launch_template_configs(template_config(request))
        .set_tag_specifications(Some(tag_specifications(request)));
    let output = with_market_options(call, request)
        .send()
        .await
        .map_err(api_error)?;
    Ok(fleet_answer(&output, request))
}

/// The template at its exact version, with the user data, and one override per pool.
fn template_config(request: &FleetRequest) -> FleetLaunchTemplateConfigRequest {
    let max_price = match request.market {
        Market::Spot => request.max_price.map(|price| format!("{price}")),
        Market::OnDemand => None,
    };
    let overrides: Vec<FleetLaunchTemplateOverridesRequest> = request
        .pools
        .iter()
        .map(|pool| {
            FleetLaunchTemplateOverridesRequest::builder()
                .instance_type(ec2::InstanceType::from(pool.instance_type.as_str()))
                .set_subnet_id(pool.subnet_id.clone())
                .set_availability_zone(pool.zone.clone())
                .set_priority(pool.priority)
                .set_max_price(max_price.clone())
                .image_id(&request.image_id)
                .build()
        })
        .collect();
    // The exact version orca made or verified, never `$Latest`/`$Default`, which anyone
    // allowed to add a version could move.
    let template = FleetLaunchTemplateSpecificationRequest::builder()
        .launch_template_id(&request.template.id)
        .version(request.template.version.to_string())
        .launch_template_specification_user_data(
            base64::engine::general_purpose::STANDARD.encode(&request.user_data),
        )
        .build();
    FleetLaunchTemplateConfigRequest::builder()
        .launch_template_specification(template)
        .set_overrides(Some(overrides))
        .build()
}

/// The request's tags on the fleet (with the token's place in the pod's sequence), the
/// instance and its volumes.
fn tag_specifications(request: &FleetRequest) -> Vec<TagSpecification> {
    let tags = ec2_tags(&request.tags);
    let tag_spec = |resource| tag_specification(resource, tags.clone());
    let fleet = {
        let attempt = ec2::Tag::builder()
            .key(TAG_LAUNCH_ATTEMPT)
            .value(request.place.to_string())
            .build();
        let mut fleet_tags = tags.clone();
        fleet_tags.push(attempt);
        tag_specification(ResourceType::Fleet, fleet_tags)
    };
    vec![
        fleet,
        tag_spec(ResourceType::Instance),
        tag_spec(ResourceType::Volume),
    ]
}

/// The market's options on the call: its allocation strategy, and for spot, termination on
/// interruption.
fn with_market_options(
    call: CreateFleetFluentBuilder,
    request: &FleetRequest,
) -> CreateFleetFluentBuilder {
    match request.market {
        Market::Spot => call.spot_options(
            SpotOptionsRequest::builder()
                .allocation_strategy(spot_strategy(request.allocation_strategy))
                .instance_interruption_behavior(SpotInstanceInterruptionBehavior::Terminate)
                .build(),
        ),
        Market::OnDemand => call.on_demand_options(
            OnDemandOptionsRequest::builder()
                .allocation_strategy(on_demand_strategy(request.allocation_strategy))
                .build(),
        ),
    }
}

/// EC2's answer in orca's terms: each instance launched, with its pool filling in what the
/// instance does not say, and each pool's error.
fn fleet_answer(output: &CreateFleetOutput, request: &FleetRequest) -> FleetAnswer {
    FleetAnswer {
        fleet_id: output.fleet_id().unwrap_or_default().to_owned(),
        instances: output
            .instances()
            .iter()
            .flat_map(|launched| {
                let pool = launched.launch_template_and_overrides();
                let market = market_of(launched.lifecycle(), request.market);
                let instance_type = launched
                    .instance_type()
                    .map(|t| t.as_str().to_owned())
                    .or_else(|| pool_type(pool))
                    .unwrap_or_default();
                let subnet_id = launched
                    .subnet_id()
                    .map(str::to_owned)
                    .or_else(|| pool_subnet(pool));
                let zone = launched
                    .availability_zone()
                    .map(str::to_owned)
                    .or_else(|| pool_zone(pool));
                launched.instance_ids().iter().map(move |id| FleetInstance {
                    instance_id: id.clone(),
                    instance_type: instance_type.clone(),
                    market,
                    subnet_id: subnet_id.clone(),
                    zone: zone.clone(),
                })
            })
            .collect(),
        errors: output
            .errors()
            .iter()
            .map(|error| {
                fleet_error(
                    error.launch_template_and_overrides(),
                    error.error_code(),
                    error.error_message(),
                )
            })
            .collect(),
    }
}

fn spot_strategy(strategy: AllocationStrategy) -> SpotAllocationStrategy {
    match strategy {
        AllocationStrategy::CapacityOptimized => SpotAllocationStrategy::CapacityOptimized,
        AllocationStrategy::LowestPrice => SpotAllocationStrategy::LowestPrice,
        // Config validation keeps `prioritized` off spot; price-capacity-optimized is the
        // safe reading if it ever got here.
        AllocationStrategy::PriceCapacityOptimized | AllocationStrategy::Prioritized => {
            SpotAllocationStrategy::PriceCapacityOptimized
        }
    }
}

fn on_demand_strategy(strategy: AllocationStrategy) -> FleetOnDemandAllocationStrategy {
    match strategy {
        AllocationStrategy::LowestPrice => FleetOnDemandAllocationStrategy::LowestPrice,
        _ => FleetOnDemandAllocationStrategy::Prioritized,
    }
}

fn market_of(lifecycle: Option<&InstanceLifecycle>, asked: Market) -> Market {
    match lifecycle {
        Some(InstanceLifecycle::Spot) => Market::Spot,
        Some(InstanceLifecycle::OnDemand) => Market::OnDemand,
        _ => asked,
    }
}

fn pool_type(pool: Option<&LaunchTemplateAndOverridesResponse>) -> Option<String> {
    Some(pool?.overrides()?.instance_type()?.as_str().to_owned())
}

fn pool_subnet(pool: Option<&LaunchTemplateAndOverridesResponse>) -> Option<String> {
    Some(pool?.overrides()?.subnet_id()?.to_owned())
}

fn pool_zone(pool: Option<&LaunchTemplateAndOverridesResponse>) -> Option<String> {
    Some(pool?.overrides()?.availability_zone()?.to_owned())
}

fn fleet_error(
    pool: Option<&LaunchTemplateAndOverridesResponse>,
    code: Option<&str>,
    message: Option<&str>,
) -> FleetError {
    FleetError {
        instance_type: pool_type(pool),
        subnet_id: pool_subnet(pool),
        zone: pool_zone(pool),
        code: code.unwrap_or("Unknown").to_owned(),
        message: message.unwrap_or_default().to_owned(),
    }
}
