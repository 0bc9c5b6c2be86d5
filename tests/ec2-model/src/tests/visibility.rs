use std::collections::BTreeSet;

use super::*;
use crate::code;

#[test]
fn a_new_instance_is_invisible_to_describes_and_by_id_calls_during_its_lag() {
    let mut behaviour = Behaviour::calm();
    behaviour.visibility_lag = exactly(2_000);
    let model = Ec2Model::new(10, behaviour);
    let launched = must_launch(&model, at(0), &launch("pod-a"));
    let id = launched.instance_id.clone();

    for filters in [
        vec![],
        vec![Filter::new("instance-id", [id.as_str()])],
        vec![Filter::new("client-token", ["pod-a"])],
    ] {
        assert_eq!(model.describe_instances(at(1_999), &filters), Ok(vec![]));
    }
    let terminate = model.terminate_instances(at(1_999), &ids(&[&id]));
    let error = terminate.err();
    assert_eq!(
        error.as_ref().map(|e| e.code.as_str()),
        Some(code::INSTANCE_NOT_FOUND)
    );
    assert!(error.is_some_and(|e| e.message.contains(&id)));
    let stop = model.stop_instances(at(1_999), &ids(&[&id]));
    assert_eq!(
        stop.map_err(|e| e.code),
        Err(code::INSTANCE_NOT_FOUND.to_owned())
    );
    let console = model.get_console_output(at(1_999), &id);
    assert_eq!(
        console.map_err(|e| e.code),
        Err(code::INSTANCE_NOT_FOUND.to_owned())
    );
    assert!(model.history()[0].termination_requests.is_empty());

    assert_eq!(
        described_state(&model, at(2_000), &id),
        Some(State::Running)
    );
    assert!(model.terminate_instances(at(2_000), &[id]).is_ok());
}

#[test]
fn tags_appear_after_the_instance() {
    let mut behaviour = Behaviour::calm();
    behaviour.visibility_lag = exactly(1_000);
    behaviour.tag_lag = exactly(3_000);
    let model = Ec2Model::new(11, behaviour);
    let launched = must_launch(&model, at(0), &launch("pod-a"));
    assert_eq!(
        launched.tags.get("orca.research/pod").map(String::as_str),
        Some("pod-a"),
        "the launch answer echoes the requested tags"
    );

    let by_tag = [Filter::tag("orca.research/pod", ["pod-a"])];
    let untagged = model.describe_instances(at(1_000), &[]).unwrap_or_default();
    assert_eq!(untagged.len(), 1);
    assert!(untagged[0].tags.is_empty());
    assert_eq!(model.describe_instances(at(2_999), &by_tag), Ok(vec![]));

    let tagged = model
        .describe_instances(at(3_000), &by_tag)
        .unwrap_or_default();
    assert_eq!(tagged.len(), 1);
    assert_eq!(tagged[0].instance_id, launched.instance_id);
}

#[test]
fn stale_reads_can_disagree() {
    let mut behaviour = Behaviour::calm();
    behaviour.visibility_lag = exactly(1_000);
    behaviour.shutdown = exactly(5_000);
    behaviour.describe_staleness = Span::millis(0, 2_000);
    let model = Ec2Model::new(12, behaviour);
    let id = must_launch(&model, at(0), &launch("pod-a")).instance_id;

    // Just after it propagated: some replicas know it, some do not yet.
    let mut seen = BTreeSet::new();
    for _ in 0..50 {
        seen.insert(described_state(&model, at(1_500), &id));
    }
    assert_eq!(seen, BTreeSet::from([None, Some(State::Running)]));

    // Just after it was terminated: some replicas still say running.
    assert!(model.terminate_instances(at(10_000), &ids(&[&id])).is_ok());
    let mut seen = BTreeSet::new();
    for _ in 0..50 {
        seen.insert(described_state(&model, at(10_500), &id));
    }
    assert_eq!(
        seen,
        BTreeSet::from([Some(State::Running), Some(State::ShuttingDown)])
    );

    // By-id calls use the true state: a second terminate is answered as
    // shutting-down even while describes may still say running.
    let again = model
        .terminate_instances(at(10_500), &[id])
        .unwrap_or_default();
    assert_eq!(again[0].previous, State::ShuttingDown);
    assert_eq!(again[0].current, State::ShuttingDown);
}
