//! Making an instance: the one way RunInstances and CreateFleet both
//! launch, so that an instance is the same (id, address, lags, boot, tags,
//! console) whichever call made it.

use std::collections::BTreeMap;

use jiff::Timestamp;

use crate::ids;
use crate::instance::Instance;
use crate::model::World;
use crate::random::Draw;
use crate::record::Record;
use crate::state::State;
use crate::time::later;

/// What to launch, once the call has decided where.
pub(crate) struct Order<'a> {
    pub instance_type: &'a str,
    pub spot: bool,
    pub subnet_id: Option<&'a str>,
    /// The Availability Zone the subnet (or the default) is in.
    pub zone: &'a str,
    pub tags: &'a BTreeMap<String, String>,
    /// The RunInstances token; `None` for a fleet's instance.
    pub client_token: Option<&'a str>,
}

/// Makes the instance, adds it to the world at `now` and answers it as EC2
/// answers a launch (see [`Record::as_launched`]).
///
/// # Guarantees
/// Draws from the RNG in one fixed order (id, address, visibility, boot,
/// retention, each tag's lag, console lag), whichever call launches.
pub(crate) fn spawn(world: &mut World, now: Timestamp, order: &Order<'_>) -> Instance {
    let index = &world.index;
    let id = ids::new_instance_id(&mut world.rng, |id| index.contains_key(id));
    let private_ip = ids::new_private_ip(&mut world.rng, &world.ips);
    let behaviour = &world.behaviour;
    let rng = &mut world.rng;
    let visible_at = later(now, rng.span(behaviour.visibility_lag));
    let running_at = later(now, rng.span(behaviour.boot));
    let retention = rng.span(behaviour.terminated_retention);

    let mut record = Record {
        id,
        instance_type: order.instance_type.to_owned(),
        spot: order.spot,
        zone: order.zone.to_owned(),
        subnet_id: order.subnet_id.map(str::to_owned),
        client_token: order.client_token.map(str::to_owned),
        private_ip,
        launch_time: now,
        visible_at,
        retention,
        timeline: Default::default(),
        tags: Default::default(),
        console: Default::default(),
        protections: Vec::new(),
        endings: Vec::new(),
        termination_requests: Vec::new(),
    };
    record.timeline.push(now, State::Pending, None);
    record.timeline.push(running_at, State::Running, None);
    for (key, value) in order.tags {
        let visible = later(now, rng.span(behaviour.tag_lag));
        record.tags.write(key, value, now, visible);
    }
    let boot_log = [
        format!(
            "[    0.000000] Linux version 6.1.0-orca (ec2-model) on {}",
            order.instance_type
        ),
        format!(
            "cloud-init[812]: Cloud-init v. 24.1 running 'init' for {}",
            record.id
        ),
        "cloud-init[812]: running orca bootstrap".to_owned(),
    ];
    let console_visible = later(running_at, rng.span(behaviour.console_lag));
    record.console.write(&boot_log, running_at, console_visible);

    let answer = record.as_launched(order.tags.clone());
    let position = world.records.len();
    world.index.insert(record.id.clone(), position);
    world.ips.insert(record.private_ip);
    world.records.push(record);
    world.changed_at(now);
    answer
}
