//! GetConsoleOutput.

use jiff::Timestamp;

use crate::error::Ec2Error;
use crate::model::Ec2Model;

impl Ec2Model {
    /// The instance's console output as EC2 has it now (lagging behind what
    /// the instance wrote); `None` if nothing has reached EC2 yet. Terminated
    /// instances keep their output until they are purged.
    ///
    /// # Errors
    /// `RequestLimitExceeded`; `InvalidInstanceID.Malformed`;
    /// `InvalidInstanceID.NotFound` for an instance not yet propagated or
    /// already purged.
    pub fn get_console_output(&self, now: Timestamp, id: &str) -> Result<Option<String>, Ec2Error> {
        let mut world = self.world();
        world.admit()?;
        let found = world.resolve(now, &[id.to_owned()])?;
        Ok(found
            .first()
            .and_then(|&i| world.records.get(i))
            .and_then(|record| record.console.visible_at(now)))
    }
}
