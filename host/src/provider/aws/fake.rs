//! A fault-injecting [`Ec2Api`] for unit tests: what moto cannot show. It keeps instances in
//! memory, honours `ClientToken`s the way EC2 does (the same instance for the same request,
//! `IdempotentParameterMismatch` for another), records every call, and can be told to refuse
//! launches per offering, throttle, hide new instances from describes (eventual consistency),
//! launch and then lose the answer (a crash or timeout mid-call), or protect an instance from
//! termination. Instant fleets use their token up with any answer, as EC2 documents, and
//! need the version of the launch template they name to exist. Launch templates keep their
//! versions' settings; someone else's template (or version) can be put under any name. EBS
//! volumes attach as `AttachVolume` documents: only to a running or stopped instance in the
//! volume's zone, never to a second instance, never at a device in use; a terminated
//! instance's volumes become available again.

use std::collections::{BTreeMap, HashMap, VecDeque};
use std::sync::Mutex;

use async_trait::async_trait;
use jiff::Timestamp;

use super::api::{
    ApiError, Ec2Api, Ec2Instance, Ec2Volume, Filter, FleetAnswer, FleetError, FleetInstance,
    FleetRequest, InstanceTypeInfo, LaunchTemplateRef, LaunchTemplateSpec, LaunchTemplateVersion,
    RunRequest, SpotHistoryQuery, SpotPriceChange, TemplateSettings, VolumeState,
};
use crate::provider::InstanceState;
use crate::provider::plan::Market;
use crate::support::errors::lock;

mod templates;
use self::templates::Template;

#[derive(Default)]
pub struct FakeEc2 {
    state: Mutex<State>,
}

#[derive(Default)]
struct State {
    instances: Vec<Ec2Instance>,
    /// Token → the instance it launched and the request that launched it (token cleared).
    tokens: HashMap<String, (String, RunRequest)>,
    /// Instances with termination protection.
    protected: Vec<String>,
    calls: Vec<String>,
    /// Errors `RunInstances` answers, per `type/market`, in order.
    run_errors: HashMap<String, VecDeque<ApiError>>,
    /// Errors any call answers next, before doing anything.
    next_errors: VecDeque<ApiError>,
    /// Launch, then answer with this error instead of the instance.
    lose_next_answer: Option<ApiError>,
    /// Describes that will not show instances launched from now on.
    hidden_for: usize,
    hidden: Vec<String>,
    serial: u64,
    types: Vec<InstanceTypeInfo>,
    spot_prices: HashMap<String, f64>,
    /// What `DescribeSpotPriceHistory` answers by pool (`spot_price_history`).
    spot_history: Vec<SpotPriceChange>,
    type_zones: HashMap<String, Vec<String>>,
    templates: Vec<Template>,
    /// Fleet token → the request (token cleared) and the answer it got.
    fleet_tokens: HashMap<String, (FleetRequest, FleetAnswer)>,
    /// Each fleet request that used a token, in order.
    fleet_log: Vec<FleetRequest>,
    /// Errors the next `CreateFleet` calls answer, before doing anything.
    fleet_call_errors: VecDeque<ApiError>,
    volumes: Vec<Ec2Volume>,
    /// Per instance, the devices its attached volumes use.
    devices: HashMap<String, Vec<String>>,
}

/// The fake's subnets: `subnet-0a…` is in us-west-2a, `subnet-0b…` in us-west-2b, and so on.
fn zone_of_subnet(subnet_id: &str) -> Option<String> {
    let letter = subnet_id.strip_prefix("subnet-0")?.chars().next()?;
    Some(format!("us-west-2{letter}"))
}

impl State {
    /// Moves the instance to `to`; a terminated instance's volumes become available.
    fn set_state(&mut self, instance_id: &str, to: InstanceState) {
        let Some(instance) = self
            .instances
            .iter_mut()
            .find(|i| i.instance_id == instance_id)
        else {
            return;
        };
        instance.state = to;
        if to == InstanceState::Terminated {
            instance.volume_ids.clear();
            self.devices.remove(instance_id);
            for volume in &mut self.volumes {
                if volume.attached_to.iter().any(|id| id == instance_id) {
                    volume.attached_to.clear();
                    volume.state = VolumeState::Available;
                }
            }
        }
    }

    /// `AttachVolume`, with the refusals EC2 documents for it.
    fn attach(&mut self, volume_id: &str, instance_id: &str, device: &str) -> Result<(), ApiError> {
        let Some(volume) = self.volumes.iter().find(|v| v.volume_id == volume_id) else {
            return Err(ApiError::service(
                "InvalidVolume.NotFound",
                format!("The volume '{volume_id}' does not exist."),
            ));
        };
        let Some(instance) = self.instances.iter().find(|i| i.instance_id == instance_id) else {
            return Err(ApiError::service(
                "InvalidInstanceID.NotFound",
                format!("The instance ID '{instance_id}' does not exist"),
            ));
        };
        if volume.state != VolumeState::Available {
            return Err(ApiError::service(
                "VolumeInUse",
                format!("{volume_id} is already attached to an instance"),
            ));
        }
        if !matches!(
            instance.state,
            InstanceState::Running | InstanceState::Stopped
        ) {
            return Err(ApiError::service(
                "IncorrectState",
                format!("Instance '{instance_id}' is not 'running'."),
            ));
        }
        if instance.zone.as_deref() != Some(volume.zone.as_str()) {
            return Err(ApiError::service(
                "InvalidVolume.ZoneMismatch",
                format!(
                    "The volume '{volume_id}' is not in the same availability zone as instance '{instance_id}'"
                ),
            ));
        }
        let devices = self.devices.entry(instance_id.to_owned()).or_default();
        if devices.iter().any(|d| d == device) {
            return Err(ApiError::service(
                "InvalidParameterValue",
                format!(
                    "Invalid value '{device}' for unixDevice. Attachment point {device} is already in use"
                ),
            ));
        }
        devices.push(device.to_owned());
        if let Some(volume) = self.volumes.iter_mut().find(|v| v.volume_id == volume_id) {
            volume.state = VolumeState::InUse;
            volume.attached_to = vec![instance_id.to_owned()];
        }
        if let Some(instance) = self
            .instances
            .iter_mut()
            .find(|i| i.instance_id == instance_id)
        {
            instance.volume_ids.push(volume_id.to_owned());
        }
        Ok(())
    }

    /// A new pending instance, listed (unless describes are hiding new launches for now).
    fn launch(
        &mut self,
        instance_type: &str,
        market: Market,
        tags: &BTreeMap<String, String>,
        zone: Option<String>,
    ) -> Ec2Instance {
        self.serial += 1;
        let instance = Ec2Instance {
            instance_id: format!("i-{:017x}", self.serial),
            instance_type: instance_type.to_owned(),
            state: InstanceState::Pending,
            private_ip: Some(std::net::IpAddr::from([10, 0, 0, self.serial as u8])),
            launch_time: Timestamp::now(),
            spot: market == Market::Spot,
            state_reason: None,
            tags: tags.clone(),
            zone,
            volume_ids: Vec::new(),
            ended_at: None,
        };
        if self.hidden_for > 0 {
            self.hidden.push(instance.instance_id.clone());
        }
        self.instances.push(instance.clone());
        instance
    }
}

impl FakeEc2 {
    pub fn refuse(&self, instance_type: &str, market: Market, error: ApiError) {
        lock(&self.state)
            .run_errors
            .entry(format!("{instance_type}/{}", market.as_str()))
            .or_default()
            .push_back(error);
    }

    /// The price changes `DescribeSpotPriceHistory` answers per pool when asked for history.
    pub fn set_spot_history(&self, changes: Vec<SpotPriceChange>) {
        lock(&self.state).spot_history = changes;
    }

    /// What `DescribeInstanceTypes` and `DescribeSpotPriceHistory` answer.
    pub fn offer(&self, types: Vec<InstanceTypeInfo>, spot_prices: HashMap<String, f64>) {
        let mut state = lock(&self.state);
        state.types = types;
        state.spot_prices = spot_prices;
    }

    /// What `DescribeInstanceTypeOfferings` answers: the zones offering each type.
    pub fn offer_in_zones(&self, zones: HashMap<String, Vec<String>>) {
        lock(&self.state).type_zones = zones;
    }

    pub fn fail_next_call(&self, error: ApiError) {
        lock(&self.state).next_errors.push_back(error);
    }

    pub fn lose_next_answer(&self, error: ApiError) {
        lock(&self.state).lose_next_answer = Some(error);
    }

    /// Instances launched from now on stay out of the next `describes` describe answers
    /// given after their launch.
    pub fn hide_new_instances_for(&self, describes: usize) {
        lock(&self.state).hidden_for = describes;
    }

    /// Turns on termination protection for the instance.
    pub fn protect(&self, instance_id: &str) {
        lock(&self.state).protected.push(instance_id.to_owned());
    }

    /// The next `CreateFleet` is refused as a whole, with nothing done.
    pub fn refuse_next_fleet(&self, error: ApiError) {
        lock(&self.state).fleet_call_errors.push_back(error);
    }

    /// Deletes every launch template behind orca's back.
    pub fn delete_templates(&self) {
        lock(&self.state).templates.clear();
    }

    /// Someone else makes a launch template named `name` holding `settings` (version 1, the
    /// default). Answers its id.
    pub fn put_template(&self, name: &str, settings: TemplateSettings) -> String {
        lock(&self.state).put_template(name, settings)
    }

    /// Someone adds a version holding `settings` to the template named `name`, and makes it
    /// the default. Answers its number (0: no such template).
    pub fn add_template_version(&self, name: &str, settings: TemplateSettings) -> u64 {
        lock(&self.state).add_template_version(name, settings)
    }

    /// Every fleet request that used a token, in order (a repeat of a used token is not
    /// another).
    pub fn fleet_requests(&self) -> Vec<FleetRequest> {
        lock(&self.state).fleet_log.clone()
    }

    pub fn calls(&self) -> Vec<String> {
        lock(&self.state).calls.clone()
    }

    pub fn count(&self, call: &str) -> usize {
        lock(&self.state)
            .calls
            .iter()
            .filter(|c| *c == call)
            .count()
    }

    pub fn instances(&self) -> Vec<Ec2Instance> {
        lock(&self.state).instances.clone()
    }

    /// An instance launched outside orca (a person at the console, another cluster's orca, an
    /// orca from before instances carried the cluster's id), running with `tags`, launched
    /// `ago` before now. Answers its id.
    pub fn launch_outside(&self, tags: &[(&str, &str)], ago: std::time::Duration) -> String {
        let mut state = lock(&self.state);
        let tags = tags
            .iter()
            .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
            .collect();
        let mut instance = state.launch("m5.large", Market::OnDemand, &tags, None);
        instance.state = InstanceState::Running;
        instance.launch_time = Timestamp::now() - jiff::SignedDuration::try_from(ago).unwrap();
        let id = instance.instance_id.clone();
        if let Some(listed) = state.instances.iter_mut().find(|i| i.instance_id == id) {
            *listed = instance;
        }
        id
    }

    /// An available EBS volume in `zone`, made outside orca. Answers its id.
    pub fn create_volume(&self, zone: &str) -> String {
        let mut state = lock(&self.state);
        state.serial += 1;
        let volume_id = format!("vol-{:017x}", state.serial);
        state.volumes.push(Ec2Volume {
            volume_id: volume_id.clone(),
            zone: zone.to_owned(),
            state: VolumeState::Available,
            attached_to: Vec::new(),
        });
        volume_id
    }

    pub fn volumes(&self) -> Vec<Ec2Volume> {
        lock(&self.state).volumes.clone()
    }

    /// The instance reaches `state`, as EC2 moves it on its own.
    pub fn set_state(&self, instance_id: &str, to: InstanceState) {
        let mut state = lock(&self.state);
        state.set_state(instance_id, to);
    }

    pub fn set_tag(&self, instance_id: &str, key: &str, value: &str) {
        let mut state = lock(&self.state);
        if let Some(instance) = state
            .instances
            .iter_mut()
            .find(|i| i.instance_id == instance_id)
        {
            instance.tags.insert(key.to_owned(), value.to_owned());
        }
    }

    fn begin(&self, call: &str) -> Result<std::sync::MutexGuard<'_, State>, ApiError> {
        let mut state = lock(&self.state);
        state.calls.push(call.to_owned());
        match state.next_errors.pop_front() {
            Some(error) => Err(error),
            None => Ok(state),
        }
    }
}

fn matches(instance: &Ec2Instance, filter: &Filter) -> bool {
    if let Some(key) = filter.name.strip_prefix("tag:") {
        return instance
            .tags
            .get(key)
            .is_some_and(|value| filter.values.contains(value));
    }
    match filter.name.as_str() {
        "instance-id" => filter.values.contains(&instance.instance_id),
        "instance-state-name" => {
            let name = serde_json::to_value(instance.state)
                .ok()
                .and_then(|v| v.as_str().map(str::to_owned))
                .unwrap_or_default();
            filter.values.contains(&name)
        }
        _ => true,
    }
}

#[async_trait]
impl Ec2Api for FakeEc2 {
    async fn run_instance(&self, request: &RunRequest) -> Result<Ec2Instance, ApiError> {
        let mut state = self.begin("RunInstances")?;
        let parameters = RunRequest {
            client_token: String::new(),
            ..request.clone()
        };
        if let Some((id, launched_with)) = state.tokens.get(&request.client_token).cloned() {
            // EC2's idempotency: the same token answers the instance it launched, and refuses
            // other parameters.
            if launched_with != parameters {
                return Err(ApiError::service(
                    "IdempotentParameterMismatch",
                    "Arguments on this idempotent request are inconsistent with arguments used in previous request(s).",
                ));
            }
            return state
                .instances
                .iter()
                .find(|i| i.instance_id == id)
                .cloned()
                .ok_or_else(|| ApiError::service("InternalError", "token without instance"));
        }
        let offering = format!("{}/{}", request.instance_type, request.market.as_str());
        if let Some(error) = state
            .run_errors
            .get_mut(&offering)
            .and_then(VecDeque::pop_front)
        {
            return Err(error);
        }
        let zone = request
            .zone
            .clone()
            .or_else(|| zone_of_subnet(request.subnet_id.as_deref()?));
        let instance = state.launch(&request.instance_type, request.market, &request.tags, zone);
        state.tokens.insert(
            request.client_token.clone(),
            (instance.instance_id.clone(), parameters),
        );
        match state.lose_next_answer.take() {
            Some(error) => Err(error),
            None => Ok(instance),
        }
    }

    async fn create_launch_template(
        &self,
        spec: &LaunchTemplateSpec,
    ) -> Result<LaunchTemplateRef, ApiError> {
        self.begin("CreateLaunchTemplate")?.create_template(spec)
    }

    async fn describe_launch_template_versions(
        &self,
        name: &str,
    ) -> Result<Vec<LaunchTemplateVersion>, ApiError> {
        self.begin("DescribeLaunchTemplateVersions")?
            .template_versions(name)
    }

    async fn create_fleet(&self, request: &FleetRequest) -> Result<FleetAnswer, ApiError> {
        let mut state = self.begin("CreateFleet")?;
        if let Some(error) = state.fleet_call_errors.pop_front() {
            return Err(error);
        }
        let parameters = FleetRequest {
            client_token: String::new(),
            ..request.clone()
        };
        if let Some((asked, answer)) = state.fleet_tokens.get(&request.client_token) {
            if *asked != parameters {
                return Err(ApiError::service(
                    "IdempotentParameterMismatch",
                    "Arguments on this idempotent request are inconsistent with arguments used in previous request(s).",
                ));
            }
            return Ok(answer.clone());
        }
        state.check_template(&request.template)?;
        state.serial += 1;
        let mut answer = FleetAnswer {
            fleet_id: format!("fleet-{:08x}", state.serial),
            ..FleetAnswer::default()
        };
        let mut pools = request.pools.clone();
        pools.sort_by(|a, b| {
            let priority = |p: &super::api::FleetPool| p.priority.unwrap_or(f64::MAX);
            priority(a).total_cmp(&priority(b))
        });
        for pool in &pools {
            let offering = format!("{}/{}", pool.instance_type, request.market.as_str());
            if let Some(error) = state
                .run_errors
                .get_mut(&offering)
                .and_then(VecDeque::pop_front)
            {
                answer.errors.push(FleetError {
                    instance_type: Some(pool.instance_type.clone()),
                    subnet_id: pool.subnet_id.clone(),
                    zone: None,
                    code: error.code,
                    message: error.message,
                });
                continue;
            }
            let zone = pool
                .zone
                .clone()
                .or_else(|| zone_of_subnet(pool.subnet_id.as_deref()?));
            let instance = state.launch(
                &pool.instance_type,
                request.market,
                &request.tags,
                zone.clone(),
            );
            answer.instances.push(FleetInstance {
                instance_id: instance.instance_id.clone(),
                instance_type: pool.instance_type.clone(),
                market: request.market,
                subnet_id: pool.subnet_id.clone(),
                zone,
            });
            break;
        }
        state
            .fleet_tokens
            .insert(request.client_token.clone(), (parameters, answer.clone()));
        state.fleet_log.push(request.clone());
        match state.lose_next_answer.take() {
            Some(error) => Err(error),
            None => Ok(answer),
        }
    }

    async fn subnet_zones(
        &self,
        subnet_ids: &[String],
    ) -> Result<HashMap<String, String>, ApiError> {
        drop(self.begin("DescribeSubnets")?);
        Ok(subnet_ids
            .iter()
            .filter_map(|id| Some((id.clone(), zone_of_subnet(id)?)))
            .collect())
    }

    async fn describe_instances(&self, filters: &[Filter]) -> Result<Vec<Ec2Instance>, ApiError> {
        let mut state = self.begin("DescribeInstances")?;
        let hidden = state.hidden.clone();
        // The countdown starts with the first describe that has something to hide.
        if state.hidden_for > 0 && !hidden.is_empty() {
            state.hidden_for -= 1;
            if state.hidden_for == 0 {
                state.hidden.clear();
            }
        }
        Ok(state
            .instances
            .iter()
            .filter(|i| !hidden.contains(&i.instance_id))
            .filter(|i| filters.iter().all(|f| matches(i, f)))
            .cloned()
            .collect())
    }

    async fn describe_volumes(&self, volume_ids: &[String]) -> Result<Vec<Ec2Volume>, ApiError> {
        let state = self.begin("DescribeVolumes")?;
        Ok(state
            .volumes
            .iter()
            .filter(|volume| volume_ids.contains(&volume.volume_id))
            .cloned()
            .collect())
    }

    async fn attach_volume(
        &self,
        volume_id: &str,
        instance_id: &str,
        device: &str,
    ) -> Result<(), ApiError> {
        self.begin("AttachVolume")?
            .attach(volume_id, instance_id, device)
    }

    async fn terminate_instances(&self, instance_ids: &[String]) -> Result<Vec<String>, ApiError> {
        let mut state = self.begin("TerminateInstances")?;
        if let Some(protected) = instance_ids.iter().find(|id| state.protected.contains(id)) {
            return Err(ApiError::service(
                "OperationNotPermitted",
                format!(
                    "The instance '{protected}' may not be terminated. Modify its 'disableApiTermination' instance attribute and try again."
                ),
            ));
        }
        if let Some(unknown) = instance_ids
            .iter()
            .find(|id| !state.instances.iter().any(|i| &i.instance_id == *id))
        {
            return Err(ApiError::service(
                "InvalidInstanceID.NotFound",
                format!("The instance ID '{unknown}' does not exist"),
            ));
        }
        for instance in &mut state.instances {
            if instance_ids.contains(&instance.instance_id) {
                instance.state = InstanceState::ShuttingDown;
                instance.ended_at.get_or_insert_with(Timestamp::now);
            }
        }
        Ok(instance_ids.to_vec())
    }

    async fn create_tags(
        &self,
        instance_ids: &[String],
        tags: &BTreeMap<String, String>,
    ) -> Result<(), ApiError> {
        let mut state = self.begin("CreateTags")?;
        if let Some(unknown) = instance_ids
            .iter()
            .find(|id| !state.instances.iter().any(|i| &i.instance_id == *id))
        {
            return Err(ApiError::service(
                "InvalidInstanceID.NotFound",
                format!("The instance ID '{unknown}' does not exist"),
            ));
        }
        for instance in &mut state.instances {
            if instance_ids.contains(&instance.instance_id) {
                instance
                    .tags
                    .extend(tags.iter().map(|(k, v)| (k.clone(), v.clone())));
            }
        }
        Ok(())
    }

    async fn console_output(&self, instance_id: &str) -> Result<Option<String>, ApiError> {
        let state = self.begin("GetConsoleOutput")?;
        Ok(state
            .instances
            .iter()
            .find(|i| i.instance_id == instance_id)
            .and_then(|i| i.tags.get("fake/console").cloned()))
    }

    async fn describe_instance_types(&self) -> Result<Vec<InstanceTypeInfo>, ApiError> {
        let state = self.begin("DescribeInstanceTypes")?;
        Ok(state.types.clone())
    }

    async fn spot_prices(&self) -> Result<HashMap<String, f64>, ApiError> {
        let state = self.begin("DescribeSpotPriceHistory")?;
        Ok(state.spot_prices.clone())
    }

    /// As EC2 documents it: the changes after `since`, and per pool the one in effect at
    /// `since`.
    async fn spot_price_history(
        &self,
        query: &SpotHistoryQuery,
    ) -> Result<Vec<SpotPriceChange>, ApiError> {
        let state = self.begin("DescribeSpotPriceHistory")?;
        let asked = |change: &&SpotPriceChange| {
            query.instance_types.contains(&change.instance_type)
                && (query.zones.is_empty() || query.zones.contains(&change.zone))
        };
        let mut answer: Vec<SpotPriceChange> = Vec::new();
        for change in state.spot_history.iter().filter(asked) {
            let in_effect_at_since = change.at <= query.since
                && !state.spot_history.iter().any(|other| {
                    other.instance_type == change.instance_type
                        && other.zone == change.zone
                        && other.at > change.at
                        && other.at <= query.since
                });
            if change.at > query.since || in_effect_at_since {
                answer.push(change.clone());
            }
        }
        Ok(answer)
    }

    async fn instance_type_zones(&self) -> Result<HashMap<String, Vec<String>>, ApiError> {
        let state = self.begin("DescribeInstanceTypeOfferings")?;
        Ok(state.type_zones.clone())
    }

    async fn ping(&self) -> Result<(), ApiError> {
        self.begin("DescribeAvailabilityZones").map(|_| ())
    }
}
