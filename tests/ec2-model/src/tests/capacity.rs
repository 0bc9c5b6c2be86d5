use std::collections::BTreeSet;

use super::*;
use crate::code;

fn refused(model: &Ec2Model, now: Timestamp, request: &RunInstances) -> bool {
    match model.run_instances(now, request) {
        Ok(_) => false,
        Err(error) => {
            assert_eq!(error.code, code::INSUFFICIENT_INSTANCE_CAPACITY);
            true
        }
    }
}

#[test]
fn capacity_is_decided_per_offering_and_per_window() {
    let mut behaviour = Behaviour::calm();
    behaviour.capacity_error_probability = 0.5;
    behaviour.capacity_window = SignedDuration::from_secs(10);
    let model = Ec2Model::new(50, behaviour);
    let offerings = [
        launch(""),
        spot(""),
        in_subnet("", SUBNET_B),
        RunInstances {
            instance_type: "c7g.large".to_owned(),
            ..launch("")
        },
    ];

    let mut per_window = Vec::new();
    for window in 0..40 {
        let start = window * 10_000;
        let answers: Vec<bool> = offerings
            .iter()
            .map(|o| refused(&model, at(start), o))
            .collect();
        // Every launch into the same offering in the same window agrees.
        for offset in [1, 5_000, 9_999] {
            let again: Vec<bool> = offerings
                .iter()
                .map(|o| refused(&model, at(start + offset), o))
                .collect();
            assert_eq!(again, answers);
        }
        per_window.push(answers);
    }
    // The decision changes from window to window, and offerings differ.
    let distinct: BTreeSet<&Vec<bool>> = per_window.iter().collect();
    assert!(distinct.len() > 4, "{per_window:?}");
    for offering in 0..offerings.len() {
        let outcomes: BTreeSet<bool> = per_window.iter().map(|w| w[offering]).collect();
        assert_eq!(outcomes.len(), 2);
    }
}

#[test]
fn the_capacity_error_names_the_type_and_the_zone() {
    let mut behaviour = Behaviour::calm();
    behaviour.capacity_error_probability = 1.0;
    let model = Ec2Model::new(51, behaviour);
    let error = model
        .run_instances(at(0), &in_subnet("pod-a", SUBNET_B))
        .err();
    let message = error.map(|e| e.message).unwrap_or_default();
    assert!(message.starts_with(
        "We currently do not have sufficient m7i.large capacity in the Availability Zone you requested (us-west-2b)."
    ));
}
