//! The selector's settings from config.yaml.

use orca_plugin_sdk::{Architecture, PolicyError};
use serde::Deserialize;

#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase", default)]
pub struct Settings {
    /// Only these families; empty: all.
    pub allow_families: Vec<String>,
    pub deny_families: Vec<String>,
    /// `amd64` or `arm64` for pods that do not select one; absent: either.
    pub architecture: Option<String>,
    /// How many ranked candidates to return (the provider tries them in order).
    pub max_candidates: u32,
}

impl Default for Settings {
    fn default() -> Self {
        Settings {
            allow_families: Vec::new(),
            deny_families: Vec::new(),
            architecture: None,
            max_candidates: 5,
        }
    }
}

impl Settings {
    /// # Errors
    /// `invalid-settings` naming what is wrong.
    pub fn parse(json: &str) -> Result<Settings, PolicyError> {
        let json = if json.trim().is_empty() { "{}" } else { json };
        let settings: Settings = serde_json::from_str(json)
            .map_err(|error| PolicyError::InvalidSettings(format!("selector settings: {error}")))?;
        if settings.max_candidates == 0 {
            return Err(PolicyError::InvalidSettings(
                "selector settings: maxCandidates must be at least 1".into(),
            ));
        }
        settings.default_architecture()?;
        Ok(settings)
    }

    /// # Errors
    /// `invalid-settings` for an architecture other than amd64 or arm64.
    pub fn default_architecture(&self) -> Result<Option<Architecture>, PolicyError> {
        match self.architecture.as_deref() {
            None => Ok(None),
            Some(name) => parse_architecture(name).map(Some).ok_or_else(|| {
                PolicyError::InvalidSettings(format!(
                    "selector settings: architecture {name:?}; expected amd64 or arm64"
                ))
            }),
        }
    }
}

pub fn parse_architecture(name: &str) -> Option<Architecture> {
    match name {
        "amd64" => Some(Architecture::Amd64),
        "arm64" => Some(Architecture::Arm64),
        _ => None,
    }
}
