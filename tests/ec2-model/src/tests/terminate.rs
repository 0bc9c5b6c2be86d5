use super::*;
use crate::{Ending, code};

#[test]
fn terminating_with_a_protected_instance_spares_its_zone_and_terminates_the_others() {
    let model = calm(30);
    let protected = must_launch(&model, at(0), &in_subnet("pod-a", SUBNET_A)).instance_id;
    let same_zone = must_launch(&model, at(0), &in_subnet("pod-b", SUBNET_A)).instance_id;
    let other_zone = must_launch(&model, at(0), &in_subnet("pod-c", SUBNET_B)).instance_id;
    assert!(model.protect(at(0), &protected, at(20_000)));

    let batch = ids(&[&protected, &same_zone, &other_zone]);
    let error = model.terminate_instances(at(1_000), &batch).err();
    assert_eq!(
        error.as_ref().map(|e| e.code.as_str()),
        Some(code::OPERATION_NOT_PERMITTED)
    );
    assert_eq!(
        error.map(|e| e.message),
        Some(format!(
            "The instance '{protected}' may not be terminated. Modify its 'disableApiTermination' instance attribute and try again."
        ))
    );

    // The error hides a partial success.
    assert_eq!(
        described_state(&model, at(1_000), &protected),
        Some(State::Running)
    );
    assert_eq!(
        described_state(&model, at(1_000), &same_zone),
        Some(State::Running)
    );
    assert_eq!(
        described_state(&model, at(1_000), &other_zone),
        Some(State::Terminated)
    );
    assert_eq!(history_of(&model, &same_zone).ending, None);
    assert_eq!(
        history_of(&model, &other_zone).ending,
        Some(Ending::TerminatedByClient { at: at(1_000) })
    );
    for id in [&protected, &same_zone, &other_zone] {
        assert_eq!(history_of(&model, id).termination_requests, vec![at(1_000)]);
    }

    // Once protection lapses the same call succeeds, idempotently for the
    // instance already gone.
    let changes = model
        .terminate_instances(at(20_000), &batch)
        .unwrap_or_default();
    let states: Vec<(State, State)> = changes.iter().map(|c| (c.previous, c.current)).collect();
    assert_eq!(
        states,
        vec![
            (State::Running, State::ShuttingDown),
            (State::Running, State::ShuttingDown),
            (State::Terminated, State::Terminated),
        ]
    );
}

#[test]
fn an_unknown_id_fails_the_whole_batch_and_terminates_nothing() {
    let model = calm(31);
    let known = must_launch(&model, at(0), &launch("pod-a")).instance_id;
    let unknown = "i-0000000000000000a";
    let error = model
        .terminate_instances(at(1), &ids(&[&known, unknown]))
        .err();
    assert_eq!(
        error.as_ref().map(|e| e.code.as_str()),
        Some(code::INSTANCE_NOT_FOUND)
    );
    assert_eq!(
        error.map(|e| e.message),
        Some(format!("The instance ID '{unknown}' does not exist"))
    );
    assert_eq!(described_state(&model, at(1), &known), Some(State::Running));
    assert!(history_of(&model, &known).termination_requests.is_empty());

    let two = model
        .terminate_instances(at(1), &ids(&[unknown, &known, "i-0000000b"]))
        .err();
    assert_eq!(
        two.map(|e| e.message),
        Some(format!(
            "The instance IDs '{unknown}, i-0000000b' do not exist"
        ))
    );
}

#[test]
fn a_malformed_id_fails_the_whole_batch_and_terminates_nothing() {
    let model = calm(32);
    let known = must_launch(&model, at(0), &launch("pod-a")).instance_id;
    let error = model
        .terminate_instances(at(1), &ids(&[&known, "i-XYZ"]))
        .err();
    assert_eq!(
        error.as_ref().map(|e| e.code.as_str()),
        Some(code::INSTANCE_ID_MALFORMED)
    );
    assert_eq!(
        error.map(|e| e.message),
        Some("Invalid id: \"i-XYZ\"".to_owned())
    );
    assert_eq!(described_state(&model, at(1), &known), Some(State::Running));
}

#[test]
fn terminating_twice_answers_the_state_unchanged() {
    let mut behaviour = Behaviour::calm();
    behaviour.shutdown = exactly(1_000);
    let model = Ec2Model::new(33, behaviour);
    let id = must_launch(&model, at(0), &launch("pod-a")).instance_id;
    assert!(model.terminate_instances(at(10), &ids(&[&id])).is_ok());
    let shutting = model
        .terminate_instances(at(20), &ids(&[&id]))
        .unwrap_or_default();
    assert_eq!(
        (shutting[0].previous, shutting[0].current),
        (State::ShuttingDown, State::ShuttingDown)
    );
    let terminated = model
        .terminate_instances(at(2_000), &ids(&[&id]))
        .unwrap_or_default();
    assert_eq!(
        (terminated[0].previous, terminated[0].current),
        (State::Terminated, State::Terminated)
    );
    let history = history_of(&model, &id);
    assert_eq!(
        history.terminated_at,
        Some(at(1_010)),
        "the first termination stands"
    );
    assert_eq!(
        history.termination_requests,
        vec![at(10), at(20), at(2_000)]
    );
}

#[test]
fn a_pending_instance_may_be_refused_with_incorrect_instance_state() {
    let mut behaviour = Behaviour::calm();
    behaviour.boot = exactly(10_000);
    behaviour.per_id_refusal_probability = 1.0;
    let model = Ec2Model::new(34, behaviour);
    let pending = must_launch(&model, at(0), &launch("pod-a")).instance_id;
    let error = model.terminate_instances(at(1), &ids(&[&pending])).err();
    assert_eq!(
        error.as_ref().map(|e| e.code.as_str()),
        Some(code::INCORRECT_INSTANCE_STATE)
    );
    assert!(error.is_some_and(|e| e.message.contains(&pending)));
    assert_eq!(
        described_state(&model, at(1), &pending),
        Some(State::Pending)
    );
    // Once running, it terminates.
    assert!(model.terminate_instances(at(10_000), &[pending]).is_ok());
}
