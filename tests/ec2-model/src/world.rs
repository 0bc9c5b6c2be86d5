//! The world acting on instances by itself, driven by a test: the workload
//! ending, EC2 reclaiming spot capacity, other people stopping or
//! protecting instances. None of these is an API call: no throttling, no
//! visibility lag, no errors, just whether it could happen.

use jiff::Timestamp;

use crate::history::Ending;
use crate::model::{Ec2Model, World};
use crate::random::Draw;
use crate::state::{State, StateReason};
use crate::time::later;
use crate::workload::{EXIT_CODE_TAG, FINISHED_AT_TAG, InterruptionNotice, WorkloadEnd};

/// The exit code of a process killed by SIGTERM, as a shell reports it.
const SIGTERM_EXIT: i32 = 143;

impl Ec2Model {
    /// The workload on a running instance ended: the bootstrap writes its
    /// console lines (`orca-exit[<container>]=<code>` for each container,
    /// then `orca-exit-code=<pod code>`) and the exit-code and finished-at
    /// tags, then shuts the instance down (`Client.InstanceInitiatedShutdown`).
    ///
    /// The workload ends at `max(now, end.finished_at)`. Console lines and
    /// tags reach the API after their lags. A pending spot reclaim is
    /// dropped: the instance shuts itself down first.
    ///
    /// Returns false (and does nothing) unless the instance is running at
    /// `now`, its workload has not completed before, and it is not due to go
    /// down before the workload ends.
    pub fn complete_workload(&self, now: Timestamp, id: &str, end: &WorkloadEnd) -> bool {
        let mut world = self.world();
        let now = world.effective(now);
        let ended_at = now.max(end.finished_at);
        let able = world.record(id).is_some_and(|record| {
            record.state_at(now) == Some(State::Running)
                && !record.has_completed()
                && record
                    .timeline
                    .next_departure_after(now)
                    .is_none_or(|departure| departure > ended_at)
        });
        if !able {
            return false;
        }
        let World { rng, behaviour, .. } = &mut *world;
        let console_visible = later(ended_at, rng.span(behaviour.console_lag));
        let exit_tag_visible = later(ended_at, rng.span(behaviour.tag_lag));
        let finished_tag_visible = later(ended_at, rng.span(behaviour.tag_lag));
        let shutting_down = later(ended_at, rng.span(behaviour.workload_shutdown_delay));
        let shutdown = rng.span(behaviour.shutdown);

        let Some(record) = world.record_mut(id) else {
            return false;
        };
        record.cancel_after(now);
        let mut lines: Vec<String> = end
            .containers
            .iter()
            .map(|(name, code)| format!("orca-exit[{name}]={code}"))
            .collect();
        lines.push(format!("orca-exit-code={}", end.pod_exit_code));
        record.console.write(&lines, ended_at, console_visible);
        let code = end.pod_exit_code.to_string();
        record
            .tags
            .write(EXIT_CODE_TAG, &code, ended_at, exit_tag_visible);
        let finished = end.finished_at.to_string();
        record
            .tags
            .write(FINISHED_AT_TAG, &finished, ended_at, finished_tag_visible);
        record.shut_down(
            shutting_down,
            shutdown,
            StateReason::instance_initiated_shutdown(),
        );
        record.endings.push(Ending::Completed {
            pod_exit_code: end.pod_exit_code,
            containers: end.containers.clone(),
            at: end.finished_at,
        });
        world.changed_at(now);
        true
    }

    /// EC2 reclaims a running spot instance: a notice now, and at its end
    /// (`Behaviour::interruption_notice` later) the instance goes
    /// `shutting-down` with `Server.SpotInstanceTermination`. With
    /// probability `interrupted_workload_exits` the bootstrap's SIGTERM trap
    /// records exit code 143 (console and exit-code tag) as it goes down.
    ///
    /// The notice is also queued for [`Ec2Model::take_notices`]. Returns
    /// `None` (and does nothing) unless the instance is a running spot
    /// instance with nothing already scheduled to end it.
    pub fn interrupt_spot(&self, now: Timestamp, id: &str) -> Option<InterruptionNotice> {
        let mut world = self.world();
        let now = world.effective(now);
        let able = world.record(id).is_some_and(|record| {
            record.spot
                && record.state_at(now) == Some(State::Running)
                && !record.timeline.has_scheduled_after(now)
        });
        if !able {
            return None;
        }
        let World { rng, behaviour, .. } = &mut *world;
        let terminates_at = later(now, rng.span(behaviour.interruption_notice));
        let trapped = rng.chance(behaviour.interrupted_workload_exits);
        let console_visible = later(terminates_at, rng.span(behaviour.console_lag));
        let tag_visible = later(terminates_at, rng.span(behaviour.tag_lag));
        let shutdown = rng.span(behaviour.shutdown);

        let record = world.record_mut(id)?;
        let completed = record.has_completed();
        let workload_exit = (trapped && !completed).then_some(SIGTERM_EXIT);
        if let Some(code) = workload_exit {
            let line = format!("orca-exit-code={code}");
            record
                .console
                .write(&[line], terminates_at, console_visible);
            record
                .tags
                .write(EXIT_CODE_TAG, &code.to_string(), terminates_at, tag_visible);
        }
        record.shut_down(
            terminates_at,
            shutdown,
            StateReason::spot_instance_termination(),
        );
        record.endings.push(Ending::Interrupted {
            at: terminates_at,
            workload_exit,
        });
        let notice = InterruptionNotice {
            instance_id: record.id.clone(),
            issued_at: now,
            terminates_at,
        };
        world.notices.push(notice.clone());
        world.changed_at(now);
        Some(notice)
    }

    /// Someone other than the controller (a console user, or EC2 itself)
    /// stops an on-demand instance that is running or pending:
    /// `stopping` now, `stopped` after the shutdown time. Returns false (and
    /// does nothing) for a spot instance, an unknown id, or an instance in
    /// another state.
    pub fn stop_by_someone(&self, now: Timestamp, id: &str) -> bool {
        let mut world = self.world();
        let now = world.effective(now);
        let able = world.record(id).is_some_and(|record| {
            !record.spot && matches!(record.state_at(now), Some(State::Running | State::Pending))
        });
        if !able {
            return false;
        }
        let World { rng, behaviour, .. } = &mut *world;
        let shutdown = rng.span(behaviour.shutdown);
        let Some(record) = world.record_mut(id) else {
            return false;
        };
        record.cancel_after(now);
        record.stop(now, shutdown, StateReason::user_initiated_shutdown());
        record.endings.push(Ending::Stopped { at: now });
        world.changed_at(now);
        true
    }

    /// Someone enables termination protection (`disableApiTermination`) on
    /// the instance from `now` until `until`. Returns false for an unknown id
    /// or an empty window.
    pub fn protect(&self, now: Timestamp, id: &str, until: Timestamp) -> bool {
        let mut world = self.world();
        let now = world.effective(now);
        match world.record_mut(id) {
            Some(record) if until > now => {
                record.protections.push((now, until));
                world.changed_at(now);
                true
            }
            _ => false,
        }
    }

    /// Someone at the console "launches more like this" from instance `id`:
    /// a new on-demand instance of the same type in the same zone and subnet,
    /// with every tag the original has now (its ownership tags too), launched
    /// as `RunInstances` would (visibility and tag lags, boot). Answers the new
    /// id; `None` for an unknown id.
    pub fn launch_look_alike(&self, now: Timestamp, id: &str) -> Option<String> {
        let mut world = self.world();
        let now = world.effective(now);
        let (instance_type, zone, subnet_id, tags) = {
            let record = world.record(id)?;
            (
                record.instance_type.clone(),
                record.zone.clone(),
                record.subnet_id.clone(),
                record.tags.final_values(),
            )
        };
        let order = crate::spawn::Order {
            instance_type: &instance_type,
            spot: false,
            subnet_id: subnet_id.as_deref(),
            zone: &zone,
            tags: &tags,
            client_token: None,
        };
        Some(crate::spawn::spawn(&mut world, now, &order).instance_id)
    }

    /// Someone else launches an on-demand instance with `tags` (another
    /// cluster's controller, a person) in the default subnet's zone, as
    /// `RunInstances` would. Answers its id.
    pub fn launch_by_someone(
        &self,
        now: Timestamp,
        instance_type: &str,
        tags: &std::collections::BTreeMap<String, String>,
    ) -> String {
        let mut world = self.world();
        let now = world.effective(now);
        let zone = world.behaviour.zone_for(None).to_owned();
        let order = crate::spawn::Order {
            instance_type,
            spot: false,
            subnet_id: None,
            zone: &zone,
            tags,
            client_token: None,
        };
        crate::spawn::spawn(&mut world, now, &order).instance_id
    }
}
