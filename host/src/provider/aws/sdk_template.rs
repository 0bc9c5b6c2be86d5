//! The launch template calls of [`super::sdk::SdkEc2`]: `CreateLaunchTemplate` from orca's
//! spec, and `DescribeLaunchTemplateVersions` read back as [`TemplateSettings`]: every setting
//! a version has, those orca never sets included, so that a template someone else made under
//! orca's name is told apart (see `template.rs`).

use aws_sdk_ec2::Client;
use aws_sdk_ec2::types::{
    self as ec2, LaunchTemplateBlockDeviceMapping, LaunchTemplateBlockDeviceMappingRequest,
    LaunchTemplateEbsBlockDevice, LaunchTemplateEbsBlockDeviceRequest,
    LaunchTemplateHttpTokensState, LaunchTemplateIamInstanceProfileSpecificationRequest,
    LaunchTemplateInstanceMetadataEndpointState, LaunchTemplateInstanceMetadataOptions,
    LaunchTemplateInstanceMetadataOptionsRequest, RequestLaunchTemplateData,
    ResponseLaunchTemplateData, ShutdownBehavior,
};

use super::api::{
    ApiError, LaunchTemplateRef, LaunchTemplateSpec, LaunchTemplateVersion, ShutdownBehaviour,
    TemplateSettings,
};
use super::sdk::error::api_error;
use super::template::sorted_list;

/// Versions per `DescribeLaunchTemplateVersions` page (EC2 accepts up to 200).
const VERSIONS_PER_PAGE: i32 = 200;

pub(super) async fn create_launch_template(
    client: &Client,
    spec: &LaunchTemplateSpec,
) -> Result<LaunchTemplateRef, ApiError> {
    let metadata = &spec.metadata;
    let mut data = RequestLaunchTemplateData::builder()
        .instance_initiated_shutdown_behavior(match spec.shutdown {
            ShutdownBehaviour::Stop => ShutdownBehavior::Stop,
            ShutdownBehaviour::Terminate => ShutdownBehavior::Terminate,
        })
        .metadata_options(
            LaunchTemplateInstanceMetadataOptionsRequest::builder()
                .http_tokens(if metadata.tokens_required {
                    LaunchTemplateHttpTokensState::Required
                } else {
                    LaunchTemplateHttpTokensState::Optional
                })
                .http_endpoint(if metadata.endpoint_enabled {
                    LaunchTemplateInstanceMetadataEndpointState::Enabled
                } else {
                    LaunchTemplateInstanceMetadataEndpointState::Disabled
                })
                .http_put_response_hop_limit(i32::from(metadata.hop_limit))
                .build(),
        )
        .set_key_name(spec.key_name.clone());
    if !spec.security_group_ids.is_empty() {
        data = data.set_security_group_ids(Some(spec.security_group_ids.clone()));
    }
    if let Some(profile) = &spec.instance_profile {
        let profile_spec = LaunchTemplateIamInstanceProfileSpecificationRequest::builder();
        data = data.iam_instance_profile(if profile.starts_with("arn:") {
            profile_spec.arn(profile).build()
        } else {
            profile_spec.name(profile).build()
        });
    }
    if let Some(volume) = &spec.root_volume {
        data = data.block_device_mappings(
            LaunchTemplateBlockDeviceMappingRequest::builder()
                .device_name(&volume.device_name)
                .ebs(
                    LaunchTemplateEbsBlockDeviceRequest::builder()
                        .volume_size(i32::try_from(volume.size_gib).unwrap_or(i32::MAX))
                        .volume_type(ec2::VolumeType::from(volume.volume_type.as_str()))
                        .encrypted(volume.encrypted)
                        .delete_on_termination(volume.delete_on_termination)
                        .build(),
                )
                .build(),
        );
    }
    let output = client
        .create_launch_template()
        .launch_template_name(&spec.name)
        .version_description("orca: what every instance of the node shares")
        .launch_template_data(data.build())
        .send()
        .await
        .map_err(api_error)?;
    let made = output.launch_template();
    // An answer without an id is as good as none: the next launch finds the template by name.
    let id = made
        .and_then(|template| template.launch_template_id())
        .ok_or_else(|| {
            ApiError::transport("CreateLaunchTemplate answered without a template id")
        })?;
    let version = made
        .and_then(|template| template.latest_version_number())
        .and_then(|number| u64::try_from(number).ok())
        .unwrap_or(1);
    Ok(LaunchTemplateRef {
        id: id.to_owned(),
        version,
    })
}

pub(super) async fn describe_launch_template_versions(
    client: &Client,
    name: &str,
) -> Result<Vec<LaunchTemplateVersion>, ApiError> {
    let mut pages = client
        .describe_launch_template_versions()
        .launch_template_name(name)
        .max_results(VERSIONS_PER_PAGE)
        .into_paginator()
        .send();
    let mut versions = Vec::new();
    while let Some(page) = pages.next().await {
        let page = page.map_err(api_error)?;
        for version in page.launch_template_versions() {
            let number = version
                .version_number()
                .and_then(|number| u64::try_from(number).ok());
            let (Some(id), Some(number)) = (version.launch_template_id(), number) else {
                continue;
            };
            versions.push(LaunchTemplateVersion {
                template: LaunchTemplateRef {
                    id: id.to_owned(),
                    version: number,
                },
                default: version.default_version().unwrap_or(false),
                settings: version
                    .launch_template_data()
                    .map(settings_of)
                    .unwrap_or_default(),
            });
        }
    }
    Ok(versions)
}

/// Every setting of a version, keyed as [`TemplateSettings`] says. Each field is taken out of
/// a copy as it is read; whatever is left (a field this SDK version has and this function
/// does not name) is one more setting, so nothing a version sets goes unseen.
fn settings_of(data: &ResponseLaunchTemplateData) -> TemplateSettings {
    let mut rest = data.clone();
    let mut settings = TemplateSettings::new();
    let mut set = |key: &str, value: String| {
        settings.insert(key.to_owned(), value);
    };
    settings_orca_sets(&mut rest, &mut set);
    scalars_orca_never_sets(&mut rest, &mut set);
    structures_orca_never_sets(&mut rest, &mut set);
    if rest != ResponseLaunchTemplateData::builder().build() {
        set("LaunchTemplateData", format!("{rest:?}"));
    }
    settings
}

/// Takes out of `rest` the settings orca's own templates have.
fn settings_orca_sets(rest: &mut ResponseLaunchTemplateData, set: &mut impl FnMut(&str, String)) {
    if let Some(groups) = rest.security_group_ids.take().filter(|g| !g.is_empty()) {
        set("SecurityGroupIds", sorted_list(&groups));
    }
    if let Some(profile) = rest.iam_instance_profile.take() {
        if let Some(arn) = profile.arn {
            set("IamInstanceProfile.Arn", arn);
        }
        if let Some(name) = profile.name {
            set("IamInstanceProfile.Name", name);
        }
    }
    if let Some(key) = rest.key_name.take() {
        set("KeyName", key);
    }
    for mapping in rest.block_device_mappings.take().unwrap_or_default() {
        block_device(mapping, set);
    }
    if let Some(metadata) = rest.metadata_options.take() {
        metadata_options(metadata, set);
    }
    if let Some(behaviour) = rest.instance_initiated_shutdown_behavior.take() {
        set(
            "InstanceInitiatedShutdownBehavior",
            behaviour.as_str().to_owned(),
        );
    }
}

/// Takes out of `rest` the scalar settings orca never sets, by value (the user data by its
/// length): any of them is a difference.
fn scalars_orca_never_sets(
    rest: &mut ResponseLaunchTemplateData,
    set: &mut impl FnMut(&str, String),
) {
    if let Some(user_data) = rest.user_data.take().filter(|u| !u.is_empty()) {
        set("UserData", format!("{} characters", user_data.len()));
    }
    let scalars = [
        ("KernelId", rest.kernel_id.take()),
        ("ImageId", rest.image_id.take()),
        ("RamDiskId", rest.ram_disk_id.take()),
        (
            "InstanceType",
            rest.instance_type.take().map(|t| t.as_str().to_owned()),
        ),
        (
            "EbsOptimized",
            rest.ebs_optimized.take().map(|b| b.to_string()),
        ),
        (
            "DisableApiTermination",
            rest.disable_api_termination.take().map(|b| b.to_string()),
        ),
        (
            "DisableApiStop",
            rest.disable_api_stop.take().map(|b| b.to_string()),
        ),
    ];
    for (key, value) in scalars {
        if let Some(value) = value {
            set(key, value);
        }
    }
}

/// Takes out of `rest` the structures and non-empty lists orca never sets, as the SDK prints
/// them: any of them is a difference.
fn structures_orca_never_sets(
    rest: &mut ResponseLaunchTemplateData,
    set: &mut impl FnMut(&str, String),
) {
    macro_rules! structures {
        ($($field:ident => $key:literal),* $(,)?) => {
            $(if let Some(value) = rest.$field.take() {
                set($key, format!("{value:?}"));
            })*
        };
    }
    macro_rules! lists {
        ($($field:ident => $key:literal),* $(,)?) => {
            $(if let Some(value) = rest.$field.take().filter(|list| !list.is_empty()) {
                set($key, format!("{value:?}"));
            })*
        };
    }
    structures!(
        monitoring => "Monitoring",
        placement => "Placement",
        instance_market_options => "InstanceMarketOptions",
        credit_specification => "CreditSpecification",
        cpu_options => "CpuOptions",
        capacity_reservation_specification => "CapacityReservationSpecification",
        hibernation_options => "HibernationOptions",
        enclave_options => "EnclaveOptions",
        instance_requirements => "InstanceRequirements",
        private_dns_name_options => "PrivateDnsNameOptions",
        maintenance_options => "MaintenanceOptions",
        operator => "Operator",
        network_performance_options => "NetworkPerformanceOptions",
    );
    lists!(
        network_interfaces => "NetworkInterfaces",
        tag_specifications => "TagSpecifications",
        elastic_gpu_specifications => "ElasticGpuSpecifications",
        elastic_inference_accelerators => "ElasticInferenceAccelerators",
        security_groups => "SecurityGroups",
        license_specifications => "LicenseSpecifications",
        secondary_interfaces => "SecondaryInterfaces",
    );
}

fn block_device(mut mapping: LaunchTemplateBlockDeviceMapping, set: &mut impl FnMut(&str, String)) {
    let device = mapping.device_name.take().unwrap_or_default();
    let key = |field: &str| format!("BlockDeviceMappings.{device}.{field}");
    if let Some(name) = mapping.virtual_name.take() {
        set(&key("VirtualName"), name);
    }
    if let Some(none) = mapping.no_device.take() {
        set(&key("NoDevice"), none);
    }
    if let Some(ebs) = mapping.ebs.take() {
        ebs_settings(ebs, &mut |field, value| {
            set(&key(&format!("Ebs.{field}")), value)
        });
    }
    if mapping != LaunchTemplateBlockDeviceMapping::builder().build() {
        set(&key("Other"), format!("{mapping:?}"));
    }
}

fn ebs_settings(mut ebs: LaunchTemplateEbsBlockDevice, set: &mut impl FnMut(&str, String)) {
    let fields = [
        ("Encrypted", ebs.encrypted.take().map(|b| b.to_string())),
        (
            "DeleteOnTermination",
            ebs.delete_on_termination.take().map(|b| b.to_string()),
        ),
        ("Iops", ebs.iops.take().map(|n| n.to_string())),
        ("KmsKeyId", ebs.kms_key_id.take()),
        ("SnapshotId", ebs.snapshot_id.take()),
        ("VolumeSize", ebs.volume_size.take().map(|n| n.to_string())),
        (
            "VolumeType",
            ebs.volume_type.take().map(|t| t.as_str().to_owned()),
        ),
        ("Throughput", ebs.throughput.take().map(|n| n.to_string())),
        (
            "VolumeInitializationRate",
            ebs.volume_initialization_rate.take().map(|n| n.to_string()),
        ),
        (
            "EbsCardIndex",
            ebs.ebs_card_index.take().map(|n| n.to_string()),
        ),
    ];
    for (field, value) in fields {
        if let Some(value) = value {
            set(field, value);
        }
    }
    if ebs != LaunchTemplateEbsBlockDevice::builder().build() {
        set("Other", format!("{ebs:?}"));
    }
}

fn metadata_options(
    mut metadata: LaunchTemplateInstanceMetadataOptions,
    set: &mut impl FnMut(&str, String),
) {
    // Whether the options have reached the instances yet, not a setting.
    metadata.state = None;
    if let Some(tokens) = metadata.http_tokens.take() {
        set("MetadataOptions.HttpTokens", tokens.as_str().to_owned());
    }
    if let Some(endpoint) = metadata.http_endpoint.take() {
        set("MetadataOptions.HttpEndpoint", endpoint.as_str().to_owned());
    }
    if let Some(limit) = metadata.http_put_response_hop_limit.take() {
        set("MetadataOptions.HttpPutResponseHopLimit", limit.to_string());
    }
    // Off unless turned on: shown as EC2's default, the same as unset.
    let ipv6 = metadata.http_protocol_ipv6.take();
    if let Some(ipv6) = ipv6.filter(|v| v.as_str() != "disabled") {
        set("MetadataOptions.HttpProtocolIpv6", ipv6.as_str().to_owned());
    }
    let tags = metadata.instance_metadata_tags.take();
    if let Some(tags) = tags.filter(|v| v.as_str() != "disabled") {
        set(
            "MetadataOptions.InstanceMetadataTags",
            tags.as_str().to_owned(),
        );
    }
    if metadata != LaunchTemplateInstanceMetadataOptions::builder().build() {
        set("MetadataOptions.Other", format!("{metadata:?}"));
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::provider::aws::api::{MetadataOptions, RootVolume};

    fn spec() -> LaunchTemplateSpec {
        LaunchTemplateSpec {
            name: "orca-n-0123456789".to_owned(),
            security_group_ids: vec!["sg-2".to_owned(), "sg-1".to_owned()],
            instance_profile: Some("orca-workload".to_owned()),
            key_name: Some("ops".to_owned()),
            root_volume: Some(RootVolume {
                device_name: "/dev/xvda".to_owned(),
                size_gib: 30,
                volume_type: "gp3".to_owned(),
                encrypted: true,
                delete_on_termination: true,
            }),
            metadata: MetadataOptions {
                tokens_required: true,
                endpoint_enabled: true,
                hop_limit: 1,
            },
            shutdown: ShutdownBehaviour::Terminate,
        }
    }

    /// What EC2 answers for a template made from `spec()`, as the SDK parses it.
    fn as_described() -> ResponseLaunchTemplateData {
        ResponseLaunchTemplateData::builder()
            .security_group_ids("sg-1")
            .security_group_ids("sg-2")
            .iam_instance_profile(
                ec2::LaunchTemplateIamInstanceProfileSpecification::builder()
                    .name("orca-workload")
                    .build(),
            )
            .key_name("ops")
            .block_device_mappings(
                LaunchTemplateBlockDeviceMapping::builder()
                    .device_name("/dev/xvda")
                    .ebs(
                        LaunchTemplateEbsBlockDevice::builder()
                            .volume_size(30)
                            .volume_type(ec2::VolumeType::Gp3)
                            .encrypted(true)
                            .delete_on_termination(true)
                            .build(),
                    )
                    .build(),
            )
            .metadata_options(
                LaunchTemplateInstanceMetadataOptions::builder()
                    .state(ec2::LaunchTemplateInstanceMetadataOptionsState::Applied)
                    .http_tokens(LaunchTemplateHttpTokensState::Required)
                    .http_endpoint(LaunchTemplateInstanceMetadataEndpointState::Enabled)
                    .http_put_response_hop_limit(1)
                    .http_protocol_ipv6(ec2::LaunchTemplateInstanceMetadataProtocolIpv6::Disabled)
                    .build(),
            )
            .instance_initiated_shutdown_behavior(ShutdownBehavior::Terminate)
            .build()
    }

    /// The two sides of the comparison are written apart (the spec's settings, the SDK's
    /// answer read back): they must agree on orca's own template, or every restart would
    /// refuse it.
    #[test]
    fn orcas_own_template_reads_back_as_its_spec_and_any_other_setting_shows() {
        assert_eq!(settings_of(&as_described()), spec().settings());

        let mut protected = as_described();
        protected.disable_api_termination = Some(true);
        protected.network_interfaces = Some(vec![
            ec2::LaunchTemplateInstanceNetworkInterfaceSpecification::builder()
                .associate_public_ip_address(true)
                .build(),
        ]);
        protected.user_data = Some("IyEvYmluL3NoCg==".to_owned());
        let settings = settings_of(&protected);
        assert_eq!(settings["DisableApiTermination"], "true");
        assert!(settings.contains_key("NetworkInterfaces"), "{settings:?}");
        assert_eq!(settings["UserData"], "16 characters");

        let mut iops = as_described();
        if let Some(mapping) = iops
            .block_device_mappings
            .as_mut()
            .and_then(|m| m.first_mut())
            && let Some(ebs) = mapping.ebs.as_mut()
        {
            ebs.iops = Some(16_000);
        }
        assert_eq!(
            settings_of(&iops)["BlockDeviceMappings./dev/xvda.Ebs.Iops"],
            "16000"
        );
    }
}
