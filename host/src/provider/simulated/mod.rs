//! The `simulated` provider: instances that live in orca's process (and optionally a journal
//! file), with configurable boot delay, run time, exit code, and injected faults. It is the
//! provider for demos, tests and scale runs, as SimKube uses a mock node.

mod behaviour;
mod exec;
mod instance;
mod journal;

use std::collections::HashMap;
use std::net::Ipv4Addr;
use std::sync::Mutex;

use async_trait::async_trait;
use jiff::Timestamp;

pub use behaviour::ANNOTATION_PREFIX;
use behaviour::{Behaviour, LaunchFault};
use instance::{Phase, SimInstance, SimVolume};
pub use journal::JournalError;
use journal::{Journal, Record};

use super::{
    Attached, ErrorClass, ExecOutcome, ExecRequest, InstanceState, InstanceStatus, LaunchFailed,
    LaunchRequest, Launched, LogLine, LogPage, LogStart, Offering, PodKey, Provider, ProviderError,
    Termination, WorkloadExit,
};
use crate::config::SimulatedConfig;
use crate::support::errors::lock;
use crate::workload::WorkloadSpec;

/// In-process instances, one per pod UID.
pub struct SimulatedProvider {
    settings: SimulatedConfig,
    state: Mutex<State>,
}

struct State {
    instances: HashMap<String, SimInstance>,
    launch_attempts: HashMap<String, u32>,
    next_serial: u64,
    journal: Option<Journal>,
}

impl SimulatedProvider {
    /// A provider with the given defaults; with `state_file`, instances launched by an earlier
    /// orca process are loaded from it.
    ///
    /// # Errors
    /// [`JournalError`] when the state file cannot be read or written.
    pub fn new(settings: SimulatedConfig) -> Result<SimulatedProvider, JournalError> {
        let (journal, instances) = match &settings.state_file {
            Some(path) => {
                let (journal, instances) = Journal::open(path)?;
                (Some(journal), instances)
            }
            None => (None, HashMap::new()),
        };
        let next_serial = instances
            .values()
            .filter_map(|instance| {
                u64::from_str_radix(instance.instance_id.trim_start_matches("i-0sim"), 16).ok()
            })
            .max()
            .map_or(1, |max| max + 1);
        Ok(SimulatedProvider {
            settings,
            state: Mutex::new(State {
                instances,
                launch_attempts: HashMap::new(),
                next_serial,
                journal,
            }),
        })
    }

    /// What the pod's instance was launched to run, as its [`LaunchRequest`] had it: the
    /// resolved environment and volumes a test asserts on. `None`: no instance, or one
    /// journalled before instances kept it.
    pub fn workload_of(&self, uid: &str) -> Option<WorkloadSpec> {
        lock(&self.state).instances.get(uid)?.workload.clone()
    }

    fn phase(&self, instance: &SimInstance, now: Timestamp) -> Phase {
        instance.phase_at(
            now,
            self.settings.shutdown_delay.get(),
            self.settings.terminated_retention.get(),
        )
    }
}

impl State {
    fn record(&mut self, record: Record) -> Result<(), ProviderError> {
        if let Some(journal) = &mut self.journal {
            journal.append(&record).map_err(|error| {
                ProviderError::transient("JournalWriteFailed", format!("{error:#}"))
            })?;
        }
        journal::apply(&mut self.instances, record);
        Ok(())
    }
}

fn injected(fault: LaunchFault, attempt: u32) -> Option<ProviderError> {
    if attempt > fault.times {
        return None;
    }
    let detail = format!("injected by {ANNOTATION_PREFIX}launch-error (attempt {attempt})");
    Some(match fault.class {
        ErrorClass::Capacity => ProviderError::capacity(
            "InsufficientInstanceCapacity",
            format!(
                "We currently do not have sufficient capacity in the requested Availability Zone; {detail}"
            ),
        ),
        ErrorClass::Transient => ProviderError::transient(
            "RequestLimitExceeded",
            format!("Request limit exceeded; {detail}"),
        ),
        ErrorClass::Permanent => ProviderError::permanent(
            "UnauthorizedOperation",
            format!("You are not authorized to perform this operation; {detail}"),
        ),
        ErrorClass::InvalidAnnotation => ProviderError::invalid_annotation(detail),
        ErrorClass::AlreadyEnded => ProviderError::already_ended(
            "IdempotentInstanceTerminated",
            format!("the instance launched for this pod has already terminated; {detail}"),
        ),
    })
}

#[async_trait]
impl Provider for SimulatedProvider {
    async fn create(&self, request: &LaunchRequest) -> Result<Launched, LaunchFailed> {
        let (key, plan) = (&request.pod, &request.plan);
        let (behaviour, fault) = Behaviour::resolve(&self.settings, &request.annotations)?;
        let candidate = plan.candidates.first().ok_or_else(|| {
            ProviderError::permanent("NoInstanceType", "the launch plan has no instance type")
        })?;
        let offering = Offering {
            instance_type: candidate.instance_type.clone(),
            market: plan.market.market,
        };
        let mut state = lock(&self.state);
        // Idempotent per pod UID, like EC2's ClientToken.
        if let Some(existing) = state.instances.get(&key.uid) {
            return Ok(Launched {
                instance_id: existing.instance_id.clone(),
                offering,
                adopted: true,
                passed_over: Vec::new(),
                chosen_by: None,
                zone: None,
                volumes: existing.volumes.iter().map(SimVolume::planned).collect(),
            });
        }
        let attempt = {
            let attempts = state.launch_attempts.entry(key.uid.clone()).or_insert(0);
            *attempts += 1;
            *attempts
        };
        if let Some(error) = fault.and_then(|fault| injected(fault, attempt)) {
            return Err(error.into());
        }
        let volumes: Vec<SimVolume> =
            crate::provider::aws::workload::attachments(&request.workload)
                .map_err(|error| ProviderError::permanent("UnsupportedPodSpec", error.to_string()))?
                .into_iter()
                .map(|attachment| SimVolume {
                    device: attachment.device(),
                    volume_id: attachment.volume_id,
                    attached_at: None,
                })
                .collect();
        let serial = state.next_serial;
        state.next_serial += 1;
        let instance_id = format!("i-0sim{serial:012x}");
        let instance = SimInstance {
            instance_id: instance_id.clone(),
            instance_type: offering.instance_type.clone(),
            market: offering.market,
            private_ip: Ipv4Addr::from(
                u32::from(Ipv4Addr::new(10, 200, 0, 0)) + (serial as u32 & 0xffff),
            ),
            launched_at: Timestamp::now(),
            behaviour,
            terminate_requested_at: None,
            pod: key.clone(),
            workload: Some(request.workload.clone()),
            volumes: volumes.clone(),
        };
        state.launch_attempts.remove(&key.uid);
        crate::support::heap::shrink_when_sparse(&mut state.launch_attempts);
        state.record(Record::Launch(Box::new(instance)))?;
        Ok(Launched {
            instance_id,
            offering,
            adopted: false,
            passed_over: Vec::new(),
            chosen_by: None,
            zone: None,
            volumes: volumes.iter().map(SimVolume::planned).collect(),
        })
    }

    async fn terminate(&self, instance_id: &str) -> Result<Termination, ProviderError> {
        let mut state = lock(&self.state);
        let Some((uid, instance)) = state
            .instances
            .iter()
            .find(|(_, instance)| instance.instance_id == instance_id)
        else {
            return Ok(Termination::Unknown);
        };
        if instance.terminate_requested_at.is_none() {
            let uid = uid.clone();
            state.record(Record::Terminate {
                uid,
                at: Timestamp::now(),
            })?;
        }
        Ok(Termination::Requested)
    }

    async fn lookup(
        &self,
        _pod: &PodKey,
        instance_id: &str,
    ) -> Result<Option<InstanceStatus>, ProviderError> {
        let state = lock(&self.state);
        let now = Timestamp::now();
        Ok(state
            .instances
            .values()
            .filter(|instance| instance.instance_id == instance_id)
            .find_map(|instance| match self.phase(instance, now) {
                Phase::Listed(status) => Some(*status),
                Phase::Gone => None,
            }))
    }

    async fn workload_exit(
        &self,
        instance: &InstanceStatus,
    ) -> Result<Option<WorkloadExit>, ProviderError> {
        // The simulated bootstrap reports at once, for every container alike.
        Ok(instance.workload_exit.clone())
    }

    async fn statuses(&self) -> Result<Vec<InstanceStatus>, ProviderError> {
        let now = Timestamp::now();
        let mut state = lock(&self.state);
        let mut listed = Vec::with_capacity(state.instances.len());
        let mut gone = Vec::new();
        for (uid, instance) in &state.instances {
            match self.phase(instance, now) {
                Phase::Listed(status) => listed.push(*status),
                Phase::Gone => gone.push(uid.clone()),
            }
        }
        for uid in gone {
            state.record(Record::Forget { uid })?;
        }
        Ok(listed)
    }

    async fn log_page(
        &self,
        pod: &PodKey,
        container: &str,
        start: &LogStart,
    ) -> Result<LogPage, ProviderError> {
        let state = lock(&self.state);
        let instance = state.instances.get(&pod.uid).ok_or_else(|| {
            ProviderError::permanent("InstanceNotFound", format!("no instance for pod {pod}"))
        })?;
        let lines = instance
            .log_lines(Timestamp::now(), container)
            .into_iter()
            .map(LogLine::from)
            .collect();
        Ok(LogPage::of_whole(lines, start))
    }

    /// Attaches as EBS does: only to a running instance, and a volume another live instance
    /// holds is refused until that one has ended.
    async fn attach(&self, instance: &InstanceStatus) -> Result<Vec<Attached>, ProviderError> {
        let now = Timestamp::now();
        let mut state = lock(&self.state);
        let mut attached = Vec::new();
        for volume in instance.volumes_to_attach() {
            let holders: Vec<String> = state
                .instances
                .values()
                .filter(|other| other.instance_id != instance.instance_id)
                .filter_map(|other| match self.phase(other, now) {
                    Phase::Listed(status) => status
                        .volumes
                        .iter()
                        .any(|v| v.volume_id == volume.volume_id && v.attached)
                        .then(|| other.instance_id.clone()),
                    Phase::Gone => None,
                })
                .collect();
            if !holders.is_empty() {
                return Err(ProviderError::transient(
                    "VolumeInUse",
                    format!(
                        "volume {} is attached to instance {}",
                        volume.volume_id,
                        holders.join(", ")
                    ),
                ));
            }
            let Some(uid) = state
                .instances
                .iter()
                .find(|(_, sim)| sim.instance_id == instance.instance_id)
                .map(|(uid, _)| uid.clone())
            else {
                return Err(ProviderError::transient(
                    "InstanceNotFound",
                    format!("no instance {}", instance.instance_id),
                ));
            };
            state.record(Record::Attach {
                uid,
                volume_id: volume.volume_id.clone(),
                at: now,
            })?;
            attached.push(Attached {
                volume_id: volume.volume_id.clone(),
                device: volume.device.clone(),
                instance_id: instance.instance_id.clone(),
            });
        }
        Ok(attached)
    }

    /// Runs the command as the simulated container would ([`exec::run`]), on a running
    /// instance only, and journals it.
    async fn exec(
        &self,
        pod: &PodKey,
        request: &ExecRequest,
    ) -> Result<ExecOutcome, ProviderError> {
        let now = Timestamp::now();
        let mut state = lock(&self.state);
        let instance = state.instances.get(&pod.uid).ok_or_else(|| {
            ProviderError::permanent("InstanceNotFound", format!("no instance for pod {pod}"))
        })?;
        match self.phase(instance, now) {
            Phase::Listed(status) if status.state == InstanceState::Running => {}
            Phase::Listed(status) => {
                return Err(ProviderError::permanent(
                    "InstanceNotRunning",
                    format!(
                        "pod {pod}'s instance {} is {:?}, not running",
                        instance.instance_id, status.state
                    ),
                ));
            }
            Phase::Gone => {
                return Err(ProviderError::permanent(
                    "InstanceNotFound",
                    format!("pod {pod}'s instance {} is gone", instance.instance_id),
                ));
            }
        }
        let outcome = exec::run(&instance.instance_id, request);
        state.record(Record::Exec {
            uid: pod.uid.clone(),
            container: request.container.clone(),
            command: request.command.clone(),
            exit_code: outcome.exit_code,
            at: now,
        })?;
        Ok(outcome)
    }

    async fn ping(&self) -> Result<(), ProviderError> {
        match &self.settings.outage_file {
            Some(path) if path.exists() => Err(ProviderError::transient(
                "ProviderUnavailable",
                format!("simulated outage: {} exists", path.display()),
            )),
            _ => Ok(()),
        }
    }
}

#[cfg(test)]
mod tests;
