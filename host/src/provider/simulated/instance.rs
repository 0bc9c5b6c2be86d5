//! One simulated instance. Its state is a pure function of its timestamps and the current time,
//! so a restarted orca (reading the journal) sees exactly what it would have seen running.

use std::net::Ipv4Addr;
use std::time::Duration;

use jiff::{SignedDuration, Timestamp};
use serde::{Deserialize, Serialize};

use super::behaviour::Behaviour;
use crate::provider::plan::Market;
use crate::provider::{
    InstanceState, InstanceStatus, PodKey, StateReason, VolumeAttachment, WorkloadExit,
};
use crate::workload::WorkloadSpec;

/// A simulated instance's record, as journalled.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SimInstance {
    pub pod: PodKey,
    pub instance_id: String,
    pub instance_type: String,
    pub market: Market,
    pub private_ip: Ipv4Addr,
    pub launched_at: Timestamp,
    pub behaviour: Behaviour,
    pub terminate_requested_at: Option<Timestamp>,
    /// What the instance was launched to run, as the Launch step resolved it (environment
    /// and volume contents, Secret values included). `None` in records journalled before
    /// instances kept it.
    #[serde(default)]
    pub workload: Option<WorkloadSpec>,
    /// The EBS volumes it attaches, as the aws provider would (one device per volume).
    #[serde(default)]
    pub volumes: Vec<SimVolume>,
}

/// A volume a simulated instance attaches.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SimVolume {
    pub volume_id: String,
    pub device: String,
    /// When it was attached; `None`: not yet.
    pub attached_at: Option<Timestamp>,
}

/// Where an instance is in its life at a given moment.
#[derive(Debug, Clone, PartialEq)]
pub enum Phase {
    /// Listed with this status.
    Listed(Box<InstanceStatus>),
    /// No longer listed by the provider (lost, or terminated past retention).
    Gone,
}

impl SimVolume {
    /// As a launch announces it: at its device, not attached yet.
    pub fn planned(&self) -> VolumeAttachment {
        VolumeAttachment {
            volume_id: self.volume_id.clone(),
            device: self.device.clone(),
            attached: false,
        }
    }
}

impl SimInstance {
    fn after(&self, offset: Duration) -> Timestamp {
        let offset = SignedDuration::try_from(offset).unwrap_or(SignedDuration::MAX);
        self.launched_at
            .saturating_add(offset)
            .unwrap_or(Timestamp::MAX)
    }

    pub fn running_at(&self) -> Timestamp {
        self.after(self.behaviour.boot_delay)
    }

    /// When the workload exits on its own, if it does.
    pub fn exits_at(&self) -> Option<Timestamp> {
        let run_time = self.behaviour.run_time?;
        Some(self.after(self.behaviour.boot_delay.saturating_add(run_time)))
    }

    /// Its volumes at time `now`, while it runs.
    fn volumes_at(&self, now: Timestamp) -> Vec<VolumeAttachment> {
        self.volumes
            .iter()
            .map(|volume| VolumeAttachment {
                volume_id: volume.volume_id.clone(),
                device: volume.device.clone(),
                attached: volume.attached_at.is_some_and(|at| at <= now),
            })
            .collect()
    }

    /// The instance at time `now`.
    pub fn phase_at(&self, now: Timestamp, shutdown_delay: Duration, retention: Duration) -> Phase {
        if let Some(lose_after) = self.behaviour.lose_after
            && now >= self.after(lose_after)
        {
            return Phase::Gone;
        }
        let mut status = InstanceStatus {
            pod: self.pod.clone(),
            instance_id: self.instance_id.clone(),
            instance_type: self.instance_type.clone(),
            market: self.market,
            state: InstanceState::Pending,
            private_ip: None,
            launched_at: self.launched_at,
            started_at: None,
            state_reason: None,
            workload_exit: None,
            volumes: Vec::new(),
        };
        let running_at = self.running_at();
        let interrupted_at = self
            .behaviour
            .interrupt_after
            .map(|after| self.after(after));
        let exited_at = self.exits_at();
        // The earliest event that ends the instance decides how it ended.
        let endings = [
            self.terminate_requested_at
                .map(|at| (at, Ending::Terminated)),
            interrupted_at.map(|at| (at, Ending::SpotInterruption)),
            exited_at.map(|at| (at, Ending::WorkloadExited)),
        ];
        let ending = endings
            .into_iter()
            .flatten()
            .filter(|(at, _)| *at <= now)
            .min_by_key(|(at, _)| *at);

        if now >= running_at || ending.is_some() {
            status.private_ip = Some(self.private_ip.into());
        }
        if now >= running_at {
            status.started_at = Some(running_at);
        }
        let Some((ended_at, how)) = ending else {
            // An ending instance lets its volumes go, as EC2 detaches them.
            status.volumes = self.volumes_at(now);
            status.state = if now >= running_at {
                InstanceState::Running
            } else {
                InstanceState::Pending
            };
            return Phase::Listed(Box::new(status));
        };
        let terminated_at = ended_at + shutdown_delay_signed(shutdown_delay);
        if now >= terminated_at + shutdown_delay_signed(retention) {
            return Phase::Gone;
        }
        status.state = if now >= terminated_at {
            InstanceState::Terminated
        } else {
            InstanceState::ShuttingDown
        };
        status.state_reason = Some(how.reason());
        if how == Ending::WorkloadExited {
            status.workload_exit = Some(WorkloadExit {
                exit_code: self.behaviour.exit_code,
                finished_at: ended_at,
                containers: Default::default(),
            });
        }
        Phase::Listed(Box::new(status))
    }

    /// Console-style output of the instance up to `now`, with the time of each line.
    pub fn log_lines(&self, now: Timestamp, container: &str) -> Vec<(Timestamp, String)> {
        let mut lines = vec![(
            self.launched_at,
            format!(
                "[orca-sim] launching {} ({}, {})",
                self.instance_id,
                self.instance_type,
                self.market.as_str()
            ),
        )];
        let running_at = self.running_at();
        let stop = [
            self.terminate_requested_at,
            self.behaviour.interrupt_after.map(|a| self.after(a)),
        ]
        .into_iter()
        .flatten()
        .min();
        if now < running_at || stop.is_some_and(|stop| stop < running_at) {
            return lines;
        }
        lines.push((
            running_at,
            format!("[orca-sim] container {container} started"),
        ));
        // A heartbeat line every second while running, so followers and tails have output.
        let end = [Some(now), stop, self.exits_at()]
            .into_iter()
            .flatten()
            .min()
            .unwrap_or(now);
        let mut tick = running_at + SignedDuration::from_secs(1);
        let mut count = 1u64;
        while tick <= end && count <= 10_000 {
            lines.push((tick, format!("{container}: working ({count}s)")));
            tick += SignedDuration::from_secs(1);
            count += 1;
        }
        if let Some(exit) = self
            .exits_at()
            .filter(|exit| *exit <= now && stop.is_none_or(|stop| *exit <= stop))
        {
            lines.push((
                exit,
                format!(
                    "[orca-sim] container {container} exited with code {}",
                    self.behaviour.exit_code
                ),
            ));
        }
        lines
    }
}

fn shutdown_delay_signed(duration: Duration) -> SignedDuration {
    SignedDuration::try_from(duration).unwrap_or(SignedDuration::MAX)
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Ending {
    Terminated,
    SpotInterruption,
    WorkloadExited,
}

impl Ending {
    fn reason(self) -> StateReason {
        let (code, message) = match self {
            Ending::Terminated => ("Client.UserInitiatedShutdown", "User initiated shutdown"),
            Ending::SpotInterruption => (
                "Server.SpotInstanceTermination",
                "Spot instance interrupted by the provider",
            ),
            Ending::WorkloadExited => (
                "Client.InstanceInitiatedShutdown",
                "Instance initiated shutdown",
            ),
        };
        StateReason {
            code: code.to_owned(),
            message: message.to_owned(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const SHUTDOWN: Duration = Duration::from_secs(1);
    const RETENTION: Duration = Duration::from_secs(60);

    fn instance(run_time: Option<u64>) -> SimInstance {
        SimInstance {
            pod: PodKey {
                namespace: "ns".into(),
                name: "p".into(),
                uid: "u".into(),
            },
            instance_id: "i-0sim000000000001".into(),
            instance_type: "m5.large".into(),
            market: Market::OnDemand,
            private_ip: Ipv4Addr::new(10, 200, 0, 1),
            launched_at: Timestamp::from_second(1_000).unwrap(),
            behaviour: Behaviour {
                boot_delay: Duration::from_secs(2),
                run_time: run_time.map(Duration::from_secs),
                exit_code: 3,
                lose_after: None,
                interrupt_after: None,
            },
            terminate_requested_at: None,
            workload: None,
            volumes: Vec::new(),
        }
    }

    fn at(second: i64) -> Timestamp {
        Timestamp::from_second(second).unwrap()
    }

    fn state(instance: &SimInstance, second: i64) -> Option<InstanceStatus> {
        match instance.phase_at(at(second), SHUTDOWN, RETENTION) {
            Phase::Listed(status) => Some(*status),
            Phase::Gone => None,
        }
    }

    #[test]
    fn boots_then_runs_then_exits_with_its_code() {
        let sim = instance(Some(5));
        assert_eq!(state(&sim, 1_001).unwrap().state, InstanceState::Pending);
        let running = state(&sim, 1_003).unwrap();
        assert_eq!(running.state, InstanceState::Running);
        assert_eq!(running.started_at, Some(at(1_002)));
        assert!(running.private_ip.is_some());
        assert_eq!(
            state(&sim, 1_007).unwrap().state,
            InstanceState::ShuttingDown
        );
        let done = state(&sim, 1_008).unwrap();
        assert_eq!(done.state, InstanceState::Terminated);
        assert_eq!(
            done.workload_exit,
            Some(WorkloadExit {
                exit_code: 3,
                finished_at: at(1_007),
                containers: Default::default(),
            })
        );
        assert!(state(&sim, 1_008 + 61).is_none(), "gone after retention");
    }

    #[test]
    fn terminate_before_exit_reports_no_workload_exit() {
        let mut sim = instance(Some(50));
        sim.terminate_requested_at = Some(at(1_010));
        let done = state(&sim, 1_012).unwrap();
        assert_eq!(done.state, InstanceState::Terminated);
        assert_eq!(done.workload_exit, None);
        assert_eq!(
            done.state_reason.unwrap().code,
            "Client.UserInitiatedShutdown"
        );
    }

    #[test]
    fn spot_interruption_is_reported_with_its_state_reason() {
        let mut sim = instance(None);
        sim.behaviour.interrupt_after = Some(Duration::from_secs(4));
        let interrupted = state(&sim, 1_006).unwrap();
        assert_eq!(interrupted.state, InstanceState::Terminated);
        assert_eq!(
            interrupted.state_reason.unwrap().code,
            "Server.SpotInstanceTermination"
        );
    }

    #[test]
    fn lost_instance_is_no_longer_listed() {
        let mut sim = instance(None);
        sim.behaviour.lose_after = Some(Duration::from_secs(3));
        assert!(state(&sim, 1_002).is_some());
        assert!(state(&sim, 1_003).is_none());
    }

    #[test]
    fn logs_show_start_heartbeats_and_exit() {
        let sim = instance(Some(2));
        let lines: Vec<String> = sim
            .log_lines(at(1_010), "main")
            .into_iter()
            .map(|(_, l)| l)
            .collect();
        assert!(lines[1].contains("container main started"), "{lines:?}");
        assert!(lines.iter().any(|l| l == "main: working (2s)"), "{lines:?}");
        assert!(
            lines.last().unwrap().contains("exited with code 3"),
            "{lines:?}"
        );
    }
}
