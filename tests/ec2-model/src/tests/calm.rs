use super::*;
use crate::{Ending, StateChange, StateReason, code};

#[test]
fn a_calm_model_launches_describes_by_tag_terminates_and_forgets_after_retention() {
    let model = calm(1);
    let launched = must_launch(&model, at(0), &launch("pod-a"));
    assert_eq!(launched.state, State::Pending, "a launch answers pending");
    assert_eq!(launched.client_token.as_deref(), Some("pod-a"));
    assert_eq!(launched.zone, "us-west-2a");

    let by_tag = [Filter::tag("orca.research/pod", ["pod-a"])];
    let found = model.describe_instances(at(0), &by_tag).unwrap_or_default();
    assert_eq!(found.len(), 1);
    assert_eq!(found[0].instance_id, launched.instance_id);
    assert_eq!(found[0].state, State::Running);
    assert_eq!(
        found[0].tags.get("orca.research/pod").map(String::as_str),
        Some("pod-a")
    );

    let changes = model.terminate_instances(at(1_000), &ids(&[&launched.instance_id]));
    assert_eq!(
        changes,
        Ok(vec![StateChange {
            instance_id: launched.instance_id.clone(),
            previous: State::Running,
            current: State::ShuttingDown,
        }])
    );
    let found = model
        .describe_instances(at(1_000), &by_tag)
        .unwrap_or_default();
    assert_eq!(found[0].state, State::Terminated);
    assert_eq!(
        found[0].state_reason,
        Some(StateReason::user_initiated_shutdown())
    );

    // Listed for the retention time, then gone from describes and by-id calls.
    assert_eq!(
        described_state(&model, at(30_999), &launched.instance_id),
        Some(State::Terminated)
    );
    assert_eq!(
        described_state(&model, at(31_000), &launched.instance_id),
        None
    );
    let again = model.terminate_instances(at(31_000), &ids(&[&launched.instance_id]));
    assert_eq!(
        again.map_err(|e| e.code),
        Err(code::INSTANCE_NOT_FOUND.to_owned())
    );

    let history = model.history();
    assert_eq!(history.len(), 1);
    assert_eq!(
        history[0].ending,
        Some(Ending::TerminatedByClient { at: at(1_000) })
    );
    assert_eq!(history[0].terminated_at, Some(at(1_000)));
    assert_eq!(history[0].termination_requests, vec![at(1_000)]);
}

#[test]
fn filters_and_together_and_their_values_or_together_with_wildcards() {
    let model = calm(2);
    let a = must_launch(&model, at(0), &launch("pod-a"));
    let b = must_launch(
        &model,
        at(0),
        &RunInstances {
            instance_type: "c7g.xlarge".to_owned(),
            ..launch("pod-b")
        },
    );
    let names = |filters: &[Filter]| -> Vec<String> {
        model
            .describe_instances(at(10), filters)
            .unwrap_or_default()
            .into_iter()
            .map(|instance| instance.instance_id)
            .collect()
    };
    assert_eq!(
        names(&[]),
        vec![a.instance_id.clone(), b.instance_id.clone()]
    );
    assert_eq!(
        names(&[Filter::tag("orca.research/pod", ["pod-*"])]).len(),
        2
    );
    assert_eq!(
        names(&[Filter::tag("orca.research/pod", ["pod-a", "pod-b"])]).len(),
        2
    );
    assert_eq!(
        names(&[
            Filter::tag("orca.research/pod", ["pod-*"]),
            Filter::new("instance-type", ["c7g.*"]),
        ]),
        vec![b.instance_id.clone()]
    );
    assert_eq!(
        names(&[Filter::new("client-token", ["pod-a"])]),
        vec![a.instance_id.clone()]
    );
    assert_eq!(
        names(&[Filter::new("instance-id", [b.instance_id.as_str()])]),
        vec![b.instance_id.clone()]
    );
    assert_eq!(
        names(&[Filter::new("instance-state-name", ["pending", "stopped"])]),
        Vec::<String>::new()
    );
    assert_eq!(
        names(&[Filter::new("instance-state-name", ["running"])]).len(),
        2
    );
    assert_eq!(
        names(&[Filter::tag("missing", ["*"])]),
        Vec::<String>::new()
    );
}

#[test]
fn console_output_is_none_before_anything_was_written_and_kept_until_the_purge() {
    let mut behaviour = Behaviour::calm();
    behaviour.boot = exactly(1_000);
    let model = Ec2Model::new(3, behaviour);
    let launched = must_launch(&model, at(0), &launch("pod-a"));
    assert_eq!(
        model.get_console_output(at(500), &launched.instance_id),
        Ok(None)
    );
    let booted = model.get_console_output(at(1_000), &launched.instance_id);
    assert!(
        booted
            .as_ref()
            .is_ok_and(|output| output.as_deref().is_some_and(|o| o.contains("cloud-init")))
    );

    assert!(
        model
            .terminate_instances(at(2_000), &ids(&[&launched.instance_id]))
            .is_ok()
    );
    assert_eq!(
        model.get_console_output(at(31_999), &launched.instance_id),
        booted
    );
    let purged = model.get_console_output(at(32_000), &launched.instance_id);
    assert_eq!(
        purged.map_err(|e| e.code),
        Err(code::INSTANCE_NOT_FOUND.to_owned())
    );
}

#[test]
fn reads_may_ask_about_the_past_but_changes_never_rewrite_it() {
    let model = calm(4);
    let launched = must_launch(&model, at(10_000), &launch("pod-a"));
    let id = launched.instance_id;
    assert_eq!(
        described_state(&model, at(9_999), &id),
        None,
        "not launched yet then"
    );
    // A change "at" an earlier time happens at the time of the latest change.
    assert!(model.terminate_instances(at(0), &ids(&[&id])).is_ok());
    assert_eq!(
        history_of(&model, &id).termination_requests,
        vec![at(10_000)]
    );
    assert_eq!(history_of(&model, &id).terminated_at, Some(at(10_000)));
}
