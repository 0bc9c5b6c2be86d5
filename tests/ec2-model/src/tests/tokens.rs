use super::*;
use crate::{ErrorKind, code};

#[test]
fn a_repeated_token_with_the_same_parameters_answers_the_same_instance() {
    let mut behaviour = Behaviour::calm();
    behaviour.visibility_lag = exactly(5_000);
    behaviour.boot = exactly(1_000);
    let model = Ec2Model::new(20, behaviour);
    let first = must_launch(&model, at(0), &launch("pod-a"));
    // Still invisible to describes, yet the token resolves: EC2 knows its own.
    let again = must_launch(&model, at(2_000), &launch("pod-a"));
    assert_eq!(again.instance_id, first.instance_id);
    assert_eq!(
        again.state,
        State::Running,
        "a repeat shows the current state"
    );
    assert_eq!(model.history().len(), 1);
}

#[test]
fn a_repeated_token_with_other_parameters_is_a_mismatch() {
    let model = calm(21);
    must_launch(&model, at(0), &launch("pod-a"));
    let variants = [
        RunInstances {
            instance_type: "m7i.xlarge".to_owned(),
            ..launch("pod-a")
        },
        RunInstances {
            spot: true,
            ..launch("pod-a")
        },
        RunInstances {
            max_price: Some(0.5),
            ..launch("pod-a")
        },
        in_subnet("pod-a", SUBNET_B),
        RunInstances {
            tags: BTreeMap::new(),
            ..launch("pod-a")
        },
        RunInstances {
            fingerprint: "ami-other".to_owned(),
            ..launch("pod-a")
        },
    ];
    for variant in variants {
        let answer = model.run_instances(at(1), &variant);
        assert_eq!(
            answer.map_err(|e| e.code),
            Err(code::IDEMPOTENT_PARAMETER_MISMATCH.to_owned()),
            "{variant:?}"
        );
    }
    assert_eq!(model.history().len(), 1);
    let refused = model.refused_replays();
    assert_eq!(
        refused.len(),
        6,
        "each refusal is on the record: {refused:?}"
    );
    assert!(
        refused
            .iter()
            .all(|r| r.operation == "RunInstances" && r.client_token == "pod-a" && r.at == at(1))
    );
}

#[test]
fn a_token_whose_instance_terminated_answers_idempotent_instance_terminated_for_ever() {
    let mut behaviour = Behaviour::calm();
    behaviour.shutdown = exactly(1_000);
    let model = Ec2Model::new(22, behaviour);
    let launched = must_launch(&model, at(0), &launch("pod-a"));
    assert!(
        model
            .terminate_instances(at(100), &ids(&[&launched.instance_id]))
            .is_ok()
    );
    // Shutting down is not terminated yet: the same instance is answered.
    let shutting = model.run_instances(at(500), &launch("pod-a"));
    assert_eq!(
        shutting.map(|i| (i.instance_id, i.state)),
        Ok((launched.instance_id, State::ShuttingDown))
    );
    for when in [at(1_100), at(1_000_000_000)] {
        let answer = model.run_instances(when, &launch("pod-a"));
        assert_eq!(
            answer.map_err(|e| e.code),
            Err(code::IDEMPOTENT_INSTANCE_TERMINATED.to_owned())
        );
    }
    assert_eq!(model.history().len(), 1);
}

#[test]
fn a_failed_launch_leaves_its_token_unused() {
    let mut behaviour = Behaviour::calm();
    behaviour.spot_prices.insert("m7i.large".to_owned(), 0.1);
    let model = Ec2Model::new(23, behaviour);
    let too_cheap = RunInstances {
        max_price: Some(0.05),
        ..spot("pod-a")
    };
    let refused = model.run_instances(at(0), &too_cheap);
    assert_eq!(
        refused.map_err(|e| e.code),
        Err(code::SPOT_MAX_PRICE_TOO_LOW.to_owned())
    );
    assert!(model.history().is_empty());
    // Other parameters with the same token: not a mismatch, the token is free.
    let enough = RunInstances {
        max_price: Some(0.2),
        ..spot("pod-a")
    };
    assert!(model.run_instances(at(1), &enough).is_ok());
    assert_eq!(model.history().len(), 1);
}

#[test]
fn a_launch_refused_for_capacity_leaves_its_token_unused() {
    let mut behaviour = Behaviour::calm();
    behaviour.capacity_error_probability = 0.5;
    behaviour.capacity_window = SignedDuration::from_secs(1);
    let model = Ec2Model::new(24, behaviour);
    // One launch per capacity window, each with its own token, until one is
    // refused.
    let refused = (0..100).find_map(|second| {
        let token = format!("pod-{second}");
        match model.run_instances(at(second * 1_000), &launch(&token)) {
            Ok(_) => None,
            Err(error) => Some((second, token, error)),
        }
    });
    let Some((second, token, error)) = refused else {
        panic!("capacity never ran out")
    };
    assert_eq!(error.code, code::INSUFFICIENT_INSTANCE_CAPACITY);
    let before = model.history().len();
    assert!(
        model
            .history()
            .iter()
            .all(|h| h.client_token.as_deref() != Some(token.as_str()))
    );

    // The same token with other parameters, once capacity is back: no
    // mismatch, because the refused launch never used the token.
    let other = RunInstances {
        fingerprint: "ami-other".to_owned(),
        ..launch(&token)
    };
    let accepted = (second + 1..second + 100)
        .find_map(|later| model.run_instances(at(later * 1_000), &other).ok());
    assert!(accepted.is_some(), "capacity never came back");
    assert_eq!(model.history().len(), before + 1);
}

#[test]
fn a_lost_answer_makes_exactly_one_instance_and_a_retry_with_the_same_token_returns_it() {
    let mut behaviour = Behaviour::calm();
    behaviour.lost_answer_probability = 1.0;
    behaviour.visibility_lag = exactly(5_000);
    let model = Ec2Model::new(25, behaviour);
    let lost = model.run_instances(at(0), &launch("pod-a"));
    assert_eq!(lost.as_ref().map_err(|e| e.kind), Err(ErrorKind::Transport));
    assert!(lost.is_err_and(|e| e.is_transport()));
    let history = model.history();
    assert_eq!(history.len(), 1, "EC2 acted before the answer was lost");
    assert_eq!(
        model.describe_instances(at(100), &[]),
        Ok(vec![]),
        "and nobody can see it yet"
    );

    let retried = must_launch(&model, at(200), &launch("pod-a"));
    assert_eq!(retried.instance_id, history[0].instance_id);
    assert_eq!(model.history().len(), 1);
}

#[test]
fn an_empty_token_is_no_token_and_every_launch_makes_an_instance() {
    let model = calm(26);
    let empty = RunInstances {
        client_token: Some(String::new()),
        ..launch("pod-a")
    };
    let first = must_launch(&model, at(0), &empty);
    let second = must_launch(&model, at(0), &empty);
    assert_ne!(first.instance_id, second.instance_id);
    assert_eq!(first.client_token, None);
}
