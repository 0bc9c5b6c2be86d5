//! CreateTags (on instances).

use std::collections::BTreeMap;

use jiff::Timestamp;

use crate::checks;
use crate::error::Ec2Error;
use crate::model::Ec2Model;
use crate::random::Draw;
use crate::time::later;

impl Ec2Model {
    /// Adds or overwrites tags on the named instances, as EC2 does: all or nothing, each
    /// write visible to `DescribeInstances` filters only after the behaviour's tag lag.
    ///
    /// # Errors
    /// `RequestLimitExceeded`; `MissingParameter`; `InvalidInstanceID.Malformed`;
    /// `InvalidInstanceID.NotFound` naming every unknown, not yet propagated or purged id
    /// (nothing tagged); the tag checks `RunInstances` applies to its tags.
    pub fn create_tags(
        &self,
        now: Timestamp,
        ids: &[String],
        tags: &BTreeMap<String, String>,
    ) -> Result<(), Ec2Error> {
        let mut world = self.world();
        let now = world.effective(now);
        world.admit()?;
        checks::check_tags(tags)?;
        let found = world.resolve(now, ids)?;
        world.changed_at(now);
        let lag = world.behaviour.tag_lag;
        for &i in &found {
            let drawn = world.rng.span(lag);
            let Some(record) = world.records.get_mut(i) else {
                continue;
            };
            for (key, value) in tags {
                record.tags.write(key, value, now, later(now, drawn));
            }
        }
        Ok(())
    }
}
