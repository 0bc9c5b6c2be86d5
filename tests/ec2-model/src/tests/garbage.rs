use super::*;
use crate::{Behaviour, WorkloadEnd, code};

#[test]
fn garbage_ids_are_refused_with_ec2_codes_not_panics() {
    let model = Ec2Model::new(90, Behaviour::calm());
    let missing = model.terminate_instances(at(0), &[]);
    assert_eq!(
        missing.map_err(|e| e.code),
        Err(code::MISSING_PARAMETER.to_owned())
    );
    let missing = model.stop_instances(at(0), &[]);
    assert_eq!(
        missing.map_err(|e| e.code),
        Err(code::MISSING_PARAMETER.to_owned())
    );
    for id in [
        "",
        "i-",
        "i-\u{0}",
        "i-ééééééééé",
        "I-12345678",
        "i-12345678\n",
        &"i-".repeat(10_000),
    ] {
        let malformed = Some(code::INSTANCE_ID_MALFORMED.to_owned());
        assert_eq!(
            model
                .terminate_instances(at(0), &[id.to_owned()])
                .err()
                .map(|e| e.code),
            malformed
        );
        assert_eq!(
            model
                .stop_instances(at(0), &[id.to_owned()])
                .err()
                .map(|e| e.code),
            malformed
        );
        assert_eq!(
            model.get_console_output(at(0), id).err().map(|e| e.code),
            malformed
        );
        assert!(!model.complete_workload(
            at(0),
            id,
            &WorkloadEnd {
                pod_exit_code: i32::MIN,
                containers: vec![(id.to_owned(), i32::MAX)],
                finished_at: Timestamp::MAX,
            }
        ));
        assert_eq!(model.interrupt_spot(at(0), id), None);
        assert!(!model.stop_by_someone(at(0), id));
        assert!(!model.protect(at(0), id, Timestamp::MAX));
    }
}

#[test]
fn weird_filters_are_refused_or_match_nothing() {
    let model = Ec2Model::new(91, Behaviour::calm());
    must_launch(&model, at(0), &launch("pod-a"));
    for name in [
        "",
        "tag:",
        "tag",
        "instance-state",
        "INSTANCE-ID",
        "\u{0}",
        "tag-key",
    ] {
        let refused = model.describe_instances(at(0), &[Filter::new(name, ["x"])]);
        assert_eq!(
            refused.map_err(|e| e.code),
            Err(code::INVALID_PARAMETER_VALUE.to_owned()),
            "{name:?}"
        );
    }
    for value in ["", "\\", "\\\\", "**??**", "\u{0}", &"*".repeat(5_000)] {
        let key = format!("k{value}");
        let answer = model.describe_instances(at(0), &[Filter::tag(&key, [value])]);
        assert!(answer.is_ok(), "{value:?}");
    }
    let odd_tag_key = Filter::tag("tag:with:colons", ["x"]);
    assert_eq!(model.describe_instances(at(0), &[odd_tag_key]), Ok(vec![]));
}

#[test]
fn extreme_times_and_profiles_do_not_panic() {
    let mut behaviour = Behaviour::hostile();
    behaviour.visibility_lag = Span::between(SignedDuration::MIN, SignedDuration::MAX);
    behaviour.tag_lag = Span::between(SignedDuration::MAX, SignedDuration::MIN);
    behaviour.describe_staleness = Span::exactly(SignedDuration::MAX);
    behaviour.boot = Span::exactly(SignedDuration::MIN);
    behaviour.terminated_retention = Span::exactly(SignedDuration::MAX);
    behaviour.capacity_window = SignedDuration::MIN;
    behaviour.throttle_probability = f64::NAN;
    behaviour.lost_answer_probability = -1.0;
    behaviour.capacity_error_probability = f64::INFINITY;
    #[allow(clippy::reversed_empty_ranges)]
    {
        behaviour.throttle_burst = 9..=1;
    }
    let model = Ec2Model::new(92, behaviour);
    for now in [Timestamp::MIN, at(0), Timestamp::MAX] {
        let _ = model.run_instances(now, &launch("pod-a"));
        let _ = model.describe_instances(now, &[]);
    }
    let mut generous = Behaviour::calm();
    generous.visibility_lag = Span::exactly(SignedDuration::MAX);
    generous.shutdown = Span::exactly(SignedDuration::MAX);
    let model = Ec2Model::new(93, generous);
    let request = RunInstances {
        max_price: Some(f64::MAX),
        spot: true,
        ..launch("pod-a")
    };
    for now in [Timestamp::MIN, Timestamp::MAX] {
        let launched = model.run_instances(now, &request);
        let _ = model.describe_instances(now, &[]);
        let _ = model.terminate_instances(now, &ids(&["i-12345678"]));
        if let Ok(instance) = launched {
            let _ = model.interrupt_spot(now, &instance.instance_id);
            let _ = model.complete_workload(
                now,
                &instance.instance_id,
                &WorkloadEnd {
                    pod_exit_code: 0,
                    containers: vec![],
                    finished_at: Timestamp::MIN,
                },
            );
        }
    }
    assert!(!model.history().is_empty());
}

#[test]
fn a_panicking_caller_does_not_poison_the_model() {
    let model = std::sync::Arc::new(Ec2Model::new(94, Behaviour::calm()));
    let holder = std::sync::Arc::clone(&model);
    let crashed = std::thread::spawn(move || {
        let _guard = holder.world();
        panic!("a test thread dies while holding the lock");
    })
    .join();
    assert!(crashed.is_err());
    assert!(model.run_instances(at(0), &launch("pod-a")).is_ok());
}
