use super::*;
use crate::{EXIT_CODE_TAG, Ending, InterruptionNotice, StateReason, WorkloadEnd};

fn reclaiming(trap_probability: f64) -> Behaviour {
    let mut behaviour = Behaviour::calm();
    behaviour.interruption_notice = exactly(2_000);
    behaviour.shutdown = exactly(1_000);
    behaviour.interrupted_workload_exits = trap_probability;
    behaviour
}

#[test]
fn a_spot_interruption_shuts_the_instance_down_after_the_notice_and_the_trap_records_143() {
    let model = Ec2Model::new(70, reclaiming(1.0));
    let id = must_launch(&model, at(0), &spot("pod-a")).instance_id;
    let notice = model.interrupt_spot(at(5_000), &id);
    let expected = InterruptionNotice {
        instance_id: id.clone(),
        issued_at: at(5_000),
        terminates_at: at(7_000),
    };
    assert_eq!(notice, Some(expected.clone()));
    assert_eq!(model.take_notices(), vec![expected]);
    assert_eq!(model.take_notices(), vec![], "a notice is taken once");

    assert_eq!(
        described_state(&model, at(6_999), &id),
        Some(State::Running)
    );
    let down = model
        .describe_instances(at(7_000), &[Filter::new("instance-id", [id.as_str()])])
        .unwrap_or_default();
    assert_eq!(down[0].state, State::ShuttingDown);
    assert_eq!(
        down[0].state_reason,
        Some(StateReason::spot_instance_termination())
    );
    assert_eq!(
        StateReason::spot_instance_termination().message,
        "Server.SpotInstanceTermination: Spot instance termination"
    );
    assert_eq!(
        down[0].tags.get(EXIT_CODE_TAG).map(String::as_str),
        Some("143")
    );
    let console = model
        .get_console_output(at(7_000), &id)
        .ok()
        .flatten()
        .unwrap_or_default();
    assert!(console.ends_with("orca-exit-code=143\n"));
    assert!(
        model
            .get_console_output(at(6_999), &id)
            .ok()
            .flatten()
            .is_some_and(|c| !c.contains("143"))
    );
    assert_eq!(
        described_state(&model, at(8_000), &id),
        Some(State::Terminated)
    );

    let history = history_of(&model, &id);
    assert_eq!(
        history.ending,
        Some(Ending::Interrupted {
            at: at(7_000),
            workload_exit: Some(143)
        })
    );
    assert_eq!(history.terminated_at, Some(at(8_000)));
}

#[test]
fn without_the_trap_an_interruption_leaves_no_exit_code() {
    let model = Ec2Model::new(71, reclaiming(0.0));
    let id = must_launch(&model, at(0), &spot("pod-a")).instance_id;
    assert!(model.interrupt_spot(at(1_000), &id).is_some());
    let history = history_of(&model, &id);
    assert_eq!(
        history.ending,
        Some(Ending::Interrupted {
            at: at(3_000),
            workload_exit: None
        })
    );
    assert_eq!(history.tags.get(EXIT_CODE_TAG), None);
}

#[test]
fn only_a_running_spot_instance_can_be_interrupted_and_only_once() {
    let mut behaviour = reclaiming(1.0);
    behaviour.boot = exactly(1_000);
    let model = Ec2Model::new(72, behaviour);
    let on_demand = must_launch(&model, at(0), &launch("pod-a")).instance_id;
    let spot_id = must_launch(&model, at(0), &spot("pod-b")).instance_id;
    assert_eq!(model.interrupt_spot(at(2_000), &on_demand), None);
    assert_eq!(
        model.interrupt_spot(at(500), &spot_id),
        None,
        "still pending"
    );
    assert_eq!(model.interrupt_spot(at(2_000), "i-nonsense"), None);
    assert!(model.interrupt_spot(at(2_000), &spot_id).is_some());
    assert_eq!(
        model.interrupt_spot(at(2_500), &spot_id),
        None,
        "already being reclaimed"
    );
    assert_eq!(model.take_notices().len(), 1);
}

#[test]
fn a_workload_that_completes_during_the_notice_wins() {
    let model = Ec2Model::new(73, reclaiming(1.0));
    let id = must_launch(&model, at(0), &spot("pod-a")).instance_id;
    assert!(model.interrupt_spot(at(1_000), &id).is_some());
    let end = WorkloadEnd {
        pod_exit_code: 0,
        containers: vec![],
        finished_at: at(2_000),
    };
    assert!(model.complete_workload(at(2_000), &id, &end));
    let history = history_of(&model, &id);
    assert!(matches!(
        history.ending,
        Some(Ending::Completed {
            pod_exit_code: 0,
            ..
        })
    ));
    assert_eq!(
        history.tags.get(EXIT_CODE_TAG).map(String::as_str),
        Some("0")
    );
    let reason = history
        .transitions
        .last()
        .and_then(|(_, _, reason)| reason.clone());
    assert_eq!(reason, Some(StateReason::instance_initiated_shutdown()));
}

#[test]
fn a_client_termination_during_the_notice_is_the_ending() {
    let model = Ec2Model::new(74, reclaiming(1.0));
    let id = must_launch(&model, at(0), &spot("pod-a")).instance_id;
    assert!(model.interrupt_spot(at(1_000), &id).is_some());
    assert!(model.terminate_instances(at(1_500), &ids(&[&id])).is_ok());
    let history = history_of(&model, &id);
    assert_eq!(
        history.ending,
        Some(Ending::TerminatedByClient { at: at(1_500) })
    );
    assert_eq!(
        history.tags.get(EXIT_CODE_TAG),
        None,
        "the trap never fired"
    );
}
