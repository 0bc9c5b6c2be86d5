//! RunInstances.

use jiff::Timestamp;

use crate::availability;
use crate::capacity::Offering;
use crate::error::Ec2Error;
use crate::history::RefusedReplay;
use crate::instance::Instance;
use crate::launch::RunInstances;
use crate::model::{Ec2Model, World};
use crate::random::Draw;
use crate::spawn::{Order, spawn};
use crate::state::State;
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
                Lookup::Mismatch => {
                    world.refused_replays.push(RefusedReplay {
                        operation: "RunInstances",
                        client_token: token.to_owned(),
                        at: now,
                    });
                    return Err(Ec2Error::idempotent_parameter_mismatch());
                }
                Lookup::Same(id) => return repeat(&world, now, &id, request),
            }
        }
        let zone = world
            .behaviour
            .zone_for(request.subnet_id.as_deref())
            .to_owned();
        let offering = Offering {
            instance_type: &request.instance_type,
            zone: &zone,
            spot: request.spot,
        };
        if let Some(refusal) = availability::refusal(&world, now, &offering, request.max_price) {
            return Err(refusal);
        }

        let order = Order {
            instance_type: &request.instance_type,
            spot: request.spot,
            subnet_id: request.subnet_id.as_deref(),
            zone: &zone,
            tags: &request.tags,
            client_token: request.token(),
        };
        let answer = spawn(&mut world, now, &order);
        if let Some(token) = request.token() {
            world.tokens.remember(token, &answer.instance_id, request);
        }

        let lost = world.behaviour.lost_answer_probability;
        if world.rng.chance(lost) {
            return Err(Ec2Error::lost_answer("RunInstances"));
        }
        Ok(answer)
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
