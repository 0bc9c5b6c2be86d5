use super::*;
use crate::{EXIT_CODE_TAG, Ending, FINISHED_AT_TAG, StateReason, WorkloadEnd};

fn ended(at_ms: i64) -> WorkloadEnd {
    WorkloadEnd {
        pod_exit_code: 1,
        containers: vec![("main".to_owned(), 0), ("sidecar".to_owned(), 137)],
        finished_at: at(at_ms),
    }
}

#[test]
fn a_completed_workload_writes_console_and_tags_with_lags_then_shuts_down() {
    let mut behaviour = Behaviour::calm();
    behaviour.console_lag = exactly(1_000);
    behaviour.tag_lag = exactly(2_000);
    behaviour.workload_shutdown_delay = exactly(500);
    behaviour.shutdown = exactly(1_000);
    let model = Ec2Model::new(60, behaviour);
    let id = must_launch(&model, at(0), &launch("pod-a")).instance_id;

    assert!(model.complete_workload(at(10_000), &id, &ended(10_000)));

    let console = |ms| {
        model
            .get_console_output(at(ms), &id)
            .ok()
            .flatten()
            .unwrap_or_default()
    };
    assert!(console(10_999).contains("cloud-init"));
    assert!(!console(10_999).contains("orca-exit"));
    assert!(
        console(11_000).ends_with("orca-exit[main]=0\norca-exit[sidecar]=137\norca-exit-code=1\n")
    );

    let tags = |ms| {
        model
            .describe_instances(at(ms), &[Filter::new("instance-id", [id.as_str()])])
            .unwrap_or_default()
            .first()
            .map(|instance| instance.tags.clone())
            .unwrap_or_default()
    };
    assert_eq!(tags(11_999).get(EXIT_CODE_TAG), None);
    assert_eq!(
        tags(12_000).get(EXIT_CODE_TAG).map(String::as_str),
        Some("1")
    );
    assert_eq!(
        tags(12_000).get(FINISHED_AT_TAG).map(String::as_str),
        Some("2026-01-01T00:00:10Z")
    );

    let describe = |ms| {
        model
            .describe_instances(at(ms), &[Filter::new("instance-id", [id.as_str()])])
            .unwrap_or_default()
            .first()
            .map(|instance| (instance.state, instance.state_reason.clone()))
    };
    assert_eq!(describe(10_499), Some((State::Running, None)));
    let reason = Some(StateReason::instance_initiated_shutdown());
    assert_eq!(
        describe(10_500),
        Some((State::ShuttingDown, reason.clone()))
    );
    assert_eq!(describe(11_500), Some((State::Terminated, reason)));
    assert_eq!(
        StateReason::instance_initiated_shutdown().message,
        "Client.InstanceInitiatedShutdown: Instance initiated shutdown"
    );

    let history = history_of(&model, &id);
    assert_eq!(
        history.ending,
        Some(Ending::Completed {
            pod_exit_code: 1,
            containers: vec![("main".to_owned(), 0), ("sidecar".to_owned(), 137)],
            at: at(10_000),
        })
    );
    assert_eq!(
        history.tags.get(EXIT_CODE_TAG).map(String::as_str),
        Some("1")
    );
}

#[test]
fn a_workload_completes_only_on_a_running_instance_and_only_once() {
    let mut behaviour = Behaviour::calm();
    behaviour.boot = exactly(1_000);
    behaviour.workload_shutdown_delay = exactly(500);
    let model = Ec2Model::new(61, behaviour);
    let id = must_launch(&model, at(0), &launch("pod-a")).instance_id;
    assert!(
        !model.complete_workload(at(500), &id, &ended(500)),
        "still pending"
    );
    assert!(!model.complete_workload(at(2_000), "i-00000000", &ended(2_000)));
    assert!(!model.complete_workload(at(2_000), "", &ended(2_000)));
    assert!(model.complete_workload(at(2_000), &id, &ended(2_000)));
    assert!(
        !model.complete_workload(at(2_100), &id, &ended(2_100)),
        "only once"
    );
    assert!(
        !model.complete_workload(at(9_000), &id, &ended(9_000)),
        "terminated"
    );
}

#[test]
fn a_client_termination_before_the_workload_ends_keeps_terminated_by_client() {
    let model = calm(62);
    let id = must_launch(&model, at(0), &launch("pod-a")).instance_id;
    assert!(model.terminate_instances(at(1_000), &ids(&[&id])).is_ok());
    assert!(!model.complete_workload(at(2_000), &id, &ended(2_000)));
    assert_eq!(
        history_of(&model, &id).ending,
        Some(Ending::TerminatedByClient { at: at(1_000) })
    );
}
