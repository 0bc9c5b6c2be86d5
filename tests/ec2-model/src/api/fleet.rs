//! CreateFleet, for fleets of type `instant` with a target capacity of one
//! instance.

use jiff::Timestamp;

use crate::allocation::{self, Allocation};
use crate::error::Ec2Error;
use crate::fleet::CreateFleet;
use crate::fleet_answer::{FleetAnswer, FleetError, FleetInstance};
use crate::fleet_record::FleetRecord;
use crate::history::RefusedReplay;
use crate::ids;
use crate::model::{Ec2Model, World};
use crate::random::Draw;
use crate::spawn::{Order, spawn};
use crate::template::LaunchTemplateRef;
use crate::time::later;
use crate::token::Lookup;

impl Ec2Model {
    /// Creates an instant fleet: tries the pools in the order of the
    /// allocation strategy and launches one instance, `pending`, into the
    /// first that can take it, exactly as RunInstances would have launched
    /// it there (same record, same lags, same answer, same history).
    ///
    /// Pools refused before the launch (`SpotMaxPriceTooLow`,
    /// `InsufficientInstanceCapacity`) are answered in `errors`, so an answer
    /// can hold errors and an instance. If no pool can launch, the fleet is
    /// still created and answered, with no instance and an error for every
    /// distinct pool.
    ///
    /// # Guarantees
    /// - Any answered request uses up its client token, even one that
    ///   launched nothing (unlike RunInstances). A repeat with the same
    ///   parameters answers the same fleet id, the same errors and the same
    ///   instance in its current state (terminated included), even while
    ///   the fleet and the instance are invisible to every other call.
    /// - Fleet tokens are a book of their own: RunInstances never finds an
    ///   instance by a fleet's token, and the instance's `client_token` is
    ///   `None`.
    /// - The fleet is listed by [`Ec2Model::describe_fleets`] once its own
    ///   `visibility_lag` has passed.
    ///
    /// # Errors
    /// `RequestLimitExceeded` (throttled, nothing done);
    /// `InvalidParameterValue`/`TagLimitExceeded` for a bad request;
    /// (a launch template it names that is unknown, not visible yet or without that
    /// version is no error of the call: every pool answers
    /// `InvalidLaunchTemplateId.NotFound`/`.VersionNotFound` and nothing launches);
    /// `IdempotentParameterMismatch` for a used token with other parameters;
    /// and a `Transport` error (`RequestFailed`) when the fleet was made
    /// (with or without an instance) but the answer was lost.
    pub fn create_fleet(
        &self,
        now: Timestamp,
        request: &CreateFleet,
    ) -> Result<FleetAnswer, Ec2Error> {
        let mut guard = self.world();
        let world = &mut *guard;
        let now = world.effective(now);
        world.admit()?;
        request.validate()?;
        if let Some(token) = request.token() {
            match world.fleet_tokens.lookup(token, request) {
                Lookup::Unused => {}
                Lookup::Mismatch => {
                    world.refused_replays.push(RefusedReplay {
                        operation: "CreateFleet",
                        client_token: token.to_owned(),
                        at: now,
                    });
                    return Err(Ec2Error::idempotent_parameter_mismatch());
                }
                Lookup::Same(fleet_id) => return Ok(repeat(world, now, &fleet_id)),
            }
        }

        // A template the fleet names that EC2 does not know (yet): every pool fails with
        // that, and the fleet is answered (its token used) like any that launched nothing.
        let allocation = match request
            .launch_template
            .as_ref()
            .and_then(|named| template_refusal(world, now, named))
        {
            None => allocation::allocate(world, now, request),
            Some(refusal) => Allocation {
                errors: request
                    .pools
                    .iter()
                    .enumerate()
                    .map(|(index, pool)| FleetError {
                        pool: index,
                        instance_type: pool.instance_type.clone(),
                        subnet_id: pool.subnet_id.clone(),
                        zone: world
                            .behaviour
                            .zone_for(pool.subnet_id.as_deref())
                            .to_owned(),
                        code: refusal.code.clone(),
                        message: refusal.message.clone(),
                    })
                    .collect(),
                chosen: None,
            },
        };
        let instances: Vec<FleetInstance> = allocation
            .chosen
            .map(|chosen| {
                let order = Order {
                    instance_type: &chosen.pool.instance_type,
                    spot: request.spot,
                    subnet_id: chosen.pool.subnet_id.as_deref(),
                    zone: &chosen.zone,
                    tags: &request.tags,
                    client_token: None,
                };
                FleetInstance {
                    instance: spawn(world, now, &order),
                    pool: chosen.index,
                }
            })
            .into_iter()
            .collect();

        let fleet_index = &world.fleet_index;
        let fleet_id = ids::new_fleet_id(&mut world.rng, |id| fleet_index.contains_key(id));
        let visible_at = later(now, world.rng.span(world.behaviour.visibility_lag));
        let record = FleetRecord {
            id: fleet_id.clone(),
            client_token: request.token().map(str::to_owned),
            tags: request.tags.clone(),
            instances: instances
                .iter()
                .map(|launched| (launched.instance.instance_id.clone(), launched.pool))
                .collect(),
            errors: allocation.errors.clone(),
            created_at: now,
            visible_at,
        };
        let position = world.fleets.len();
        world.fleet_index.insert(fleet_id.clone(), position);
        world.fleets.push(record);
        world.changed_at(now);
        if let Some(token) = request.token() {
            world.fleet_tokens.remember(token, &fleet_id, request);
        }

        let lost = world.behaviour.lost_answer_probability;
        if world.rng.chance(lost) {
            return Err(Ec2Error::lost_answer("CreateFleet"));
        }
        Ok(FleetAnswer {
            fleet_id,
            instances,
            errors: allocation.errors,
        })
    }
}

/// Why the launch template version `named` cannot be launched from at `now`: unknown, not
/// yet visible, or without that version.
fn template_refusal(world: &World, now: Timestamp, named: &LaunchTemplateRef) -> Option<Ec2Error> {
    let Some(template) = world
        .templates
        .iter()
        .find(|t| t.id == named.id && t.visible(now))
    else {
        return Some(Ec2Error::template_id_not_found(&named.id));
    };
    (!template.has_version(named.version))
        .then(|| Ec2Error::template_version_not_found(&named.id, named.version))
}

/// The answer to a repeated request: the same fleet, its errors, and its
/// instance in its current state with the tags the request asked for (as
/// the first answer had). A terminated instance is answered as it is: EC2
/// documents no `IdempotentInstanceTerminated` for fleets.
fn repeat(world: &World, now: Timestamp, fleet_id: &str) -> FleetAnswer {
    let fleet = world
        .fleet_index
        .get(fleet_id)
        .and_then(|&i| world.fleets.get(i));
    let Some(fleet) = fleet else {
        // The token book only names fleets it saw made.
        return FleetAnswer {
            fleet_id: fleet_id.to_owned(),
            instances: Vec::new(),
            errors: Vec::new(),
        };
    };
    let instances = fleet
        .instances
        .iter()
        .filter_map(|(id, pool)| {
            let instance = world.record(id)?.view_at(now, fleet.tags.clone())?;
            Some(FleetInstance {
                instance,
                pool: *pool,
            })
        })
        .collect();
    FleetAnswer {
        fleet_id: fleet.id.clone(),
        instances,
        errors: fleet.errors.clone(),
    }
}
