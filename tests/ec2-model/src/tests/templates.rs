use super::*;
use crate::{
    AllocationStrategy, CreateFleet, CreateLaunchTemplate, ErrorKind, FleetPool, LaunchTemplateRef,
    code,
};

fn template(name: &str) -> CreateLaunchTemplate {
    CreateLaunchTemplate {
        name: name.to_owned(),
        data: BTreeMap::from([(
            "InstanceInitiatedShutdownBehavior".to_owned(),
            "terminate".to_owned(),
        )]),
    }
}

fn must_template(model: &Ec2Model, now: Timestamp, name: &str) -> LaunchTemplateRef {
    match model.create_launch_template(now, &template(name)) {
        Ok(made) => made,
        Err(error) => panic!("create launch template failed: {error}"),
    }
}

/// An on-demand fleet of one pool, from `template`.
fn fleet_from(token: &str, template: &LaunchTemplateRef) -> CreateFleet {
    CreateFleet {
        client_token: Some(token.to_owned()),
        spot: false,
        allocation_strategy: AllocationStrategy::Prioritized,
        pools: vec![FleetPool {
            instance_type: "m7i.large".to_owned(),
            subnet_id: Some(SUBNET_A.to_owned()),
            priority: None,
        }],
        max_price: None,
        tags: BTreeMap::new(),
        launch_template: Some(template.clone()),
        fingerprint: "ami-0123456789abcdef0|userdata-digest".to_owned(),
    }
}

fn lagging(seed: u64) -> Ec2Model {
    let mut behaviour = Behaviour::calm();
    behaviour.visibility_lag = exactly(5_000);
    Ec2Model::new(seed, behaviour)
}

#[test]
fn a_template_answers_its_id_and_version_1_and_its_name_is_taken_at_once() {
    let model = lagging(500);
    let made = must_template(&model, at(0), "orca-node-0123456789");
    assert!(
        made.id.starts_with("lt-") && made.id.len() == 20,
        "{made:?}"
    );
    assert_eq!(made.version, 1);
    assert_eq!(
        model
            .create_launch_template(at(1), &template("orca-node-0123456789"))
            .map_err(|e| e.code),
        Err(code::TEMPLATE_NAME_IN_USE.to_owned()),
        "the name is taken at once"
    );
    assert_eq!(
        model
            .describe_launch_template_versions(at(1), "orca-node-0123456789")
            .map_err(|e| e.code),
        Err(code::TEMPLATE_NAME_NOT_FOUND.to_owned()),
        "the template itself shows later"
    );
    let versions = model
        .describe_launch_template_versions(at(5_000), "orca-node-0123456789")
        .unwrap_or_default();
    assert_eq!(versions.len(), 1);
    assert_eq!(versions[0].template, made);
    assert!(versions[0].default);
    assert_eq!(versions[0].data, template("x").data);
}

#[test]
fn a_fleet_from_a_template_not_known_yet_launches_nothing_and_uses_its_token() {
    let model = lagging(501);
    let made = must_template(&model, at(0), "orca-node-0123456789");
    let early = model.create_fleet(at(10), &fleet_from("pod-a/0", &made));
    let Ok(early) = early else {
        panic!("the fleet is answered: {early:?}")
    };
    assert!(early.instances.is_empty());
    let codes: Vec<&str> = early.errors.iter().map(|e| e.code.as_str()).collect();
    assert_eq!(codes, [code::TEMPLATE_ID_NOT_FOUND]);
    assert_eq!(
        model
            .create_fleet(at(6_000), &fleet_from("pod-a/0", &made))
            .map(|answer| answer.fleet_id),
        Ok(early.fleet_id),
        "the token is used up: the same answer once the template shows"
    );
    let later = model.create_fleet(at(6_000), &fleet_from("pod-a/1", &made));
    assert_eq!(later.map(|answer| answer.instances.len()), Ok(1));

    let missing = LaunchTemplateRef { version: 2, ..made };
    let answer = model.create_fleet(at(7_000), &fleet_from("pod-b/0", &missing));
    let codes: Vec<String> = answer
        .map(|answer| answer.errors.into_iter().map(|e| e.code).collect())
        .unwrap_or_default();
    assert_eq!(codes, [code::TEMPLATE_VERSION_NOT_FOUND]);
}

#[test]
fn a_lost_answer_made_the_template() {
    let mut behaviour = Behaviour::calm();
    behaviour.lost_answer_probability = 1.0;
    let model = Ec2Model::new(502, behaviour);
    let lost = model.create_launch_template(at(0), &template("orca-node-0123456789"));
    assert_eq!(lost.map_err(|e| e.kind), Err(ErrorKind::Transport));
    assert_eq!(
        model
            .create_launch_template(at(1), &template("orca-node-0123456789"))
            .map_err(|e| e.code),
        Err(code::TEMPLATE_NAME_IN_USE.to_owned())
    );
    let versions = model
        .describe_launch_template_versions(at(2), "orca-node-0123456789")
        .unwrap_or_default();
    assert_eq!(versions.len(), 1);
}

#[test]
fn a_malformed_name_is_refused() {
    let model = calm(503);
    for name in ["", "orca node", "orca:node", &"n".repeat(129)] {
        assert_eq!(
            model
                .create_launch_template(at(0), &template(name))
                .map_err(|e| e.code),
            Err(code::TEMPLATE_NAME_MALFORMED.to_owned()),
            "{name:?}"
        );
    }
}
