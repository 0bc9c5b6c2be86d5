use super::*;
use crate::code;

#[test]
fn a_throttling_burst_refuses_calls_and_does_nothing() {
    let mut behaviour = Behaviour::calm();
    behaviour.throttle_probability = 0.3;
    behaviour.throttle_burst = 2..=4;
    let model = Ec2Model::new(40, behaviour);

    let mut outcomes = Vec::new();
    let mut launched = 0;
    for n in 0..200 {
        let answer = model.run_instances(at(n), &launch(&format!("pod-{n}")));
        match &answer {
            Ok(_) => launched += 1,
            Err(error) => assert_eq!(error.code, code::REQUEST_LIMIT_EXCEEDED),
        }
        outcomes.push(answer.is_ok());
        assert_eq!(
            model.history().len(),
            launched,
            "a refused launch made nothing"
        );
    }
    assert!(launched > 0 && launched < 200);
    // Refusals come in bursts of at least two calls (ending the run of
    // calls is the only way to cut one short).
    let runs: Vec<usize> = outcomes
        .split(|ok| *ok)
        .map(<[bool]>::len)
        .filter(|&len| len > 0)
        .collect();
    let (last, complete) = runs.split_last().unwrap_or((&0, &[]));
    assert!(complete.iter().all(|&len| len >= 2), "{runs:?}");
    assert!(*last >= 1);

    // Throttled terminates leave the instance alone and are not requests.
    let id = model.history()[0].instance_id.clone();
    for n in 0..50 {
        match model.terminate_instances(at(1_000 + n), &ids(&[&id])) {
            Err(error) => {
                assert!(error.is_throttling());
                assert!(history_of(&model, &id).termination_requests.is_empty());
                assert_eq!(
                    true_state(&history_of(&model, &id), at(1_000 + n)),
                    Some(State::Running)
                );
            }
            Ok(_) => {
                assert_eq!(history_of(&model, &id).termination_requests.len(), 1);
                return;
            }
        }
    }
    panic!("throttled for fifty calls in a row");
}

#[test]
fn throttling_applies_to_every_kind_of_call() {
    let mut behaviour = Behaviour::calm();
    behaviour.throttle_probability = 1.0;
    behaviour.throttle_burst = 1..=1;
    let model = Ec2Model::new(41, behaviour);
    let refused = |result: Result<(), crate::Ec2Error>| result.is_err_and(|e| e.is_throttling());
    assert!(refused(model.run_instances(at(0), &launch("a")).map(drop)));
    assert!(refused(model.describe_instances(at(0), &[]).map(drop)));
    assert!(refused(
        model
            .terminate_instances(at(0), &ids(&["i-12345678"]))
            .map(drop)
    ));
    assert!(refused(
        model.stop_instances(at(0), &ids(&["i-12345678"])).map(drop)
    ));
    assert!(refused(
        model.get_console_output(at(0), "i-12345678").map(drop)
    ));
    assert!(model.history().is_empty());
}
