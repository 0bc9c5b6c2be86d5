//! DescribeFleets, for the instant fleets CreateFleet made.

use jiff::Timestamp;

use crate::error::Ec2Error;
use crate::filter::{self, Filter, Listing};
use crate::fleet_answer::FleetDescription;
use crate::model::Ec2Model;
use crate::random::Draw;
use crate::time::earlier;

impl Ec2Model {
    /// Lists the fleets matching every filter, as one (possibly lagging) API
    /// replica sees them, in creation order.
    ///
    /// Filters: `tag:<key>` (the request's tags, visible with the fleet) and
    /// `fleet-id`, which stands for the call's `FleetIds` parameter and so
    /// matches ids exactly, without wildcards. EC2: "If a fleet is of type
    /// `instant`, you must specify the fleet ID in the request, otherwise the
    /// fleet does not appear in the response": every fleet the model makes
    /// is instant, so a call without a `fleet-id` filter lists nothing.
    ///
    /// # Guarantees
    /// The answer is as of a moment drawn in `[now - describe_staleness,
    /// now]`, as for instances: fleets whose `visibility_lag` had not passed
    /// then are left out. Fleets are never purged.
    ///
    /// # Errors
    /// `RequestLimitExceeded`; `InvalidParameterValue` for a filter name
    /// other than those above (EC2's `fleet-state`, `type`, … included: the
    /// model does not model them), a `tag:` filter without a key, or a
    /// filter without values.
    pub fn describe_fleets(
        &self,
        now: Timestamp,
        filters: &[Filter],
    ) -> Result<Vec<FleetDescription>, Ec2Error> {
        let mut world = self.world();
        world.admit()?;
        let filters = filter::compile(filters, Listing::Fleets)?;
        let staleness = world.behaviour.describe_staleness;
        let as_of = earlier(now, world.rng.span(staleness));
        if !filters.iter().any(filter::Compiled::names_fleets) {
            return Ok(Vec::new());
        }
        Ok(world
            .fleets
            .iter()
            .filter_map(|fleet| fleet.describe_at(as_of))
            .filter(|fleet| filters.iter().all(|filter| filter.matches(fleet)))
            .collect())
    }
}
