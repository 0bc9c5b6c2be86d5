//! Everything the model remembers about one instant fleet. An instant
//! fleet never changes after CreateFleet answers: it is a record of what
//! that call did.

use std::collections::BTreeMap;

use jiff::Timestamp;

use crate::fleet_answer::{FleetDescription, FleetError};

#[derive(Clone, Debug)]
pub(crate) struct FleetRecord {
    pub id: String,
    pub client_token: Option<String>,
    pub tags: BTreeMap<String, String>,
    /// The instances it launched (at most one), each with its pool's index.
    pub instances: Vec<(String, usize)>,
    pub errors: Vec<FleetError>,
    pub created_at: Timestamp,
    /// Before this, DescribeFleets does not know the fleet (its id has not
    /// propagated); its tags come with it.
    pub visible_at: Timestamp,
}

impl FleetRecord {
    /// The fleet as a describe about `at` lists it; `None` if it had not
    /// propagated then. Instant fleets are never purged in the model.
    pub fn describe_at(&self, at: Timestamp) -> Option<FleetDescription> {
        if at < self.visible_at || at < self.created_at {
            return None;
        }
        Some(FleetDescription {
            fleet_id: self.id.clone(),
            client_token: self.client_token.clone(),
            tags: self.tags.clone(),
            instance_ids: self.instances.iter().map(|(id, _)| id.clone()).collect(),
            errors: self.errors.clone(),
            created_at: self.created_at,
        })
    }
}
