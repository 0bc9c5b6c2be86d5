//! One reconcile step as a pure decision: from the pod, its instance as last listed, its
//! record and the time, to the one thing to do next. No I/O happens here, so every path is
//! unit-tested and simulated without a cluster or EC2; [`super::execute`] does the I/O.
//!
//! | pod | its instance | step |
//! |---|---|---|
//! | deleting | listed, not yet shutting down (stopped ones too) | terminate it, then remove the pod |
//! | deleting | not listed, but launched (this process, or the pod's status says) | terminate by id; EC2 may not know a new id yet, so an unknown id is asked again until the visibility grace has passed |
//! | deleting | not listed; a launch in doubt | wait out the visibility grace, then remove the pod (orphan collection ends anything that shows up later) |
//! | deleting | gone or going | remove the pod |
//! | Succeeded/Failed | not yet shutting down | terminate it |
//! | active | running, a volume it waits for not attached (nor by this process) | attach it |
//! | active | pending/running | mirror it |
//! | active | stopping/stopped | Failed `InstanceStopped` (then terminated as above); if its workload had tagged its exit code first, as shutting-down below |
//! | active | shutting-down/terminated | read the exit report, then Succeeded or Failed |
//! | active | not listed, launched | wait out the visibility grace; then a lookup by id; Failed `InstanceLost` only if that finds nothing either |
//! | active | none | launch (again after a lost answer: the same ClientToken) |
//! | active | none; EC2 says its instance already ended | wait for a listing to show how, within the grace; else Failed `InstanceLost` |

use std::time::Duration;

use jiff::Timestamp;
use k8s_openapi::api::core::v1::PodStatus;

use super::events::PodEvent;
use super::phase::{FailureReason, PodPhase, WaitingReason};
use super::record::{ExitReport, Launch, PodRecord};
use super::status::{self, needs_write};
use super::terminations::Asked;
use super::view::{LaunchRef, PodView};
use crate::provider::{InstanceState, InstanceStatus, Termination};

/// The durations a decision depends on (from `pods:` in the config).
#[derive(Debug, Clone, Copy)]
pub struct Timing {
    /// How often instances are listed.
    pub sync: Duration,
    /// How long EC2 may take to show a new instance (or an exit report) before orca stops
    /// waiting for it (`pods.launchVisibilityGrace`).
    pub grace: Duration,
}

/// What a decision looks at.
#[derive(Debug, Clone)]
pub struct Observation<'a> {
    pub pod: &'a PodView<'a>,
    /// The pod's instance in the last listing.
    pub listed: Option<&'a InstanceStatus>,
    pub record: &'a PodRecord,
    /// The last termination request for the pod's instance (see [`Observation::instance_id`]).
    pub asked: Option<Asked>,
    pub now: Timestamp,
    pub timing: Timing,
}

/// The one thing to do next.
#[derive(Debug, Clone, PartialEq)]
pub enum Step {
    /// Nothing now: look again after this long, or (`None`) when the pod or its instance
    /// changes.
    Wait(Option<Duration>),
    /// Plan the pod and launch its instance (re-sending the same ClientToken after a lost
    /// answer).
    Launch,
    /// The second look: the instance by id, when listings miss it.
    LookUp {
        instance_id: String,
    },
    /// Read the workload's exit report of the ended instance.
    ReadExit {
        instance: Box<InstanceStatus>,
    },
    Terminate {
        instance_id: String,
    },
    /// Attach the volumes the running instance waits for (those this process attached
    /// already, which the listing may not show yet, marked attached).
    Attach {
        instance: Box<InstanceStatus>,
    },
    Write(Box<StatusWrite>),
    /// Remove the pod object: its instance is going or gone.
    RemovePod,
}

/// A status to write, and the Event that announces it once written.
#[derive(Debug, Clone, PartialEq)]
pub struct StatusWrite {
    pub status: PodStatus,
    pub event: Option<PodEvent>,
}

impl Observation<'_> {
    /// The instance in effect: the listed one, else the one a lookup by id found.
    fn instance(&self) -> Option<&InstanceStatus> {
        self.listed.or(self.record.looked_up.as_deref())
    }

    /// The instance launched for the pod that listings have not shown: this process's answer,
    /// else what the pod's status says.
    fn launched(&self) -> Option<&LaunchRef> {
        match &self.record.launch {
            Launch::Answered { launch, .. } => Some(launch),
            _ => self.pod.launched.as_ref(),
        }
    }

    /// The id of the pod's instance, as far as anything tells.
    pub fn instance_id(&self) -> Option<&str> {
        self.instance()
            .map(|instance| instance.instance_id.as_str())
            .or_else(|| self.launched().map(|launch| launch.instance_id.as_str()))
    }

    /// Time since `then` (zero if `then` is in the future).
    fn since(&self, then: Timestamp) -> Duration {
        let elapsed = self.now.duration_since(then);
        if elapsed.is_negative() {
            Duration::ZERO
        } else {
            elapsed.unsigned_abs()
        }
    }

    /// Waits until `elapsed` reaches `limit`, at most one sync period at a time.
    fn wait_for(&self, elapsed: Duration, limit: Duration) -> Step {
        let left = limit
            .saturating_sub(elapsed)
            .max(Duration::from_millis(100));
        Step::Wait(Some(left.min(self.timing.sync)))
    }
}

/// The next step for the pod.
pub fn decide(obs: &Observation) -> Step {
    if let Some(wait) = obs.record.retry.wait(obs.now) {
        return Step::Wait(Some(wait));
    }
    if obs.pod.deleting {
        return finalize(obs);
    }
    if obs.pod.phase.is_some_and(PodPhase::is_final) {
        return settle(obs);
    }
    match obs.instance() {
        Some(instance) => follow(obs, instance),
        None => unlisted(obs),
    }
}

/// The pod is being deleted: its instance goes first, then the pod object.
fn finalize(obs: &Observation) -> Step {
    if obs.record.removed {
        return Step::Wait(None);
    }
    if let Some(instance) = obs.instance() {
        return if instance.state.needs_termination() {
            terminate(obs, &instance.instance_id)
        } else {
            Step::RemovePod
        };
    }
    if let Some(launch) = obs.launched() {
        return match obs.asked {
            Some(Asked {
                answer: Termination::Requested,
                ..
            }) => Step::RemovePod,
            // EC2 may not know a new id yet; past the grace it is gone for good.
            Some(Asked {
                answer: Termination::Unknown,
                ..
            }) if obs.since(launch.at) >= obs.timing.grace => Step::RemovePod,
            Some(Asked {
                answer: Termination::Unknown,
                at,
            }) if obs.since(at) < obs.timing.sync => obs.wait_for(obs.since(at), obs.timing.sync),
            _ => Step::Terminate {
                instance_id: launch.instance_id.clone(),
            },
        };
    }
    match obs.record.launch {
        // An instance may yet show up: wait for it, within the grace. What shows up after
        // the pod is gone, orphan collection terminates.
        Launch::InDoubt { since } if obs.since(since) < obs.timing.grace => {
            obs.wait_for(obs.since(since), obs.timing.grace)
        }
        _ => Step::RemovePod,
    }
}

/// A listed instance that must go: asked once, asked again if it is still there two sync
/// periods later. A deleting pod is removed as soon as EC2 accepted the termination.
fn terminate(obs: &Observation, instance_id: &str) -> Step {
    match obs.asked {
        Some(Asked {
            answer: Termination::Requested,
            ..
        }) if obs.pod.deleting => Step::RemovePod,
        Some(Asked { at, .. }) if obs.since(at) < 2 * obs.timing.sync => {
            obs.wait_for(obs.since(at), 2 * obs.timing.sync)
        }
        _ => Step::Terminate {
            instance_id: instance_id.to_owned(),
        },
    }
}

/// A Succeeded or Failed pod keeps its status; an instance still holding resources goes
/// (a stopped one too, and one that only showed up after the pod failed).
fn settle(obs: &Observation) -> Step {
    match obs.instance() {
        Some(instance) if instance.state.needs_termination() => {
            terminate(obs, &instance.instance_id)
        }
        _ => Step::Wait(None),
    }
}

/// An active pod with its instance at hand: mirror it.
fn follow(obs: &Observation, instance: &InstanceStatus) -> Step {
    let stopped = matches!(
        instance.state,
        InstanceState::Stopping | InstanceState::Stopped
    );
    if stopped && instance.workload_exit.is_some() {
        // Stopped after its workload ended and reported: the workload's result decides.
        return ended(obs, instance);
    }
    if instance.state == InstanceState::Running && instance.volumes_to_attach().next().is_some() {
        let mut instance = instance.clone();
        for volume in &mut instance.volumes {
            volume.attached |= obs.record.attached.contains(&volume.volume_id);
        }
        if instance.volumes_to_attach().next().is_some() {
            return Step::Attach {
                instance: Box::new(instance),
            };
        }
    }
    if !instance.state.workload_over() || instance.state.needs_termination() {
        // Pending, running, or stopped (Failed `InstanceStopped`).
        return write(
            obs,
            status::status_for_instance(obs.pod.pod, instance, None),
        );
    }
    ended(obs, instance)
}

/// The instance shut down: the pod's final status needs the workload's exit report.
fn ended(obs: &Observation, instance: &InstanceStatus) -> Step {
    let interrupted = instance
        .state_reason
        .as_ref()
        .is_some_and(|reason| reason.is_spot_interruption());
    let final_with = |exit| {
        write(
            obs,
            status::status_for_instance(obs.pod.pod, instance, exit),
        )
    };
    if interrupted {
        // The interruption decides; an exit code only goes into the message.
        let exit = match &obs.record.exit {
            ExitReport::Read {
                exit: Some(exit), ..
            } => Some(exit),
            _ => instance.workload_exit.as_ref(),
        };
        return final_with(exit);
    }
    match &obs.record.exit {
        ExitReport::Read {
            exit: Some(exit), ..
        } => final_with(Some(exit)),
        ExitReport::NotRead => Step::ReadExit {
            instance: Box::new(instance.clone()),
        },
        ExitReport::Read {
            exit: None,
            first,
            last,
        } => {
            // The bootstrap shut the instance down after its workload ended (or tagged its
            // exit code), so a report exists: EC2 posts console output a while after the
            // fact. Only the console names each container's code; the tag is the pod's.
            let expected = instance.workload_exit.is_some()
                || instance
                    .state_reason
                    .as_ref()
                    .is_some_and(|reason| reason.is_instance_initiated_shutdown());
            if expected && obs.since(*first) < obs.timing.grace {
                return if obs.since(*last) >= obs.timing.sync {
                    Step::ReadExit {
                        instance: Box::new(instance.clone()),
                    }
                } else {
                    obs.wait_for(obs.since(*last), obs.timing.sync)
                };
            }
            final_with(instance.workload_exit.as_ref())
        }
    }
}

/// An active pod whose instance no listing shows.
fn unlisted(obs: &Observation) -> Step {
    if let Launch::EndedUnseen { since } = obs.record.launch {
        // EC2 says the instance existed and ended: a listing shows how, within the grace.
        if obs.since(since) < obs.timing.grace {
            return obs.wait_for(obs.since(since), obs.timing.grace);
        }
        let message = "the instance launched for this pod terminated, and no listing has \
                       shown how its workload ended"
            .to_owned();
        return write(
            obs,
            status::status_failed(obs.pod.pod, FailureReason::InstanceLost, message, None),
        );
    }
    let Some(launch) = obs.launched() else {
        // Never launched, or launched with no answer: (re)launch. The ClientToken is the
        // pod's, so a lost answer's instance comes back rather than a second one.
        return Step::Launch;
    };
    if let Launch::Answered { launch, offering } = &obs.record.launch
        && obs.pod.launched.as_ref().map(|l| &l.instance_id) != Some(&launch.instance_id)
    {
        // Launched by this process, and the pod's status does not name the instance yet.
        // The next listing usually shows it (running, at once, for a fast boot), and its
        // status is then written in one go. Only once a sync period has passed without it
        // does a Pending status name the instance, so no Pending write is overtaken before
        // it lands.
        let since = obs.since(launch.at);
        if since < obs.timing.sync {
            return obs.wait_for(since, obs.timing.sync);
        }
        let message = format!("launching a {offering} instance {}", launch.instance_id);
        return write(
            obs,
            status::status_while_launching(
                obs.pod.pod,
                WaitingReason::InstanceLaunching,
                message,
                Some(launch),
            ),
        );
    }
    let last_seen = obs
        .record
        .last_listed
        .map_or(launch.at, |listed| listed.max(launch.at));
    let missing = obs.since(last_seen);
    if missing < obs.timing.grace {
        return obs.wait_for(missing, obs.timing.grace);
    }
    match obs.record.lookup_missed {
        // A lookup by id after the grace had passed found nothing either.
        Some(missed)
            if obs.since(last_seen).saturating_sub(obs.since(missed)) >= obs.timing.grace =>
        {
            let message = format!(
                "instance {} of this pod no longer exists at the provider: no listing has shown \
                 it for {} and a lookup by id found nothing",
                launch.instance_id,
                humantime::format_duration(Duration::from_secs(missing.as_secs()))
            );
            write(
                obs,
                status::status_failed(
                    obs.pod.pod,
                    FailureReason::InstanceLost,
                    message,
                    Some(launch),
                ),
            )
        }
        _ => Step::LookUp {
            instance_id: launch.instance_id.clone(),
        },
    }
}

/// Writes `status` unless the pod has it (and carries the policy's decision); the Event comes
/// with a change of phase.
fn write(obs: &Observation, status: PodStatus) -> Step {
    let current = obs.pod.pod.status.as_ref();
    if !needs_write(current, &status) && obs.record.unwritten_decision(obs.pod.pod).is_none() {
        return Step::Wait(None);
    }
    let before = obs.pod.phase;
    let event = phase_event(before, &status);
    Step::Write(Box::new(StatusWrite { status, event }))
}

/// The Event that announces a new phase.
fn phase_event(before: Option<PodPhase>, status: &PodStatus) -> Option<PodEvent> {
    let after = status.phase.as_deref()?;
    if before.map(PodPhase::as_str) == Some(after) {
        return None;
    }
    let message = status.message.clone().unwrap_or_default();
    match after {
        "Running" => Some(PodEvent {
            warning: false,
            reason: "InstanceRunning",
            action: "Sync",
            note: format!(
                "instance {} is running at {}",
                instance_of(status).unwrap_or("?"),
                status.pod_ip.as_deref().unwrap_or("?")
            ),
        }),
        "Succeeded" => Some(PodEvent {
            warning: false,
            reason: "InstanceSucceeded",
            action: "Sync",
            note: format!(
                "instance {}: the workload completed",
                instance_of(status).unwrap_or("?")
            ),
        }),
        "Failed" => Some(PodEvent {
            warning: true,
            reason: failure_reason(status),
            action: "Sync",
            note: message,
        }),
        _ => None,
    }
}

fn instance_of(status: &PodStatus) -> Option<&str> {
    status
        .conditions
        .iter()
        .flatten()
        .find(|c| c.type_ == super::view::LAUNCHED_CONDITION)
        .and_then(|c| c.message.as_deref())
}

/// The status's reason, for the Event.
fn failure_reason(status: &PodStatus) -> &'static str {
    status
        .reason
        .as_deref()
        .and_then(FailureReason::parse)
        .unwrap_or(FailureReason::InstanceTerminated)
        .as_str()
}

#[cfg(test)]
mod tests;
