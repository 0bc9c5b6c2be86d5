//! The decision table, case by case, and the defects of issue 16 that live in decisions.

use std::time::Duration;

use jiff::Timestamp;
use k8s_openapi::api::core::v1::{Container, Pod, PodCondition, PodSpec, PodStatus};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, Time};

use super::*;
use crate::pods::record::Retry;
use crate::provider::plan::Market;
use crate::provider::{InstanceState, Offering, PodKey, StateReason, WorkloadExit};

const SYNC: Duration = Duration::from_secs(5);
const GRACE: Duration = Duration::from_secs(60);

fn at(second: i64) -> Timestamp {
    Timestamp::from_second(1_000_000 + second).unwrap()
}

fn pod(phase: Option<&str>, deleting: bool, launched: Option<(&str, i64)>) -> Pod {
    let mut conditions = Vec::new();
    if let Some((id, second)) = launched {
        conditions.push(PodCondition {
            type_: super::super::view::LAUNCHED_CONDITION.into(),
            status: "True".into(),
            message: Some(id.into()),
            last_transition_time: Some(Time(at(second))),
            ..PodCondition::default()
        });
    }
    Pod {
        metadata: ObjectMeta {
            name: Some("p".into()),
            namespace: Some("ns".into()),
            uid: Some("u".into()),
            resource_version: Some("7".into()),
            deletion_timestamp: deleting.then(|| Time(at(0))),
            ..ObjectMeta::default()
        },
        spec: Some(PodSpec {
            containers: vec![
                Container {
                    name: "main".into(),
                    image: Some("busybox".into()),
                    ..Container::default()
                },
                Container {
                    name: "sidecar".into(),
                    image: Some("busybox".into()),
                    ..Container::default()
                },
            ],
            ..PodSpec::default()
        }),
        status: Some(PodStatus {
            phase: phase.map(str::to_owned),
            conditions: Some(conditions),
            ..PodStatus::default()
        }),
    }
}

fn instance(state: InstanceState) -> InstanceStatus {
    InstanceStatus {
        pod: PodKey {
            namespace: "ns".into(),
            name: "p".into(),
            uid: "u".into(),
        },
        instance_id: "i-1".into(),
        instance_type: "m5.large".into(),
        market: Market::Spot,
        state,
        private_ip: Some("10.0.0.7".parse().unwrap()),
        launched_at: at(0),
        started_at: Some(at(1)),
        state_reason: None,
        workload_exit: None,
        volumes: Vec::new(),
    }
}

fn ended_by(code: &str, state: InstanceState) -> InstanceStatus {
    InstanceStatus {
        state_reason: Some(StateReason {
            code: code.into(),
            message: format!("{code}: something"),
        }),
        ..instance(state)
    }
}

fn exit(code: i32, containers: &[(&str, i32)]) -> WorkloadExit {
    WorkloadExit {
        exit_code: code,
        finished_at: at(30),
        containers: containers
            .iter()
            .map(|(name, code)| ((*name).to_owned(), *code))
            .collect(),
    }
}

struct Case {
    pod: Pod,
    listed: Option<InstanceStatus>,
    record: PodRecord,
    asked: Option<Asked>,
    now: i64,
}

impl Case {
    fn new(pod: Pod) -> Case {
        Case {
            pod,
            listed: None,
            record: PodRecord::default(),
            asked: None,
            now: 10,
        }
    }

    fn listed(mut self, instance: InstanceStatus) -> Case {
        self.listed = Some(instance);
        self
    }

    fn record(mut self, change: impl FnOnce(&mut PodRecord)) -> Case {
        change(&mut self.record);
        self
    }

    fn asked(mut self, answer: Termination, second: i64) -> Case {
        self.asked = Some(Asked {
            answer,
            at: at(second),
        });
        self
    }

    fn now(mut self, second: i64) -> Case {
        self.now = second;
        self
    }

    fn decide(&self) -> Step {
        let view = PodView::of(&self.pod).unwrap();
        decide(&Observation {
            pod: &view,
            listed: self.listed.as_ref(),
            record: &self.record,
            asked: self.asked,
            now: at(self.now),
            timing: Timing {
                sync: SYNC,
                grace: GRACE,
            },
        })
    }
}

fn answered(id: &str, second: i64) -> Launch {
    Launch::Answered {
        launch: LaunchRef {
            instance_id: id.into(),
            at: at(second),
        },
        offering: Offering {
            instance_type: "m5.large".into(),
            market: Market::OnDemand,
        },
    }
}

fn written(step: &Step) -> &PodStatus {
    match step {
        Step::Write(write) => &write.status,
        other => panic!("expected a status write, got {other:?}"),
    }
}

fn terminated_code(status: &PodStatus, container: &str) -> i32 {
    status
        .container_statuses
        .as_ref()
        .unwrap()
        .iter()
        .find(|c| c.name == container)
        .and_then(|c| c.state.as_ref()?.terminated.as_ref())
        .map(|t| t.exit_code)
        .unwrap()
}

fn terminate(id: &str) -> Step {
    Step::Terminate {
        instance_id: id.into(),
    }
}

// --- defect 1: a pod deleted inside EC2's visibility lag ---

#[test]
fn a_pod_deleted_before_ec2_lists_its_instance_has_it_terminated_by_id() {
    let case =
        Case::new(pod(Some("Pending"), true, None)).record(|r| r.launch = answered("i-new", 8));
    assert_eq!(case.decide(), terminate("i-new"));
}

#[test]
fn an_id_ec2_does_not_know_yet_is_asked_again_not_taken_for_done() {
    let case = Case::new(pod(Some("Pending"), true, None))
        .record(|r| r.launch = answered("i-new", 8))
        .asked(Termination::Unknown, 9)
        .now(10);
    assert!(matches!(case.decide(), Step::Wait(Some(_))));
    let later = Case::new(pod(Some("Pending"), true, None))
        .record(|r| r.launch = answered("i-new", 8))
        .asked(Termination::Unknown, 9)
        .now(20);
    assert_eq!(later.decide(), terminate("i-new"));
}

#[test]
fn once_ec2_accepted_the_termination_the_pod_is_removed() {
    let case = Case::new(pod(Some("Pending"), true, None))
        .record(|r| r.launch = answered("i-new", 8))
        .asked(Termination::Requested, 9);
    assert_eq!(case.decide(), Step::RemovePod);
    let listed = Case::new(pod(Some("Running"), true, None))
        .listed(instance(InstanceState::Running))
        .asked(Termination::Requested, 9);
    assert_eq!(listed.decide(), Step::RemovePod);
}

#[test]
fn an_id_unknown_long_after_its_launch_is_gone() {
    let case = Case::new(pod(Some("Running"), true, Some(("i-old", 0))))
        .asked(Termination::Unknown, 100)
        .now(101);
    assert_eq!(case.decide(), Step::RemovePod);
}

#[test]
fn after_a_restart_a_deleted_pod_terminates_the_instance_its_status_names() {
    let case = Case::new(pod(Some("Pending"), true, Some(("i-durable", 5))));
    assert_eq!(case.decide(), terminate("i-durable"));
}

#[test]
fn a_launch_in_doubt_holds_the_deletion_within_the_grace_only() {
    let doubt = |now| {
        Case::new(pod(Some("Pending"), true, None))
            .record(|r| r.launch = Launch::InDoubt { since: at(5) })
            .now(now)
            .decide()
    };
    assert!(matches!(doubt(10), Step::Wait(Some(_))));
    assert_eq!(doubt(5 + GRACE.as_secs() as i64), Step::RemovePod);
}

// --- defect 2: stopped instances ---

#[test]
fn a_stopped_instance_fails_its_pod_with_a_precise_reason() {
    let case = Case::new(pod(Some("Running"), false, None)).listed(ended_by(
        "Client.UserInitiatedShutdown",
        InstanceState::Stopped,
    ));
    let status = written(&case.decide()).clone();
    assert_eq!(status.phase.as_deref(), Some("Failed"));
    assert_eq!(status.reason.as_deref(), Some("InstanceStopped"));
    assert!(
        status.message.as_deref().unwrap().contains("was stopped"),
        "{status:?}"
    );
}

#[test]
fn an_instance_stopped_after_its_workload_reported_is_read_like_one_that_shut_down() {
    let mut stopped = ended_by("Client.UserInitiatedShutdown", InstanceState::Stopped);
    stopped.workload_exit = Some(exit(0, &[]));
    let case = Case::new(pod(Some("Running"), false, None)).listed(stopped.clone());
    assert!(
        matches!(case.decide(), Step::ReadExit { .. }),
        "the exit report (each container's code) is read first"
    );
    let read = Case::new(pod(Some("Running"), false, None))
        .listed(stopped)
        .record(|r| {
            r.exit = ExitReport::Read {
                exit: Some(exit(0, &[("main", 0)])),
                first: at(30),
                last: at(30),
            };
        });
    assert_eq!(written(&read.decide()).phase.as_deref(), Some("Succeeded"));
}

#[test]
fn a_stopped_instance_is_terminated_for_a_finished_or_deleted_pod() {
    for (phase, deleting) in [("Failed", false), ("Running", true)] {
        let case =
            Case::new(pod(Some(phase), deleting, None)).listed(instance(InstanceState::Stopped));
        assert_eq!(
            case.decide(),
            terminate("i-1"),
            "{phase} deleting={deleting}"
        );
    }
}

#[test]
fn an_instance_that_shows_up_for_a_failed_pod_is_terminated() {
    let case = Case::new(pod(Some("Failed"), false, None)).listed(instance(InstanceState::Pending));
    assert_eq!(case.decide(), terminate("i-1"));
}

#[test]
fn a_termination_is_asked_again_when_the_instance_stays() {
    let case = Case::new(pod(Some("Failed"), false, None))
        .listed(instance(InstanceState::Running))
        .asked(Termination::Requested, 8);
    assert!(matches!(case.decide(), Step::Wait(Some(_))));
    let later = Case::new(pod(Some("Failed"), false, None))
        .listed(instance(InstanceState::Running))
        .asked(Termination::Requested, 8)
        .now(8 + 2 * SYNC.as_secs() as i64);
    assert_eq!(later.decide(), terminate("i-1"));
}

// --- defect 4: a lost answer ---

#[test]
fn a_launch_whose_answer_was_lost_is_sent_again() {
    let case = Case::new(pod(Some("Pending"), false, None))
        .record(|r| r.launch = Launch::InDoubt { since: at(5) });
    assert_eq!(case.decide(), Step::Launch);
}

// --- issue 17: one status write per pod whose instance runs at once ---

#[test]
fn a_pod_whose_removal_was_accepted_is_not_removed_again() {
    let case = Case::new(pod(Some("Running"), true, None))
        .listed(instance(InstanceState::Terminated))
        .record(|r| r.removed = true);
    assert_eq!(case.decide(), Step::Wait(None));
    let before =
        Case::new(pod(Some("Running"), true, None)).listed(instance(InstanceState::Terminated));
    assert_eq!(before.decide(), Step::RemovePod);
}

#[test]
fn a_fresh_launch_writes_no_pending_status_before_a_listing_had_its_chance() {
    let case = Case::new(pod(Some("Pending"), false, None))
        .record(|r| r.launch = answered("i-new", 10))
        .now(10);
    assert_eq!(case.decide(), Step::Wait(Some(SYNC)));
}

#[test]
fn a_launch_no_listing_showed_within_a_sync_period_is_named_in_a_pending_status() {
    let case = Case::new(pod(Some("Pending"), false, None))
        .record(|r| r.launch = answered("i-new", 10))
        .now(10 + SYNC.as_secs() as i64);
    let status = written(&case.decide()).clone();
    assert_eq!(status.phase.as_deref(), Some("Pending"));
    assert_eq!(
        status.message.as_deref(),
        Some("launching a m5.large on-demand instance i-new")
    );
    let launched = status
        .conditions
        .iter()
        .flatten()
        .find(|c| c.type_ == super::super::view::LAUNCHED_CONDITION)
        .and_then(|c| c.message.as_deref());
    assert_eq!(
        launched,
        Some("i-new"),
        "a restarted orca finds it by the status"
    );
}

#[test]
fn a_launch_the_first_listing_shows_running_is_written_running_directly() {
    let case = Case::new(pod(Some("Pending"), false, None))
        .record(|r| r.launch = answered("i-1", 10))
        .listed(instance(InstanceState::Running))
        .now(10);
    assert_eq!(written(&case.decide()).phase.as_deref(), Some("Running"));
}

#[test]
fn an_unwritten_decision_is_written_even_when_the_status_is_unchanged() {
    let running =
        Case::new(pod(Some("Running"), false, None)).listed(instance(InstanceState::Running));
    let status = written(&running.decide()).clone();
    let mut settled = pod(Some("Running"), false, None);
    settled.status = Some(status);
    let unchanged = Case::new(settled.clone()).listed(instance(InstanceState::Running));
    assert_eq!(unchanged.decide(), Step::Wait(None));
    let decided = Case::new(settled)
        .listed(instance(InstanceState::Running))
        .record(|r| r.decision = Some("{}".into()));
    assert!(matches!(decided.decide(), Step::Write(_)));
}

// --- defect 5: one listing that misses an instance ---

#[test]
fn an_unlisted_instance_is_waited_for_within_the_grace() {
    let case = Case::new(pod(Some("Running"), false, Some(("i-1", 0))))
        .record(|r| r.last_listed = Some(at(30)))
        .now(40);
    assert!(matches!(case.decide(), Step::Wait(Some(_))));
}

#[test]
fn after_a_restart_the_launch_grace_comes_from_the_pods_status() {
    // Nothing in memory; the status says i-1 was launched 5 s ago.
    let case = Case::new(pod(Some("Pending"), false, Some(("i-1", 5)))).now(10);
    assert!(matches!(case.decide(), Step::Wait(Some(_))));
}

#[test]
fn past_the_grace_the_instance_is_looked_up_by_id_before_the_pod_is_lost() {
    let missing = GRACE.as_secs() as i64 + 40;
    let case = Case::new(pod(Some("Running"), false, Some(("i-1", 0))))
        .record(|r| r.last_listed = Some(at(30)))
        .now(missing);
    assert_eq!(
        case.decide(),
        Step::LookUp {
            instance_id: "i-1".into()
        }
    );
    let found = Case::new(pod(Some("Running"), false, Some(("i-1", 0))))
        .record(|r| {
            r.last_listed = Some(at(30));
            r.looked_up = Some(Box::new(instance(InstanceState::Running)));
        })
        .now(missing);
    match found.decide() {
        Step::Write(write) => assert_eq!(write.status.phase.as_deref(), Some("Running")),
        other => panic!("found by id: mirrored, got {other:?}"),
    }
    let lost = Case::new(pod(Some("Running"), false, Some(("i-1", 0))))
        .record(|r| {
            r.last_listed = Some(at(30));
            r.lookup_missed = Some(at(missing));
        })
        .now(missing);
    let status = written(&lost.decide()).clone();
    assert_eq!(status.reason.as_deref(), Some("InstanceLost"));
}

#[test]
fn a_lookup_that_missed_before_the_grace_does_not_lose_the_pod() {
    let case = Case::new(pod(Some("Running"), false, Some(("i-1", 0))))
        .record(|r| {
            r.last_listed = Some(at(30));
            r.lookup_missed = Some(at(31));
        })
        .now(30 + GRACE.as_secs() as i64 + 1);
    assert!(matches!(case.decide(), Step::LookUp { .. }));
}

// --- defect 6: exit codes and interruptions ---

#[test]
fn a_spot_interruption_wins_over_the_exit_code_it_caused() {
    let mut interrupted = ended_by(StateReason::SPOT_INTERRUPTION, InstanceState::Terminated);
    interrupted.workload_exit = Some(exit(143, &[]));
    let case = Case::new(pod(Some("Running"), false, None)).listed(interrupted);
    let status = written(&case.decide()).clone();
    assert_eq!(status.reason.as_deref(), Some("SpotInterrupted"));
    assert!(status.message.as_deref().unwrap().contains("code 143"));
    let mut completed = ended_by(StateReason::SPOT_INTERRUPTION, InstanceState::Terminated);
    completed.workload_exit = Some(exit(0, &[]));
    let case = Case::new(pod(Some("Running"), false, None)).listed(completed);
    assert_eq!(
        written(&case.decide()).reason.as_deref(),
        Some("SpotInterrupted")
    );
}

#[test]
fn the_exit_report_is_read_before_a_pod_is_final() {
    let ended = ended_by(
        StateReason::INSTANCE_INITIATED_SHUTDOWN,
        InstanceState::Terminated,
    );
    let case = Case::new(pod(Some("Running"), false, None)).listed(ended.clone());
    assert!(matches!(case.decide(), Step::ReadExit { .. }));
}

#[test]
fn each_container_gets_its_own_exit_code() {
    let ended = ended_by(
        StateReason::INSTANCE_INITIATED_SHUTDOWN,
        InstanceState::Terminated,
    );
    let case = Case::new(pod(Some("Running"), false, None))
        .listed(ended)
        .record(|r| {
            r.exit = ExitReport::NotRead.read(Some(exit(3, &[("main", 3), ("sidecar", 0)])), at(9))
        });
    let status = written(&case.decide()).clone();
    assert_eq!(status.phase.as_deref(), Some("Failed"));
    assert_eq!(terminated_code(&status, "main"), 3);
    assert_eq!(terminated_code(&status, "sidecar"), 0);
}

#[test]
fn a_report_not_there_yet_is_waited_for_within_the_grace() {
    let ended = ended_by(
        StateReason::INSTANCE_INITIATED_SHUTDOWN,
        InstanceState::Terminated,
    );
    let read_at = |first, last| ExitReport::Read {
        exit: None,
        first: at(first),
        last: at(last),
    };
    let waiting = Case::new(pod(Some("Running"), false, None))
        .listed(ended.clone())
        .record(|r| r.exit = read_at(9, 9))
        .now(10);
    assert!(matches!(waiting.decide(), Step::Wait(Some(_))));
    let again = Case::new(pod(Some("Running"), false, None))
        .listed(ended.clone())
        .record(|r| r.exit = read_at(9, 9))
        .now(9 + SYNC.as_secs() as i64);
    assert!(matches!(again.decide(), Step::ReadExit { .. }));
    let given_up = Case::new(pod(Some("Running"), false, None))
        .listed(ended)
        .record(|r| r.exit = read_at(9, 60))
        .now(9 + GRACE.as_secs() as i64);
    let status = written(&given_up.decide()).clone();
    assert_eq!(status.reason.as_deref(), Some("InstanceTerminated"));
    assert!(status.message.as_deref().unwrap().contains("reported"));
}

#[test]
fn an_instance_terminated_by_someone_fails_its_pod_at_once() {
    let ended = ended_by("Client.UserInitiatedShutdown", InstanceState::Terminated);
    let case = Case::new(pod(Some("Running"), false, None))
        .listed(ended)
        .record(|r| r.exit = ExitReport::NotRead.read(None, at(9)));
    assert_eq!(
        written(&case.decide()).reason.as_deref(),
        Some("InstanceTerminated")
    );
}

// --- defect 8: backoff ---

#[test]
fn a_pod_whose_last_step_failed_waits_for_its_backoff() {
    let case = Case::new(pod(Some("Failed"), false, None))
        .listed(instance(InstanceState::Running))
        .record(|r| {
            r.retry = Retry {
                failures: 3,
                due: Some(at(14)),
            }
        });
    assert_eq!(case.decide(), Step::Wait(Some(Duration::from_secs(4))));
}

// --- the plain path ---

#[test]
fn a_new_pod_is_launched_then_mirrored() {
    assert_eq!(Case::new(pod(None, false, None)).decide(), Step::Launch);
    let running =
        Case::new(pod(Some("Pending"), false, None)).listed(instance(InstanceState::Running));
    match running.decide() {
        Step::Write(write) => {
            assert_eq!(write.status.phase.as_deref(), Some("Running"));
            assert_eq!(write.event.unwrap().reason, "InstanceRunning");
        }
        other => panic!("{other:?}"),
    }
}

#[test]
fn a_status_already_written_is_not_written_again() {
    let mut current = pod(Some("Pending"), false, None);
    let desired = status::status_for_instance(&current, &instance(InstanceState::Running), None);
    current.status = Some(desired);
    let case = Case::new(current).listed(instance(InstanceState::Running));
    assert_eq!(case.decide(), Step::Wait(None));
}

// --- volumes: attached once the instance runs, and only once ---

fn with_volume(state: InstanceState, attached: bool) -> InstanceStatus {
    InstanceStatus {
        volumes: vec![crate::provider::VolumeAttachment {
            volume_id: "vol-1".into(),
            device: "/dev/sdf".into(),
            attached,
        }],
        ..instance(state)
    }
}

#[test]
fn a_running_instance_gets_its_volumes_attached_and_its_pod_waits_for_them() {
    let running = Case::new(pod(Some("Pending"), false, None))
        .listed(with_volume(InstanceState::Running, false));
    match running.decide() {
        Step::Attach { instance } => assert_eq!(instance.volumes_to_attach().count(), 1),
        other => panic!("expected the volume attached, got {other:?}"),
    }
    // Booting: EC2 would refuse; the pod's status says it is booting.
    let booting = Case::new(pod(Some("Pending"), false, None))
        .listed(with_volume(InstanceState::Pending, false));
    assert_eq!(written(&booting.decide()).phase.as_deref(), Some("Pending"));
    // Attached by this process, the listing not showing it yet: not asked again; the pod
    // waits (Pending, naming the volume) until a listing shows it.
    let asked = Case::new(pod(Some("Pending"), false, None))
        .listed(with_volume(InstanceState::Running, false))
        .record(|record| record.attached.push("vol-1".into()));
    let status = written(&asked.decide()).clone();
    assert_eq!(status.phase.as_deref(), Some("Pending"));
    assert!(
        status
            .message
            .as_deref()
            .unwrap()
            .contains("waits for volumes to attach: vol-1 at /dev/sdf"),
        "{status:?}"
    );
    let shown = Case::new(pod(Some("Pending"), false, None))
        .listed(with_volume(InstanceState::Running, true));
    assert_eq!(written(&shown.decide()).phase.as_deref(), Some("Running"));
    // A refused attach backs off like any failed step: no hot loop.
    let refused = Case::new(pod(Some("Pending"), false, None))
        .listed(with_volume(InstanceState::Running, false))
        .record(|record| {
            record.retry = Retry {
                failures: 3,
                due: Some(at(14)),
            }
        });
    assert_eq!(refused.decide(), Step::Wait(Some(Duration::from_secs(4))));
}
