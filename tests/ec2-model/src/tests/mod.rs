//! Scenario tests of the model against EC2's documented behaviour.

mod calm;
mod capacity;
mod fleet;
mod garbage;
mod interruption;
mod reproducibility;
mod stop;
mod templates;
mod terminate;
mod throttling;
mod tokens;
mod visibility;
mod workload;

use std::collections::BTreeMap;

use jiff::{SignedDuration, Timestamp};

use crate::{Behaviour, Ec2Model, Filter, Instance, InstanceHistory, RunInstances, Span, State};

/// `millis` milliseconds after a fixed start of the test's world.
pub(crate) fn at(millis: i64) -> Timestamp {
    let start = Timestamp::from_second(1_767_225_600).unwrap_or(Timestamp::UNIX_EPOCH);
    start
        .checked_add(SignedDuration::from_millis(millis))
        .unwrap_or(start)
}

pub(crate) fn exactly(millis: i64) -> Span {
    Span::millis(millis, millis)
}

pub(crate) fn launch(token: &str) -> RunInstances {
    RunInstances {
        client_token: (!token.is_empty()).then(|| token.to_owned()),
        instance_type: "m7i.large".to_owned(),
        spot: false,
        max_price: None,
        subnet_id: None,
        tags: BTreeMap::from([("orca.research/pod".to_owned(), token.to_owned())]),
        fingerprint: "ami-0123456789abcdef0|sg-1|userdata-digest".to_owned(),
    }
}

pub(crate) fn in_subnet(token: &str, subnet: &str) -> RunInstances {
    RunInstances {
        subnet_id: Some(subnet.to_owned()),
        ..launch(token)
    }
}

pub(crate) fn spot(token: &str) -> RunInstances {
    RunInstances {
        spot: true,
        ..launch(token)
    }
}

pub(crate) const SUBNET_A: &str = "subnet-0a0a0a0a0a0a0a0a0";
pub(crate) const SUBNET_B: &str = "subnet-0b0b0b0b0b0b0b0b0";

pub(crate) fn ids(ids: &[&str]) -> Vec<String> {
    ids.iter().map(|id| (*id).to_owned()).collect()
}

pub(crate) fn calm(seed: u64) -> Ec2Model {
    Ec2Model::new(seed, Behaviour::calm())
}

/// Launches and insists on success (a test set-up step).
pub(crate) fn must_launch(model: &Ec2Model, now: Timestamp, request: &RunInstances) -> Instance {
    match model.run_instances(now, request) {
        Ok(instance) => instance,
        Err(error) => panic!("launch failed: {error}"),
    }
}

/// The instance's state as a describe by id sees it at `now`.
pub(crate) fn described_state(model: &Ec2Model, now: Timestamp, id: &str) -> Option<State> {
    model
        .describe_instances(now, &[Filter::new("instance-id", [id])])
        .ok()
        .and_then(|found| found.first().map(|instance| instance.state))
}

pub(crate) fn history_of(model: &Ec2Model, id: &str) -> InstanceHistory {
    match model.history().into_iter().find(|h| h.instance_id == id) {
        Some(history) => history,
        None => panic!("no history for {id}"),
    }
}

/// The true state at `at`, from the history.
pub(crate) fn true_state(history: &InstanceHistory, at: Timestamp) -> Option<State> {
    history
        .transitions
        .iter()
        .rfind(|(when, _, _)| *when <= at)
        .map(|(_, state, _)| *state)
}
