//! CreateLaunchTemplate and DescribeLaunchTemplateVersions.

use jiff::Timestamp;

use crate::error::Ec2Error;
use crate::ids;
use crate::model::Ec2Model;
use crate::random::Draw;
use crate::template::{
    CreateLaunchTemplate, LaunchTemplateRef, LaunchTemplateVersion, TemplateRecord,
};
use crate::time::{earlier, later};

impl Ec2Model {
    /// Makes a launch template holding `request.data` as its version 1, the default.
    ///
    /// # Guarantees
    /// The name is taken at once: any later CreateLaunchTemplate of it answers
    /// `AlreadyExists`, even while the template is still unknown to describes and fleets
    /// (until its `visibility_lag` has passed).
    ///
    /// # Errors
    /// `RequestLimitExceeded` (throttled, nothing done);
    /// `InvalidLaunchTemplateName.MalformedException`;
    /// `InvalidLaunchTemplateName.AlreadyExistsException` for a name in use; and a
    /// `Transport` error (`RequestFailed`) when the template was made but the answer was
    /// lost.
    pub fn create_launch_template(
        &self,
        now: Timestamp,
        request: &CreateLaunchTemplate,
    ) -> Result<LaunchTemplateRef, Ec2Error> {
        let mut guard = self.world();
        let world = &mut *guard;
        let now = world.effective(now);
        world.admit()?;
        request.validate()?;
        if world.templates.iter().any(|t| t.name == request.name) {
            return Err(Ec2Error::template_name_in_use(&request.name));
        }
        let templates = &world.templates;
        let id =
            ids::new_launch_template_id(&mut world.rng, |id| templates.iter().any(|t| t.id == id));
        let visible_at = later(now, world.rng.span(world.behaviour.visibility_lag));
        world.templates.push(TemplateRecord {
            id: id.clone(),
            name: request.name.clone(),
            versions: vec![request.data.clone()],
            default: 1,
            visible_at,
        });
        world.changed_at(now);
        let lost = world.behaviour.lost_answer_probability;
        if world.rng.chance(lost) {
            return Err(Ec2Error::lost_answer("CreateLaunchTemplate"));
        }
        Ok(LaunchTemplateRef { id, version: 1 })
    }

    /// Every version of the template named `name`, oldest first, as one (possibly lagging)
    /// API replica sees it.
    ///
    /// # Errors
    /// `RequestLimitExceeded`; `InvalidLaunchTemplateName.NotFoundException` when no
    /// template of that name is visible as of a moment drawn in `[now -
    /// describe_staleness, now]`.
    pub fn describe_launch_template_versions(
        &self,
        now: Timestamp,
        name: &str,
    ) -> Result<Vec<LaunchTemplateVersion>, Ec2Error> {
        let mut world = self.world();
        world.admit()?;
        let staleness = world.behaviour.describe_staleness;
        let as_of = earlier(now, world.rng.span(staleness));
        world
            .templates
            .iter()
            .find(|t| t.name == name && t.visible(as_of))
            .map(TemplateRecord::described)
            .ok_or_else(|| Ec2Error::template_name_not_found(name))
    }
}
