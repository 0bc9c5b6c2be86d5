//! DescribeInstances.

use jiff::Timestamp;

use crate::error::Ec2Error;
use crate::filter::{self, Filter, Listing};
use crate::instance::Instance;
use crate::model::Ec2Model;
use crate::random::Draw;
use crate::time::earlier;

impl Ec2Model {
    /// Lists the instances matching every filter, as one (possibly lagging)
    /// API replica sees them.
    ///
    /// # Guarantees
    /// The answer is as of a moment drawn in `[now - describe_staleness,
    /// now]`: instances not yet propagated or already purged then are left
    /// out whatever the filters, states and tags are as they were then, and
    /// two consecutive describes may disagree. Instances are listed in launch
    /// order.
    ///
    /// # Errors
    /// `RequestLimitExceeded`; `InvalidParameterValue` for an unknown filter
    /// name or a filter without values.
    pub fn describe_instances(
        &self,
        now: Timestamp,
        filters: &[Filter],
    ) -> Result<Vec<Instance>, Ec2Error> {
        let mut world = self.world();
        world.admit()?;
        let filters = filter::compile(filters, Listing::Instances)?;
        let staleness = world.behaviour.describe_staleness;
        let as_of = earlier(now, world.rng.span(staleness));
        Ok(world
            .records
            .iter()
            .filter_map(|record| record.describe_at(as_of))
            .filter(|instance| filters.iter().all(|filter| filter.matches(instance)))
            .collect())
    }
}
