//! orca's EC2 seam ([`Ec2Api`]) over the EC2 model (`orca-ec2-model`): every call is made at
//! the wall-clock time it happens, so the in-process orca meets the model's lags, stale reads
//! and faults in real time.

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;

use ::orca::provider::aws::api::{
    ApiError, Ec2Api, Ec2Instance, Ec2Volume, Filter, FleetAnswer, FleetError, FleetInstance,
    FleetRequest, InstanceTypeInfo, LaunchTemplateRef, LaunchTemplateSpec, LaunchTemplateVersion,
    RunRequest, SpotHistoryQuery, SpotPriceChange,
};
use ::orca::provider::plan::AllocationStrategy;
use ::orca::provider::plan::Market;
use ::orca::provider::{InstanceState, StateReason};
use async_trait::async_trait;
use jiff::Timestamp;
use orca_ec2_model::{
    CreateFleet, CreateLaunchTemplate, Ec2Error, Ec2Model, ErrorKind, FleetPool, Instance,
    RunInstances, State,
};

/// The model, as orca's aws provider sees EC2.
pub struct ModelEc2 {
    pub model: Arc<Ec2Model>,
    /// A bug's stand-in: once set, a node's `DescribeInstances` (orca's status sync lists its
    /// node's instances with it every period) panics in the caller.
    listing_panics: std::sync::atomic::AtomicBool,
}

impl ModelEc2 {
    pub fn new(model: Arc<Ec2Model>) -> ModelEc2 {
        ModelEc2 {
            model,
            listing_panics: std::sync::atomic::AtomicBool::new(false),
        }
    }

    /// From now on every `DescribeInstances` of one node's instances (a filter on the node's
    /// tag) panics. Listings of the whole cluster's (the stray sweep's, the census's) do not:
    /// a panic there ends the process, which a test of one node's serving does not ask for.
    pub fn panic_on_listing(&self) {
        self.listing_panics
            .store(true, std::sync::atomic::Ordering::SeqCst);
    }
}

#[async_trait]
impl Ec2Api for ModelEc2 {
    async fn run_instance(&self, request: &RunRequest) -> Result<Ec2Instance, ApiError> {
        let launch = RunInstances {
            client_token: Some(request.client_token.clone()),
            instance_type: request.instance_type.clone(),
            spot: request.market == Market::Spot,
            max_price: request.max_price,
            subnet_id: request.subnet_id.clone(),
            tags: request.tags.clone(),
            // EC2 compares every parameter of a repeated token; the model compares this
            // string for the ones it has no field of its own for.
            fingerprint: format!(
                "{:?}|{}|{:?}|{:?}|{:?}|{:?}|{}",
                request.zone,
                request.image_id,
                request.security_group_ids,
                request.instance_profile,
                request.key_name,
                request.root_volume,
                request.user_data
            ),
        };
        self.model
            .run_instances(Timestamp::now(), &launch)
            .map(|instance| ec2_instance(&instance))
            .map_err(api_error)
    }

    async fn create_launch_template(
        &self,
        spec: &LaunchTemplateSpec,
    ) -> Result<LaunchTemplateRef, ApiError> {
        let request = CreateLaunchTemplate {
            name: spec.name.clone(),
            data: spec.settings(),
        };
        self.model
            .create_launch_template(Timestamp::now(), &request)
            .map(|made| LaunchTemplateRef {
                id: made.id,
                version: made.version,
            })
            .map_err(api_error)
    }

    async fn describe_launch_template_versions(
        &self,
        name: &str,
    ) -> Result<Vec<LaunchTemplateVersion>, ApiError> {
        let versions = self
            .model
            .describe_launch_template_versions(Timestamp::now(), name)
            .map_err(api_error)?;
        Ok(versions
            .into_iter()
            .map(|version| LaunchTemplateVersion {
                template: LaunchTemplateRef {
                    id: version.template.id,
                    version: version.template.version,
                },
                default: version.default,
                settings: version.data,
            })
            .collect())
    }

    async fn create_fleet(&self, request: &FleetRequest) -> Result<FleetAnswer, ApiError> {
        let behaviour = self.model.behaviour();
        // A pool without a subnet names a zone: the model's subnet in that zone.
        let subnet_of = |zone: &str| {
            behaviour
                .subnets
                .iter()
                .find(|(_, z)| z.as_str() == zone)
                .map(|(subnet, _)| subnet.clone())
        };
        let pools: Vec<FleetPool> = request
            .pools
            .iter()
            .map(|pool| FleetPool {
                instance_type: pool.instance_type.clone(),
                subnet_id: pool
                    .subnet_id
                    .clone()
                    .or_else(|| pool.zone.as_deref().and_then(subnet_of)),
                priority: pool.priority,
            })
            .collect();
        let launch = CreateFleet {
            client_token: Some(request.client_token.clone()),
            spot: request.market == Market::Spot,
            allocation_strategy: match request.allocation_strategy {
                AllocationStrategy::PriceCapacityOptimized => {
                    orca_ec2_model::AllocationStrategy::PriceCapacityOptimized
                }
                AllocationStrategy::CapacityOptimized => {
                    orca_ec2_model::AllocationStrategy::CapacityOptimized
                }
                AllocationStrategy::LowestPrice => orca_ec2_model::AllocationStrategy::LowestPrice,
                AllocationStrategy::Prioritized => orca_ec2_model::AllocationStrategy::Prioritized,
            },
            pools: pools.clone(),
            max_price: request.max_price,
            tags: request.tags.clone(),
            launch_template: Some(orca_ec2_model::LaunchTemplateRef {
                id: request.template.id.clone(),
                version: request.template.version,
            }),
            fingerprint: format!("{}|{}", request.image_id, request.user_data),
        };
        let answer = self
            .model
            .create_fleet(Timestamp::now(), &launch)
            .map_err(api_error)?;
        let zone_of = |pool: usize| {
            pools
                .get(pool)
                .map(|p| behaviour.zone_for(p.subnet_id.as_deref()).to_owned())
        };
        Ok(FleetAnswer {
            fleet_id: answer.fleet_id,
            instances: answer
                .instances
                .iter()
                .map(|launched| FleetInstance {
                    instance_id: launched.instance.instance_id.clone(),
                    instance_type: launched.instance.instance_type.clone(),
                    market: request.market,
                    subnet_id: pools.get(launched.pool).and_then(|p| p.subnet_id.clone()),
                    zone: zone_of(launched.pool),
                })
                .collect(),
            errors: answer
                .errors
                .into_iter()
                .map(|error| FleetError {
                    instance_type: Some(error.instance_type),
                    subnet_id: error.subnet_id,
                    zone: Some(error.zone),
                    code: error.code,
                    message: error.message,
                })
                .collect(),
        })
    }

    async fn subnet_zones(
        &self,
        subnet_ids: &[String],
    ) -> Result<HashMap<String, String>, ApiError> {
        let behaviour = self.model.behaviour();
        Ok(subnet_ids
            .iter()
            .filter_map(|id| Some((id.clone(), behaviour.subnets.get(id)?.clone())))
            .collect())
    }

    async fn describe_instances(&self, filters: &[Filter]) -> Result<Vec<Ec2Instance>, ApiError> {
        let of_a_node = filters
            .iter()
            .any(|filter| filter.name == format!("tag:{}", ::orca::provider::ownership::TAG_NODE));
        assert!(
            !(of_a_node
                && self
                    .listing_panics
                    .load(std::sync::atomic::Ordering::SeqCst)),
            "DescribeInstances panics, as the test asked"
        );
        let filters: Vec<orca_ec2_model::Filter> = filters
            .iter()
            .map(|f| orca_ec2_model::Filter::new(f.name.clone(), f.values.clone()))
            .collect();
        self.model
            .describe_instances(Timestamp::now(), &filters)
            .map(|instances| instances.iter().map(ec2_instance).collect())
            .map_err(api_error)
    }

    /// The model holds no EBS volumes: every id is unknown, as in an account without any.
    async fn describe_volumes(&self, _: &[String]) -> Result<Vec<Ec2Volume>, ApiError> {
        Ok(Vec::new())
    }

    async fn attach_volume(&self, volume_id: &str, _: &str, _: &str) -> Result<(), ApiError> {
        Err(ApiError::service(
            "InvalidVolume.NotFound",
            format!("The volume '{volume_id}' does not exist."),
        ))
    }

    async fn terminate_instances(&self, instance_ids: &[String]) -> Result<Vec<String>, ApiError> {
        self.model
            .terminate_instances(Timestamp::now(), instance_ids)
            .map(|changes| changes.into_iter().map(|c| c.instance_id).collect())
            .map_err(api_error)
    }

    async fn create_tags(
        &self,
        instance_ids: &[String],
        tags: &BTreeMap<String, String>,
    ) -> Result<(), ApiError> {
        self.model
            .create_tags(Timestamp::now(), instance_ids, tags)
            .map_err(api_error)
    }

    async fn console_output(&self, instance_id: &str) -> Result<Option<String>, ApiError> {
        self.model
            .get_console_output(Timestamp::now(), instance_id)
            .map_err(api_error)
    }

    async fn describe_instance_types(&self) -> Result<Vec<InstanceTypeInfo>, ApiError> {
        // The simulation runs with the bundled catalogue (catalogueRefresh: 0s).
        Ok(Vec::new())
    }

    async fn spot_prices(&self) -> Result<HashMap<String, f64>, ApiError> {
        Ok(HashMap::new())
    }

    async fn spot_price_history(
        &self,
        _query: &SpotHistoryQuery,
    ) -> Result<Vec<SpotPriceChange>, ApiError> {
        Ok(Vec::new())
    }

    async fn instance_type_zones(&self) -> Result<HashMap<String, Vec<String>>, ApiError> {
        Ok(HashMap::new())
    }

    async fn ping(&self) -> Result<(), ApiError> {
        Ok(())
    }
}

fn ec2_instance(instance: &Instance) -> Ec2Instance {
    Ec2Instance {
        instance_id: instance.instance_id.clone(),
        instance_type: instance.instance_type.clone(),
        state: state(instance.state),
        private_ip: Some(instance.private_ip.into()),
        launch_time: instance.launch_time,
        spot: instance.spot,
        state_reason: instance.state_reason.as_ref().map(|reason| StateReason {
            code: reason.code.clone(),
            message: reason.message.clone(),
        }),
        tags: instance.tags.clone(),
        zone: Some(instance.zone.clone()),
        volume_ids: Vec::new(),
        ended_at: None,
    }
}

fn state(state: State) -> InstanceState {
    match state {
        State::Pending => InstanceState::Pending,
        State::Running => InstanceState::Running,
        State::ShuttingDown => InstanceState::ShuttingDown,
        State::Terminated => InstanceState::Terminated,
        State::Stopping => InstanceState::Stopping,
        State::Stopped => InstanceState::Stopped,
    }
}

fn api_error(error: Ec2Error) -> ApiError {
    match error.kind {
        ErrorKind::Transport => ApiError::transport(error.message),
        ErrorKind::Service => ApiError::service(error.code, error.message),
    }
}
