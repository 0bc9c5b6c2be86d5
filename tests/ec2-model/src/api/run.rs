//! RunInstances.

use jiff::Timestamp;

use crate::capacity::{self, Offering};
use crate::error::Ec2Error;
use crate::ids;
use crate::instance::Instance;
use crate::launch::RunInstances;
use crate::model::{Ec2Model, World};
use crate::random::Draw;
use crate::record::Record;
use crate::state::State;
use crate::time::later;
use crate::token::Lookup;

impl Ec2Model {
    /// Launches one instance, in `pending` state.
    ///
    /// # Guarantees
    /// - A client token whose launch succeeded always answers that same
    ///   instance (in its current state) for a request with the same
    ///   parameters, even while the instance is still invisible to every
    ///   other call: EC2 resolves its own tokens. A retry after a lost answer
    ///   is therefore safe.
    /// - A failed launch makes nothing and leaves its token unused.
    ///
    /// # Errors
    /// `RequestLimitExceeded` (throttled, nothing done);
    /// `InvalidParameterValue`/`TagLimitExceeded` for a bad request;
    /// `IdempotentParameterMismatch` for a used token with other parameters;
    /// `IdempotentInstanceTerminated` for a used token whose instance is
    /// terminated; `SpotMaxPriceTooLow`; `InsufficientInstanceCapacity`; and
    /// a `Transport` error (`RequestFailed`) when the instance was made but
    /// the answer was lost.
    pub fn run_instances(
        &self,
        now: Timestamp,
        request: &RunInstances,
    ) -> Result<Instance, Ec2Error> {
        let mut world = self.world();
        let now = world.effective(now);
        world.admit()?;
        request.validate()?;
        if let Some(token) = request.token() {
            match world.tokens.lookup(token, request) {
                Lookup::Unused => {}
                Lookup::Mismatch => return Err(Ec2Error::idempotent_parameter_mismatch()),
                Lookup::Same(id) => return repeat(&world, now, &id, request),
            }
        }
        let zone = world
            .behaviour
            .zone_for(request.subnet_id.as_deref())
            .to_owned();
        if request.spot
            && let (Some(max_price), Some(price)) = (
                request.max_price,
                world.behaviour.spot_price(&request.instance_type),
            )
            && max_price < price
        {
            return Err(Ec2Error::spot_price_too_low(max_price, price));
        }
        let offering = Offering {
            instance_type: &request.instance_type,
            zone: &zone,
            spot: request.spot,
        };
        if capacity::is_exhausted(
            world.seed,
            world.behaviour.capacity_error_probability,
            world.behaviour.capacity_window,
            &offering,
            now,
        ) {
            return Err(Ec2Error::insufficient_capacity(
                &request.instance_type,
                &zone,
            ));
        }

        let record = launch(&mut world, now, request, zone);
        // EC2 answers a launch with the instance as it was made: pending,
        // whatever the boot time, and with the tags that were asked for.
        let answer = record
            .view_at(now, request.tags.clone())
            .map(|instance| Instance {
                state: State::Pending,
                state_reason: None,
                ..instance
            });
        let id = record.id.clone();
        let position = world.records.len();
        world.index.insert(id.clone(), position);
        world.ips.insert(record.private_ip);
        world.records.push(record);
        world.changed_at(now);
        if let Some(token) = request.token() {
            world.tokens.remember(token, &id, request);
        }

        let lost = world.behaviour.lost_answer_probability;
        if world.rng.chance(lost) {
            return Err(Ec2Error::lost_answer("RunInstances"));
        }
        answer.ok_or_else(|| Ec2Error::not_found(&[id.as_str()]))
    }
}

/// The answer to a repeated request: the same instance, in its current
/// state, with the tags the launch asked for (as the first answer had).
fn repeat(
    world: &World,
    now: Timestamp,
    id: &str,
    request: &RunInstances,
) -> Result<Instance, Ec2Error> {
    let record = world.record(id).ok_or_else(|| Ec2Error::not_found(&[id]))?;
    if record.state_at(now) == Some(State::Terminated) {
        return Err(Ec2Error::idempotent_instance_terminated());
    }
    record
        .view_at(now, request.tags.clone())
        .ok_or_else(|| Ec2Error::not_found(&[id]))
}

/// Makes the instance: its id, address, timeline, tags and boot log.
fn launch(world: &mut World, now: Timestamp, request: &RunInstances, zone: String) -> Record {
    let index = &world.index;
    let id = ids::new_instance_id(&mut world.rng, |id| index.contains_key(id));
    let private_ip = ids::new_private_ip(&mut world.rng, &world.ips);
    let behaviour = &world.behaviour;
    let rng = &mut world.rng;
    let visible_at = later(now, rng.span(behaviour.visibility_lag));
    let running_at = later(now, rng.span(behaviour.boot));
    let retention = rng.span(behaviour.terminated_retention);

    let mut record = Record {
        id,
        instance_type: request.instance_type.clone(),
        spot: request.spot,
        zone,
        subnet_id: request.subnet_id.clone(),
        client_token: request.token().map(str::to_owned),
        private_ip,
        launch_time: now,
        visible_at,
        retention,
        timeline: Default::default(),
        tags: Default::default(),
        console: Default::default(),
        protections: Vec::new(),
        endings: Vec::new(),
        termination_requests: Vec::new(),
    };
    record.timeline.push(now, State::Pending, None);
    record.timeline.push(running_at, State::Running, None);
    for (key, value) in &request.tags {
        let visible = later(now, rng.span(behaviour.tag_lag));
        record.tags.write(key, value, now, visible);
    }
    let boot_log = [
        format!(
            "[    0.000000] Linux version 6.1.0-orca (ec2-model) on {}",
            request.instance_type
        ),
        format!(
            "cloud-init[812]: Cloud-init v. 24.1 running 'init' for {}",
            record.id
        ),
        "cloud-init[812]: running orca bootstrap".to_owned(),
    ];
    let console_visible = later(running_at, rng.span(behaviour.console_lag));
    record.console.write(&boot_log, running_at, console_visible);
    record
}
