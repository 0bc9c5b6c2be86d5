//! StopInstances.

use jiff::Timestamp;

use crate::error::Ec2Error;
use crate::history::Ending;
use crate::instance::StateChange;
use crate::model::Ec2Model;
use crate::random::Draw;
use crate::state::{State, StateReason};

impl Ec2Model {
    /// Stops the named instances: `running`/`pending` → `stopping` →
    /// `stopped`, with reason `Client.UserInitiatedShutdown`. All or nothing.
    ///
    /// # Errors
    /// `RequestLimitExceeded`; `MissingParameter`;
    /// `InvalidInstanceID.Malformed`; `InvalidInstanceID.NotFound`;
    /// `UnsupportedOperation` for a (one-time) spot instance;
    /// `IncorrectInstanceState` for an instance neither running nor pending.
    pub fn stop_instances(
        &self,
        now: Timestamp,
        ids: &[String],
    ) -> Result<Vec<StateChange>, Ec2Error> {
        let mut world = self.world();
        let now = world.effective(now);
        world.admit()?;
        let found = world.resolve(now, ids)?;
        for &i in &found {
            let Some(record) = world.records.get(i) else {
                continue;
            };
            if record.spot {
                return Err(Ec2Error::spot_cannot_be_stopped(&record.id));
            }
            if !matches!(record.state_at(now), Some(State::Running | State::Pending)) {
                return Err(Ec2Error::incorrect_state(&record.id, "stopped"));
            }
        }
        world.changed_at(now);
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
            record.cancel_after(now);
            record.stop(now, drawn, StateReason::user_initiated_shutdown());
            record.endings.push(Ending::Stopped { at: now });
            changes.push(StateChange {
                instance_id: record.id.clone(),
                previous,
                current: State::Stopping,
            });
        }
        Ok(changes)
    }
}
