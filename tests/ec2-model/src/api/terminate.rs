//! TerminateInstances.

use std::collections::BTreeSet;

use jiff::Timestamp;

use crate::error::Ec2Error;
use crate::history::Ending;
use crate::instance::StateChange;
use crate::model::Ec2Model;
use crate::random::Draw;
use crate::state::{State, StateReason};

impl Ec2Model {
    /// Terminates the named instances, as EC2 does.
    ///
    /// # Guarantees
    /// - Idempotent: an instance already `shutting-down` or `terminated` is
    ///   answered in its state, unchanged.
    /// - A `stopped` or `stopping` instance can be terminated.
    /// - With termination protection on some named instances, the instances
    ///   in the same Availability Zone as any protected one are left alone,
    ///   those in other zones ARE terminated, and the call still fails: a
    ///   partial success behind an error, as EC2 documents.
    ///
    /// # Errors
    /// `RequestLimitExceeded`; `MissingParameter` for no ids;
    /// `InvalidInstanceID.Malformed`; `InvalidInstanceID.NotFound` naming
    /// every unknown, not yet propagated or purged id (nothing terminated);
    /// `IncorrectInstanceState` refusing a pending instance (with
    /// `per_id_refusal_probability`; nothing terminated);
    /// `OperationNotPermitted` naming one protected instance.
    pub fn terminate_instances(
        &self,
        now: Timestamp,
        ids: &[String],
    ) -> Result<Vec<StateChange>, Ec2Error> {
        let mut world = self.world();
        let now = world.effective(now);
        world.admit()?;
        let found = world.resolve(now, ids)?;
        world.changed_at(now);
        for &i in &found {
            if let Some(record) = world.records.get_mut(i) {
                record.termination_requests.push(now);
            }
        }

        let pending: Vec<usize> = found
            .iter()
            .copied()
            .filter(|&i| world.records.get(i).and_then(|r| r.state_at(now)) == Some(State::Pending))
            .collect();
        let refusal = world.behaviour.per_id_refusal_probability;
        if !pending.is_empty() && world.rng.chance(refusal) {
            let refused = pending.get(world.rng.usize(0..pending.len())).copied();
            let id = refused
                .and_then(|i| world.records.get(i))
                .map_or(String::new(), |record| record.id.clone());
            return Err(Ec2Error::incorrect_state(&id, "terminated"));
        }

        // Protection only matters for instances the call would change.
        let protected: Vec<usize> = found
            .iter()
            .copied()
            .filter(|&i| {
                world.records.get(i).is_some_and(|record| {
                    record.protected_at(now)
                        && !record.state_at(now).is_some_and(State::is_gone_or_going)
                })
            })
            .collect();
        let blocked_zones: BTreeSet<String> = protected
            .iter()
            .filter_map(|&i| world.records.get(i).map(|record| record.zone.clone()))
            .collect();

        let mut changes = Vec::new();
        for &i in &found {
            let shutdown = world.behaviour.shutdown;
            let drawn = world.rng.span(shutdown);
            let Some(record) = world.records.get_mut(i) else {
                continue;
            };
            let Some(previous) = record.state_at(now) else {
                continue;
            };
            if previous.is_gone_or_going() {
                changes.push(StateChange {
                    instance_id: record.id.clone(),
                    previous,
                    current: previous,
                });
                continue;
            }
            if blocked_zones.contains(&record.zone) {
                continue;
            }
            record.cancel_after(now);
            record.shut_down(now, drawn, StateReason::user_initiated_shutdown());
            record.endings.push(Ending::TerminatedByClient { at: now });
            changes.push(StateChange {
                instance_id: record.id.clone(),
                previous,
                current: State::ShuttingDown,
            });
        }

        match protected.first().and_then(|&i| world.records.get(i)) {
            Some(record) => Err(Ec2Error::termination_protected(&record.id)),
            None => Ok(changes),
        }
    }
}
