//! Every config an e2e test hands orca is checked against the published schema
//! (`deploy/config.schema.json`) before orca starts: the schema is proven on every
//! configuration the tests use, and a test whose config the schema refuses fails here, loudly,
//! naming each violation and its path.

use std::path::Path;
use std::sync::OnceLock;

use anyhow::{Context, Result, anyhow, bail};
use orca::config::schema::SCHEMA_PATH;
use serde_json::Value;

use crate::cluster::repo_root;

fn validator() -> Result<&'static jsonschema::Validator> {
    static VALIDATOR: OnceLock<jsonschema::Validator> = OnceLock::new();
    if let Some(validator) = VALIDATOR.get() {
        return Ok(validator);
    }
    let path = repo_root().join(SCHEMA_PATH);
    let text = std::fs::read_to_string(&path).with_context(|| path.display().to_string())?;
    let schema: Value = serde_json::from_str(&text).with_context(|| path.display().to_string())?;
    let validator = jsonschema::validator_for(&schema)
        .map_err(|error| anyhow!("{}: not a JSON Schema: {error}", path.display()))?;
    Ok(VALIDATOR.get_or_init(|| validator))
}

/// Checks config text (YAML) against the published schema.
///
/// # Errors
/// Text that is not YAML, or every place the config breaks the schema.
pub fn check_config(text: &str) -> Result<()> {
    let value: Value = serde_saphyr::from_str(text).context("the config is not valid YAML")?;
    let problems: Vec<String> = validator()?
        .iter_errors(&value)
        .map(|error| format!("{}: {error}", error.instance_path()))
        .collect();
    if !problems.is_empty() {
        bail!(
            "the config breaks {SCHEMA_PATH}:\n  {}\nthe config:\n{text}",
            problems.join("\n  ")
        );
    }
    Ok(())
}

/// [`check_config`] of a config file.
///
/// # Errors
/// As [`check_config`], or a file that cannot be read.
pub fn check_config_file(path: &Path) -> Result<()> {
    let text = std::fs::read_to_string(path).with_context(|| path.display().to_string())?;
    check_config(&text).with_context(|| format!("config file {}", path.display()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_config_the_schema_refuses_is_reported_with_its_path() {
        check_config("node:\n  cpu: 64\n").unwrap();
        let error = check_config("node:\n  taints:\n  - {key: a, effect: Sometimes}\n")
            .unwrap_err()
            .to_string();
        assert!(error.contains("/node/taints/0/effect"), "{error}");
    }
}
