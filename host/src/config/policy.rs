//! The `policy:` section: defaults the native policy falls back on.

use serde::Deserialize;

use super::ConfigError;
use crate::plan::Market;

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase", default)]
pub struct PolicyConfig {
    /// The instance type for pods without `orca.research/instance-type`.
    pub default_instance_type: String,
    /// The market for pods without `orca.research/launch-type`.
    pub default_market: Market,
}

impl Default for PolicyConfig {
    fn default() -> Self {
        PolicyConfig {
            default_instance_type: "m5.large".to_owned(),
            default_market: Market::OnDemand,
        }
    }
}

impl PolicyConfig {
    pub(super) fn validate(&self) -> Result<(), ConfigError> {
        let valid = crate::policy::is_instance_type_name(&self.default_instance_type);
        if !valid {
            return Err(ConfigError::invalid(
                "policy.defaultInstanceType",
                &self.default_instance_type,
                "an EC2 instance type such as m5.large",
            ));
        }
        Ok(())
    }
}
