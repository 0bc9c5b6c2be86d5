use super::*;
use crate::{Ending, StateReason, WorkloadEnd, code};

#[test]
fn someone_else_stopping_an_instance_is_its_ending_for_good() {
    let mut behaviour = Behaviour::calm();
    behaviour.shutdown = exactly(1_000);
    let model = Ec2Model::new(80, behaviour);
    let id = must_launch(&model, at(0), &launch("pod-a")).instance_id;
    assert!(model.stop_by_someone(at(5_000), &id));
    assert_eq!(
        described_state(&model, at(5_500), &id),
        Some(State::Stopping)
    );
    assert_eq!(
        described_state(&model, at(6_000), &id),
        Some(State::Stopped)
    );

    let end = WorkloadEnd {
        pod_exit_code: 0,
        containers: vec![],
        finished_at: at(7_000),
    };
    assert!(
        !model.complete_workload(at(7_000), &id, &end),
        "a stopped instance runs nothing"
    );

    // A stopped instance can be terminated; the ending stays Stopped.
    let changes = model
        .terminate_instances(at(8_000), &ids(&[&id]))
        .unwrap_or_default();
    assert_eq!(
        (changes[0].previous, changes[0].current),
        (State::Stopped, State::ShuttingDown)
    );
    assert_eq!(
        described_state(&model, at(9_000), &id),
        Some(State::Terminated)
    );
    let history = history_of(&model, &id);
    assert_eq!(history.ending, Some(Ending::Stopped { at: at(5_000) }));
    assert_eq!(history.terminated_at, Some(at(9_000)));
}

#[test]
fn nobody_stops_a_spot_instance() {
    let model = calm(81);
    let id = must_launch(&model, at(0), &spot("pod-a")).instance_id;
    assert!(!model.stop_by_someone(at(1_000), &id));
    let error = model.stop_instances(at(1_000), &ids(&[&id])).err();
    assert_eq!(
        error.as_ref().map(|e| e.code.as_str()),
        Some(code::UNSUPPORTED_OPERATION)
    );
    assert!(error.is_some_and(|e| e.message.contains(&id)));
    assert_eq!(
        described_state(&model, at(1_000), &id),
        Some(State::Running)
    );
}

#[test]
fn the_client_stops_a_running_instance_and_not_a_stopped_one() {
    let mut behaviour = Behaviour::calm();
    behaviour.shutdown = exactly(1_000);
    let model = Ec2Model::new(82, behaviour);
    let id = must_launch(&model, at(0), &launch("pod-a")).instance_id;
    let changes = model
        .stop_instances(at(1_000), &ids(&[&id]))
        .unwrap_or_default();
    assert_eq!(
        (changes[0].previous, changes[0].current),
        (State::Running, State::Stopping)
    );
    let stopped = model
        .describe_instances(
            at(2_000),
            &[Filter::new("instance-state-name", ["stopped"])],
        )
        .unwrap_or_default();
    assert_eq!(
        stopped[0].state_reason,
        Some(StateReason::user_initiated_shutdown())
    );
    let again = model.stop_instances(at(2_000), &ids(&[&id]));
    assert_eq!(
        again.map_err(|e| e.code),
        Err(code::INCORRECT_INSTANCE_STATE.to_owned())
    );
    assert_eq!(
        history_of(&model, &id).ending,
        Some(Ending::Stopped { at: at(1_000) })
    );
}
