use std::collections::BTreeSet;

use super::*;
use crate::capacity::{self, Offering};
use crate::{
    AllocationStrategy, CreateFleet, ErrorKind, FleetAnswer, FleetDescription, FleetPool, code,
};

const SUBNET_C: &str = "subnet-0c0c0c0c0c0c0c0c0";

fn pool(instance_type: &str) -> FleetPool {
    FleetPool {
        instance_type: instance_type.to_owned(),
        subnet_id: None,
        priority: None,
    }
}

fn pool_in(instance_type: &str, subnet: &str) -> FleetPool {
    FleetPool {
        subnet_id: Some(subnet.to_owned()),
        ..pool(instance_type)
    }
}

fn with_priority(instance_type: &str, priority: Option<f64>) -> FleetPool {
    FleetPool {
        priority,
        ..pool(instance_type)
    }
}

/// A spot fleet over `pools`, tagged with its token as `launch` is.
fn fleet(token: &str, strategy: AllocationStrategy, pools: Vec<FleetPool>) -> CreateFleet {
    CreateFleet {
        client_token: (!token.is_empty()).then(|| token.to_owned()),
        spot: true,
        allocation_strategy: strategy,
        pools,
        max_price: None,
        tags: BTreeMap::from([("orca.research/pod".to_owned(), token.to_owned())]),
        launch_template: None,
        fingerprint: "lt-0123456789abcdef0|userdata-digest".to_owned(),
    }
}

fn five_types() -> Vec<FleetPool> {
    ["a.large", "b.large", "c.large", "d.large", "e.large"]
        .into_iter()
        .map(pool)
        .collect()
}

fn must_fleet(model: &Ec2Model, now: Timestamp, request: &CreateFleet) -> FleetAnswer {
    match model.create_fleet(now, request) {
        Ok(answer) => answer,
        Err(error) => panic!("create fleet failed: {error}"),
    }
}

/// The pool indices of the answer's errors, in the order they were walked.
fn error_pools(answer: &FleetAnswer) -> Vec<usize> {
    answer.errors.iter().map(|error| error.pool).collect()
}

fn launched_pool(answer: &FleetAnswer) -> Option<usize> {
    answer.instances.first().map(|launched| launched.pool)
}

fn named(fleet_ids: &[&str]) -> Filter {
    Filter::new("fleet-id", fleet_ids.iter().copied())
}

/// Every pool exhausted: the errors list the whole walk, in order.
fn short_everywhere() -> Behaviour {
    let mut behaviour = Behaviour::calm();
    behaviour.capacity_error_probability = 1.0;
    behaviour
}

fn exhausted(model: &Ec2Model, now: Timestamp, instance_type: &str, spot: bool) -> bool {
    let behaviour = model.behaviour();
    capacity::is_exhausted(
        model.seed(),
        behaviour.capacity_error_probability,
        behaviour.capacity_window,
        &Offering {
            instance_type,
            zone: &behaviour.default_zone,
            spot,
        },
        now,
    )
}

#[test]
fn prioritized_walks_the_lowest_priority_number_first_and_pools_without_one_last() {
    let pools = vec![
        with_priority("a.large", Some(2.0)),
        with_priority("b.large", None),
        with_priority("c.large", Some(0.0)),
        with_priority("d.large", Some(1.0)),
        with_priority("e.large", Some(0.0)),
        with_priority("f.large", None),
    ];
    let model = Ec2Model::new(300, short_everywhere());
    let answer = must_fleet(
        &model,
        at(0),
        &fleet("", AllocationStrategy::Prioritized, pools.clone()),
    );
    assert_eq!(error_pools(&answer), [2, 4, 3, 0, 1, 5]);

    let calm = calm(301);
    let answer = must_fleet(
        &calm,
        at(0),
        &fleet("", AllocationStrategy::Prioritized, pools),
    );
    assert_eq!(launched_pool(&answer), Some(2));
    assert_eq!(answer.instances[0].instance.instance_type, "c.large");
    assert!(answer.errors.is_empty());
}

#[test]
fn lowest_price_walks_spot_pools_cheapest_first_and_unpriced_ones_last() {
    let mut behaviour = short_everywhere();
    behaviour.spot_prices = BTreeMap::from([
        ("a.large".to_owned(), 0.3),
        ("b.large".to_owned(), 0.1),
        ("d.large".to_owned(), 0.1),
        ("e.large".to_owned(), f64::NAN),
    ]);
    for strategy in [
        AllocationStrategy::LowestPrice,
        AllocationStrategy::PriceCapacityOptimized,
    ] {
        let model = Ec2Model::new(302, behaviour.clone());
        let spot = must_fleet(&model, at(0), &fleet("", strategy, five_types()));
        // Ties keep the caller's order; a NaN price is no price.
        assert_eq!(error_pools(&spot), [1, 3, 0, 2, 4], "{strategy:?}");
        // On-demand: the model knows no on-demand prices, so the caller's
        // order.
        let on_demand = CreateFleet {
            spot: false,
            ..fleet("", strategy, five_types())
        };
        let on_demand = must_fleet(&model, at(0), &on_demand);
        assert_eq!(error_pools(&on_demand), [0, 1, 2, 3, 4], "{strategy:?}");
    }
    // With capacity, the cheapest launches.
    let model = Ec2Model::new(
        303,
        Behaviour {
            capacity_error_probability: 0.0,
            ..behaviour
        },
    );
    let answer = must_fleet(
        &model,
        at(0),
        &fleet("", AllocationStrategy::LowestPrice, five_types()),
    );
    assert_eq!(launched_pool(&answer), Some(1));
    assert!(answer.instances[0].instance.spot);
}

#[test]
fn capacity_optimized_launches_into_a_random_pool_with_capacity_and_reports_no_shortage() {
    let types: Vec<String> = (0..12).map(|n| format!("t{n}.large")).collect();
    let pools: Vec<FleetPool> = types.iter().map(|t| pool(t)).collect();
    let mut chosen = BTreeSet::new();
    for seed in 0..40 {
        let mut behaviour = Behaviour::calm();
        behaviour.capacity_error_probability = 0.5;
        let model = Ec2Model::new(seed, behaviour);
        let open: Vec<usize> = (0..types.len())
            .filter(|&i| !exhausted(&model, at(0), &types[i], true))
            .collect();
        let request = fleet("", AllocationStrategy::CapacityOptimized, pools.clone());
        let answer = must_fleet(&model, at(0), &request);
        match launched_pool(&answer) {
            Some(pool) => {
                assert!(open.contains(&pool), "seed {seed}: {pool} is short");
                // EC2 knows where capacity is: it tried no short pool.
                assert!(answer.errors.is_empty(), "seed {seed}");
                chosen.insert(pool);
            }
            None => {
                assert!(open.is_empty(), "seed {seed}");
                assert_eq!(answer.errors.len(), types.len());
            }
        }
        // The lowest-price walk (no prices: the caller's order) takes the
        // first open pool and reports the short ones before it.
        let lowest = fleet("", AllocationStrategy::LowestPrice, pools.clone());
        let lowest = must_fleet(&model, at(0), &lowest);
        let first_open = open.first().copied();
        assert_eq!(launched_pool(&lowest), first_open, "seed {seed}");
        let short_before: Vec<usize> = (0..first_open.unwrap_or(types.len())).collect();
        assert_eq!(error_pools(&lowest), short_before, "seed {seed}");
    }
    assert!(chosen.len() > 3, "the order is not random: {chosen:?}");
}

#[test]
fn capacity_optimized_still_reports_the_pools_too_dear_it_walked_before_the_launch() {
    let mut behaviour = Behaviour::calm();
    behaviour.spot_prices = BTreeMap::from([("a.large".to_owned(), 0.5)]);
    let model = Ec2Model::new(304, behaviour);
    let request = CreateFleet {
        max_price: Some(0.2),
        ..fleet(
            "",
            AllocationStrategy::CapacityOptimized,
            vec![pool("a.large"), pool("b.large")],
        )
    };
    let walks: Vec<FleetAnswer> = (0..20)
        .map(|n| must_fleet(&model, at(n), &request))
        .collect();
    for answer in &walks {
        assert_eq!(launched_pool(answer), Some(1));
        assert!(answer.errors.len() <= 1);
        assert!(
            answer
                .errors
                .iter()
                .all(|e| e.code == code::SPOT_MAX_PRICE_TOO_LOW)
        );
    }
    // The order is drawn: sometimes the dear pool came first.
    assert!(walks.iter().any(|answer| answer.errors.len() == 1));
    assert!(walks.iter().any(|answer| answer.errors.is_empty()));
}

#[test]
fn a_partial_fleet_answers_the_errors_of_the_pools_before_the_one_that_launched() {
    // Too dear for the first priority.
    let mut behaviour = Behaviour::calm();
    behaviour.spot_prices =
        BTreeMap::from([("a.large".to_owned(), 0.3), ("b.large".to_owned(), 0.1)]);
    let model = Ec2Model::new(305, behaviour);
    let request = CreateFleet {
        max_price: Some(0.2),
        ..fleet(
            "pod-a",
            AllocationStrategy::Prioritized,
            vec![
                FleetPool {
                    priority: Some(0.0),
                    ..pool_in("a.large", SUBNET_B)
                },
                FleetPool {
                    priority: Some(1.0),
                    ..pool_in("b.large", SUBNET_A)
                },
            ],
        )
    };
    let answer = must_fleet(&model, at(0), &request);
    assert_eq!(launched_pool(&answer), Some(1));
    assert_eq!(answer.errors.len(), 1);
    let error = &answer.errors[0];
    assert_eq!(
        (error.pool, error.code.as_str(), error.zone.as_str()),
        (0, code::SPOT_MAX_PRICE_TOO_LOW, "us-west-2b")
    );
    assert_eq!(error.subnet_id.as_deref(), Some(SUBNET_B));
    assert_eq!(error.instance_type, "a.large");
    assert!(error.message.contains("0.3"));

    // Short of capacity in the cheaper pool, on-demand, price and capacity
    // optimised: a window where the first pool is short and the second not.
    let mut behaviour = Behaviour::calm();
    behaviour.capacity_error_probability = 0.5;
    behaviour.capacity_window = SignedDuration::from_secs(1);
    let model = Ec2Model::new(306, behaviour);
    let Some(second) = (0..200).find(|&s| {
        exhausted(&model, at(s * 1_000), "a.large", false)
            && !exhausted(&model, at(s * 1_000), "b.large", false)
    }) else {
        panic!("no window with the first pool short and the second not")
    };
    let request = CreateFleet {
        spot: false,
        ..fleet(
            "pod-b",
            AllocationStrategy::PriceCapacityOptimized,
            vec![pool("a.large"), pool("b.large")],
        )
    };
    let answer = must_fleet(&model, at(second * 1_000), &request);
    assert_eq!(launched_pool(&answer), Some(1));
    assert_eq!(error_pools(&answer), [0]);
    assert_eq!(answer.errors[0].code, code::INSUFFICIENT_INSTANCE_CAPACITY);
    assert!(answer.errors[0].message.contains("a.large capacity"));
    assert!(!answer.instances[0].instance.spot);
}

#[test]
fn when_every_pool_is_short_nothing_launches_and_every_pool_has_an_error() {
    let model = Ec2Model::new(307, short_everywhere());
    let pools = vec![
        pool_in("a.large", SUBNET_A),
        pool_in("a.large", SUBNET_B),
        pool_in("b.large", SUBNET_C),
        // The same pool again counts once.
        pool_in("a.large", SUBNET_A),
        pool("b.large"),
    ];
    for strategy in [
        AllocationStrategy::LowestPrice,
        AllocationStrategy::PriceCapacityOptimized,
        AllocationStrategy::CapacityOptimized,
        AllocationStrategy::Prioritized,
    ] {
        let answer = must_fleet(&model, at(0), &fleet("", strategy, pools.clone()));
        assert!(answer.instances.is_empty());
        assert_eq!(error_pools(&answer), [0, 1, 2, 4], "{strategy:?}");
        let zones: Vec<&str> = answer.errors.iter().map(|e| e.zone.as_str()).collect();
        assert_eq!(
            zones,
            ["us-west-2a", "us-west-2b", "us-west-2c", "us-west-2a"]
        );
        assert!(
            answer
                .errors
                .iter()
                .all(|e| e.code == code::INSUFFICIENT_INSTANCE_CAPACITY)
        );
    }
    assert!(model.history().is_empty());
}

#[test]
fn an_empty_answer_uses_up_the_token_and_a_repeat_answers_the_same_errors_after_capacity_returns() {
    let mut behaviour = Behaviour::calm();
    behaviour.capacity_error_probability = 0.5;
    behaviour.capacity_window = SignedDuration::from_secs(1);
    let model = Ec2Model::new(308, behaviour);
    let short = (0..200).find(|&s| exhausted(&model, at(s * 1_000), "a.large", true));
    let Some(short) = short else {
        panic!("capacity never ran out")
    };
    let request = fleet(
        "pod-a",
        AllocationStrategy::LowestPrice,
        vec![pool("a.large")],
    );
    let first = must_fleet(&model, at(short * 1_000), &request);
    assert!(first.instances.is_empty());
    assert_eq!(error_pools(&first), [0]);

    let back =
        (short + 1..short + 200).find(|&s| !exhausted(&model, at(s * 1_000), "a.large", true));
    let Some(back) = back else {
        panic!("capacity never came back")
    };
    let again = must_fleet(&model, at(back * 1_000), &request);
    assert_eq!(again, first, "the token is used up: the same empty answer");
    assert!(model.history().is_empty());
    // Unlike RunInstances, the token is not free for other parameters.
    let other = CreateFleet {
        fingerprint: "lt-other".to_owned(),
        ..request
    };
    assert_eq!(
        model
            .create_fleet(at(back * 1_000), &other)
            .map_err(|e| e.code),
        Err(code::IDEMPOTENT_PARAMETER_MISMATCH.to_owned())
    );
}

#[test]
fn a_repeated_token_answers_the_same_instance_in_its_current_state_even_while_invisible() {
    let mut behaviour = Behaviour::calm();
    behaviour.visibility_lag = exactly(5_000);
    behaviour.boot = exactly(1_000);
    behaviour.shutdown = exactly(1_000);
    let model = Ec2Model::new(309, behaviour);
    let request = fleet("pod-a", AllocationStrategy::LowestPrice, five_types());
    let first = must_fleet(&model, at(0), &request);
    let launched = &first.instances[0].instance;
    assert_eq!(launched.state, State::Pending);

    let again = must_fleet(&model, at(2_000), &request);
    assert_eq!(again.fleet_id, first.fleet_id);
    assert_eq!(again.errors, first.errors);
    assert_eq!(again.instances.len(), 1);
    assert_eq!(again.instances[0].pool, first.instances[0].pool);
    assert_eq!(
        again.instances[0].instance.instance_id,
        launched.instance_id
    );
    assert_eq!(again.instances[0].instance.state, State::Running);
    assert_eq!(model.describe_instances(at(2_000), &[]), Ok(vec![]));
    assert_eq!(
        model.describe_fleets(at(2_000), &[named(&[&first.fleet_id])]),
        Ok(vec![])
    );

    // Terminated, the instance is still answered, as it is now.
    let id = launched.instance_id.clone();
    assert!(model.terminate_instances(at(6_000), &ids(&[&id])).is_ok());
    let late = must_fleet(&model, at(60_000), &request);
    assert_eq!(late.instances[0].instance.instance_id, id);
    assert_eq!(late.instances[0].instance.state, State::Terminated);
    assert_eq!(model.history().len(), 1);
}

#[test]
fn a_repeated_token_with_other_parameters_is_a_mismatch_and_run_instances_tokens_are_apart() {
    let model = calm(310);
    let base = || {
        fleet(
            "pod-a",
            AllocationStrategy::Prioritized,
            vec![pool("a.large"), pool("b.large")],
        )
    };
    let first = must_fleet(&model, at(0), &base());
    let mut reversed = base();
    reversed.pools.reverse();
    let mut prioritised = base();
    prioritised.pools[1].priority = Some(0.0);
    let mut moved = base();
    moved.pools[0].subnet_id = Some(SUBNET_B.to_owned());
    let variants = [
        CreateFleet {
            spot: false,
            ..base()
        },
        CreateFleet {
            allocation_strategy: AllocationStrategy::LowestPrice,
            ..base()
        },
        reversed,
        prioritised,
        moved,
        CreateFleet {
            max_price: Some(0.5),
            ..base()
        },
        CreateFleet {
            tags: BTreeMap::new(),
            ..base()
        },
        CreateFleet {
            fingerprint: "lt-other".to_owned(),
            ..base()
        },
        CreateFleet {
            launch_template: Some(crate::LaunchTemplateRef {
                id: "lt-0123456789abcdef0".to_owned(),
                version: 2,
            }),
            ..base()
        },
    ];
    for variant in variants {
        assert_eq!(
            model.create_fleet(at(1), &variant).map_err(|e| e.code),
            Err(code::IDEMPOTENT_PARAMETER_MISMATCH.to_owned()),
            "{variant:?}"
        );
    }
    assert_eq!(model.history().len(), 1);
    let refused = model.refused_replays();
    assert_eq!(refused.len(), 9, "each refusal is on the record");
    assert!(refused.iter().all(|r| r.operation == "CreateFleet"));

    // The fleet's token is not a RunInstances token, either way round.
    let fleet_instance = &first.instances[0].instance;
    assert_eq!(fleet_instance.client_token, None);
    let run = must_launch(&model, at(2), &launch("pod-a"));
    assert_ne!(run.instance_id, fleet_instance.instance_id);
    let by_token = model
        .describe_instances(at(3), &[Filter::new("client-token", ["pod-a"])])
        .unwrap_or_default();
    let found: Vec<&str> = by_token.iter().map(|i| i.instance_id.as_str()).collect();
    assert_eq!(found, [run.instance_id.as_str()]);
    assert_eq!(must_fleet(&model, at(4), &base()).fleet_id, first.fleet_id);
    assert_eq!(model.history().len(), 2);
}

#[test]
fn a_lost_answer_made_the_fleet_and_a_retry_with_the_same_token_returns_its_instance() {
    let mut behaviour = Behaviour::calm();
    behaviour.lost_answer_probability = 1.0;
    behaviour.visibility_lag = exactly(5_000);
    let model = Ec2Model::new(311, behaviour);
    let request = fleet(
        "pod-a",
        AllocationStrategy::PriceCapacityOptimized,
        five_types(),
    );
    let lost = model.create_fleet(at(0), &request);
    assert_eq!(lost.as_ref().map_err(|e| e.kind), Err(ErrorKind::Transport));
    assert!(lost.is_err_and(|e| e.is_transport() && e.message.contains("CreateFleet")));
    let history = model.history();
    assert_eq!(history.len(), 1, "EC2 acted before the answer was lost");

    let retried = must_fleet(&model, at(100), &request);
    assert_eq!(
        retried.instances[0].instance.instance_id,
        history[0].instance_id
    );
    assert_eq!(model.history().len(), 1);

    // A fleet that launched nothing loses its answer too.
    let mut behaviour = short_everywhere();
    behaviour.lost_answer_probability = 1.0;
    let model = Ec2Model::new(312, behaviour);
    assert!(
        model
            .create_fleet(at(0), &request)
            .is_err_and(|e| e.is_transport())
    );
    let retried = must_fleet(&model, at(100), &request);
    assert!(retried.instances.is_empty());
    assert_eq!(retried.errors.len(), 5);
}

#[test]
fn a_fleet_instance_is_launched_and_remembered_exactly_like_a_run_instances_one() {
    let mut behaviour = Behaviour::calm();
    behaviour.boot = exactly(1_000);
    let model = Ec2Model::new(313, behaviour);
    let request = fleet(
        "pod-a",
        AllocationStrategy::LowestPrice,
        vec![pool_in("c7g.large", SUBNET_B)],
    );
    let answer = must_fleet(&model, at(0), &request);
    let instance = &answer.instances[0].instance;
    assert_eq!(instance.state, State::Pending);
    assert_eq!(instance.tags, request.tags);
    assert_eq!(instance.zone, "us-west-2b");
    assert_eq!(instance.subnet_id.as_deref(), Some(SUBNET_B));
    assert!(instance.spot);

    let history = history_of(&model, &instance.instance_id);
    assert_eq!(history.instance_type, "c7g.large");
    assert_eq!(history.zone, "us-west-2b");
    assert!(history.spot);
    assert_eq!(history.tags, request.tags);
    assert_eq!(history.client_token, None);
    assert_eq!(history.private_ip, instance.private_ip);
    assert_eq!(true_state(&history, at(1_000)), Some(State::Running));
    assert_eq!(
        described_state(&model, at(1_000), &instance.instance_id),
        Some(State::Running)
    );
    let console = model.get_console_output(at(1_000), &instance.instance_id);
    assert!(console.is_ok_and(|output| output.is_some_and(|text| text.contains("c7g.large"))));
    assert!(
        model
            .interrupt_spot(at(2_000), &instance.instance_id)
            .is_some()
    );
}

#[test]
fn describe_fleets_lists_a_fleet_after_its_lag_by_id_and_filters_by_tag() {
    let mut behaviour = short_everywhere();
    behaviour.visibility_lag = exactly(2_000);
    let model = Ec2Model::new(314, behaviour);
    let first = must_fleet(
        &model,
        at(0),
        &fleet(
            "pod-a",
            AllocationStrategy::LowestPrice,
            vec![pool("a.large")],
        ),
    );
    let second = must_fleet(
        &model,
        at(500),
        &fleet(
            "pod-b",
            AllocationStrategy::LowestPrice,
            vec![pool("b.large")],
        ),
    );
    let both = vec![named(&[&second.fleet_id, &first.fleet_id])];

    assert_eq!(model.describe_fleets(at(1_999), &both), Ok(vec![]));
    let listed = model.describe_fleets(at(2_000), &both).unwrap_or_default();
    assert_eq!(
        listed,
        vec![FleetDescription {
            fleet_id: first.fleet_id.clone(),
            client_token: Some("pod-a".to_owned()),
            tags: BTreeMap::from([("orca.research/pod".to_owned(), "pod-a".to_owned())]),
            instance_ids: vec![],
            errors: first.errors.clone(),
            created_at: at(0),
        }]
    );
    // In creation order, whatever the order of the ids asked for.
    let listed = model.describe_fleets(at(2_500), &both).unwrap_or_default();
    let listed: Vec<&str> = listed.iter().map(|f| f.fleet_id.as_str()).collect();
    assert_eq!(listed, [first.fleet_id.as_str(), second.fleet_id.as_str()]);

    let tagged = |values: &[&str]| {
        let filters = [
            both[0].clone(),
            Filter::tag("orca.research/pod", values.iter().copied()),
        ];
        let listed = model
            .describe_fleets(at(2_500), &filters)
            .unwrap_or_default();
        listed.into_iter().map(|f| f.fleet_id).collect::<Vec<_>>()
    };
    assert_eq!(tagged(&["pod-b"]), [second.fleet_id.as_str()]);
    assert_eq!(tagged(&["pod-x", "pod-a"]), [first.fleet_id.as_str()]);
    assert_eq!(tagged(&["pod-?"]).len(), 2);
    assert!(tagged(&["other"]).is_empty());

    // An instant fleet must be named by id: without one, or with a pattern,
    // EC2 lists nothing.
    let by_tag_only = [Filter::tag("orca.research/pod", ["pod-a"])];
    assert_eq!(model.describe_fleets(at(2_500), &by_tag_only), Ok(vec![]));
    assert_eq!(model.describe_fleets(at(2_500), &[]), Ok(vec![]));
    assert_eq!(
        model.describe_fleets(at(2_500), &[named(&["fleet-*"])]),
        Ok(vec![])
    );
    // Two id filters AND together.
    let apart = [named(&[&first.fleet_id]), named(&[&second.fleet_id])];
    assert_eq!(model.describe_fleets(at(2_500), &apart), Ok(vec![]));
}

#[test]
fn describe_fleets_may_answer_from_a_stale_replica() {
    let mut behaviour = Behaviour::calm();
    behaviour.visibility_lag = exactly(1_000);
    behaviour.describe_staleness = exactly(1_000);
    let model = Ec2Model::new(315, behaviour);
    let answer = must_fleet(
        &model,
        at(0),
        &fleet(
            "pod-a",
            AllocationStrategy::LowestPrice,
            vec![pool("a.large")],
        ),
    );
    let by_id = [named(&[&answer.fleet_id])];
    assert_eq!(model.describe_fleets(at(1_999), &by_id), Ok(vec![]));
    let listed = model.describe_fleets(at(2_000), &by_id).unwrap_or_default();
    assert_eq!(listed.len(), 1);
    assert_eq!(
        listed[0].instance_ids,
        [answer.instances[0].instance.instance_id.clone()]
    );
}

/// A hostile script of fleets, launches, describes and terminations.
fn transcript(seed: u64) -> Vec<String> {
    let mut behaviour = Behaviour::hostile();
    behaviour.capacity_error_probability = 0.4;
    behaviour.lost_answer_probability = 0.2;
    behaviour.spot_prices =
        BTreeMap::from([("a.large".to_owned(), 0.2), ("b.large".to_owned(), 0.1)]);
    let model = Ec2Model::new(seed, behaviour);
    let mut script = fastrand::Rng::with_seed(0xf1ee7);
    let strategies = [
        AllocationStrategy::LowestPrice,
        AllocationStrategy::PriceCapacityOptimized,
        AllocationStrategy::CapacityOptimized,
        AllocationStrategy::Prioritized,
    ];
    let mut fleets: Vec<String> = Vec::new();
    let mut lines = Vec::new();
    for step in 0..300_i64 {
        let now = at(step * 250);
        let line = match script.u8(0..5) {
            0 | 1 => {
                let pools = vec![
                    FleetPool {
                        priority: Some(f64::from(script.u8(0..3))),
                        ..pool_in("a.large", SUBNET_A)
                    },
                    pool_in("b.large", SUBNET_B),
                    pool_in("c.large", SUBNET_C),
                ];
                let request = CreateFleet {
                    spot: script.bool(),
                    max_price: Some(0.15),
                    ..fleet(
                        &format!("pod-{}", script.u8(0..20)),
                        strategies[script.usize(0..strategies.len())],
                        pools,
                    )
                };
                let answer = model.create_fleet(now, &request);
                if let Ok(answer) = &answer
                    && !fleets.contains(&answer.fleet_id)
                {
                    fleets.push(answer.fleet_id.clone());
                }
                format!("fleet {answer:?}")
            }
            2 => {
                let names: Vec<&str> = fleets.iter().map(String::as_str).collect();
                format!(
                    "describe fleets {:?}",
                    model.describe_fleets(now, &[named(&names)])
                )
            }
            3 => format!(
                "run {:?}",
                model.run_instances(now, &launch(&format!("run-{step}")))
            ),
            _ => {
                let all = model.history();
                let id = all
                    .get(script.usize(0..all.len().max(1)))
                    .map_or_else(|| "i-00000000".to_owned(), |h| h.instance_id.clone());
                format!("terminate {:?}", model.terminate_instances(now, &[id]))
            }
        };
        lines.push(line);
    }
    lines.push(format!("history {:?}", model.history()));
    lines
}

#[test]
fn the_same_seed_and_calls_give_the_same_fleets() {
    let first = transcript(515_151);
    assert_eq!(first, transcript(515_151));
    assert_ne!(first, transcript(515_152));
    let text = first.join("\n");
    for expected in [
        "RequestLimitExceeded",
        "RequestFailed",
        "InsufficientInstanceCapacity",
        "SpotMaxPriceTooLow",
        "FleetInstance",
        "FleetDescription",
    ] {
        assert!(text.contains(expected), "no {expected} in the transcript");
    }
}

#[test]
fn garbage_fleet_requests_are_refused_with_ec2_codes_and_make_nothing() {
    let model = calm(316);
    let good = || {
        fleet(
            "pod-a",
            AllocationStrategy::LowestPrice,
            vec![pool("a.large")],
        )
    };
    let invalid = code::INVALID_PARAMETER_VALUE;
    let cases: Vec<(CreateFleet, &str)> = vec![
        (
            CreateFleet {
                pools: vec![],
                ..good()
            },
            invalid,
        ),
        (
            CreateFleet {
                pools: vec![pool("a.large"); 301],
                ..good()
            },
            invalid,
        ),
        (
            CreateFleet {
                pools: vec![pool("a.large"), pool("")],
                ..good()
            },
            invalid,
        ),
        (
            CreateFleet {
                pools: vec![with_priority("a.large", Some(f64::NAN))],
                ..good()
            },
            invalid,
        ),
        (
            CreateFleet {
                max_price: Some(f64::NAN),
                ..good()
            },
            invalid,
        ),
        (
            CreateFleet {
                max_price: Some(-0.1),
                ..good()
            },
            invalid,
        ),
        (
            CreateFleet {
                client_token: Some("x".repeat(65)),
                ..good()
            },
            invalid,
        ),
        (
            CreateFleet {
                client_token: Some("é".to_owned()),
                ..good()
            },
            invalid,
        ),
        (
            CreateFleet {
                tags: BTreeMap::from([("aws:ec2:fleet-id".to_owned(), "x".to_owned())]),
                ..good()
            },
            invalid,
        ),
        (
            CreateFleet {
                tags: (0..51).map(|n| (format!("k{n}"), String::new())).collect(),
                ..good()
            },
            code::TAG_LIMIT_EXCEEDED,
        ),
    ];
    for (case, (request, expected)) in cases.iter().enumerate() {
        assert_eq!(
            model.create_fleet(at(0), request).map_err(|e| e.code),
            Err((*expected).to_owned()),
            "case {case}"
        );
    }
    assert!(model.history().is_empty());
    // A refused request does not use its token.
    assert!(must_fleet(&model, at(1), &good()).instances.len() == 1);

    // The largest request, every pool the same, and an on-demand fleet's
    // NaN max price (not checked, still compared).
    let huge = CreateFleet {
        pools: vec![pool("a.large"); 300],
        ..fleet("", AllocationStrategy::CapacityOptimized, vec![])
    };
    assert_eq!(must_fleet(&model, at(2), &huge).instances.len(), 1);
    let on_demand = CreateFleet {
        spot: false,
        max_price: Some(f64::NAN),
        ..fleet(
            "pod-nan",
            AllocationStrategy::LowestPrice,
            vec![pool("a.large")],
        )
    };
    let first = must_fleet(&model, at(3), &on_demand);
    assert_eq!(
        must_fleet(&model, at(4), &on_demand).fleet_id,
        first.fleet_id
    );

    for name in ["", "tag:", "fleet-state", "instance-id", "FLEET-ID"] {
        assert_eq!(
            model
                .describe_fleets(at(0), &[Filter::new(name, ["x"])])
                .map_err(|e| e.code),
            Err(invalid.to_owned()),
            "{name:?}"
        );
    }
    assert_eq!(
        model
            .describe_fleets(at(0), &[Filter::new("fleet-id", Vec::<String>::new())])
            .map_err(|e| e.code),
        Err(invalid.to_owned())
    );
}

#[test]
fn extreme_times_profiles_and_prices_do_not_panic() {
    let mut behaviour = Behaviour::hostile();
    behaviour.visibility_lag = Span::between(SignedDuration::MIN, SignedDuration::MAX);
    behaviour.describe_staleness = Span::exactly(SignedDuration::MAX);
    behaviour.capacity_window = SignedDuration::MIN;
    behaviour.capacity_error_probability = f64::NAN;
    behaviour.lost_answer_probability = f64::INFINITY;
    behaviour.spot_prices = BTreeMap::from([
        ("a.large".to_owned(), f64::NAN),
        ("b.large".to_owned(), f64::INFINITY),
        ("c.large".to_owned(), f64::NEG_INFINITY),
    ]);
    let model = Ec2Model::new(317, behaviour);
    for now in [Timestamp::MIN, at(0), Timestamp::MAX] {
        for strategy in [
            AllocationStrategy::LowestPrice,
            AllocationStrategy::PriceCapacityOptimized,
            AllocationStrategy::CapacityOptimized,
            AllocationStrategy::Prioritized,
        ] {
            let request = CreateFleet {
                max_price: Some(f64::MAX),
                ..fleet(
                    "pod-a",
                    strategy,
                    vec![
                        with_priority("a.large", Some(f64::MAX)),
                        pool("b.large"),
                        pool_in("c.large", ""),
                        pool_in("\u{0}", "\u{0}"),
                    ],
                )
            };
            let _ = model.create_fleet(now, &request);
            let _ = model.describe_fleets(now, &[named(&["fleet-x"]), Filter::tag("", [""])]);
        }
    }
}

#[test]
fn throttling_refuses_fleet_calls_before_anything_else_and_does_nothing() {
    let mut behaviour = Behaviour::calm();
    behaviour.throttle_probability = 1.0;
    behaviour.throttle_burst = 1..=1;
    let model = Ec2Model::new(318, behaviour);
    let garbage = CreateFleet {
        pools: vec![],
        ..fleet("pod-a", AllocationStrategy::LowestPrice, vec![])
    };
    let request = fleet(
        "pod-a",
        AllocationStrategy::LowestPrice,
        vec![pool("a.large")],
    );
    for request in [&garbage, &request] {
        assert!(
            model
                .create_fleet(at(0), request)
                .is_err_and(|e| e.is_throttling())
        );
    }
    assert!(
        model
            .describe_fleets(at(0), &[Filter::new("", Vec::<String>::new())])
            .is_err_and(|e| e.is_throttling())
    );
    assert!(model.history().is_empty());

    // In bursts: a refused request used no token, the next one launches.
    let mut behaviour = Behaviour::calm();
    behaviour.throttle_probability = 0.5;
    behaviour.throttle_burst = 1..=2;
    let model = Ec2Model::new(319, behaviour);
    let answer = (0..100).find_map(|n| match model.create_fleet(at(n), &request) {
        Ok(answer) => Some(answer),
        Err(error) => {
            assert!(error.is_throttling());
            assert!(model.history().is_empty());
            None
        }
    });
    assert_eq!(answer.map(|a| a.instances.len()), Some(1));
    assert_eq!(model.history().len(), 1);
}
