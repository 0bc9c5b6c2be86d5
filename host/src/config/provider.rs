//! The `provider:` section: which backend runs the pods, and its settings.

use std::path::PathBuf;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::{AwsConfig, ConfigError, Seconds};

/// Which provider runs pods.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, Serialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum ProviderKind {
    /// In-process instances: demos, tests and scale runs without a cloud.
    Simulated,
    /// One EC2 instance per pod.
    Aws,
}

/// Which backend runs the pods, and its settings.
#[derive(Debug, Clone, Deserialize, Serialize, JsonSchema)]
#[serde(deny_unknown_fields, rename_all = "camelCase", default)]
pub struct ProviderConfig {
    /// Which provider runs the pods.
    pub kind: ProviderKind,
    /// The AWS region instances run in; also selects the catalogue's on-demand prices.
    pub region: String,
    /// Settings of `kind: simulated`.
    pub simulated: SimulatedConfig,
    /// Settings of `kind: aws`: how orca reaches EC2 and what every instance it launches
    /// gets.
    pub aws: AwsConfig,
}

impl Default for ProviderConfig {
    fn default() -> Self {
        ProviderConfig {
            kind: ProviderKind::Simulated,
            region: "us-east-1".to_owned(),
            simulated: SimulatedConfig::default(),
            aws: AwsConfig::default(),
        }
    }
}

/// Defaults for simulated instances; a pod can override each with a
/// `simulated.orca.research/…` annotation (see the provider's docs).
#[derive(Debug, Clone, Deserialize, Serialize, JsonSchema)]
#[serde(deny_unknown_fields, rename_all = "camelCase", default)]
pub struct SimulatedConfig {
    /// Time from launch to `running`.
    pub boot_delay: Seconds,
    /// Time the workload runs before exiting; absent: it runs until the pod is deleted.
    pub run_time: Option<Seconds>,
    /// The workload's exit code when `run_time` elapses.
    pub exit_code: i32,
    /// Time an instance spends `shutting-down` after a terminate call.
    pub shutdown_delay: Seconds,
    /// How long terminated instances stay listed (EC2 keeps them about an hour).
    pub terminated_retention: Seconds,
    /// A journal file that makes instances outlive orca, as real instances do: with it, a
    /// restarted orca finds (and adopts) what it launched before. Absent: in memory only.
    pub state_file: Option<PathBuf>,
    /// While this file exists the provider does not answer `ping` (an outage drill).
    pub outage_file: Option<PathBuf>,
}

impl Default for SimulatedConfig {
    fn default() -> Self {
        SimulatedConfig {
            boot_delay: Seconds::from_secs(2),
            run_time: None,
            exit_code: 0,
            shutdown_delay: Seconds::from_secs(1),
            terminated_retention: Seconds::from_secs(3600),
            state_file: None,
            outage_file: None,
        }
    }
}

impl ProviderConfig {
    pub(super) fn validate(&self) -> Result<(), ConfigError> {
        if !is_region_name(&self.region) {
            return Err(ConfigError::invalid(
                "provider.region",
                &self.region,
                "an AWS region such as us-east-1 or eu-central-1",
            ));
        }
        if self.kind == ProviderKind::Aws {
            self.aws.validate()?;
        }
        let simulated = &self.simulated;
        if !(0..=255).contains(&simulated.exit_code) {
            return Err(ConfigError::invalid(
                "provider.simulated.exitCode",
                simulated.exit_code,
                "an exit code from 0 to 255",
            ));
        }
        Ok(())
    }
}

/// `us-east-1`, `ap-southeast-2`, `us-gov-west-1`: lowercase words and a number, dash-joined.
fn is_region_name(name: &str) -> bool {
    let parts: Vec<&str> = name.split('-').collect();
    parts.len() >= 3
        && parts[..parts.len() - 1]
            .iter()
            .all(|p| !p.is_empty() && p.bytes().all(|b| b.is_ascii_lowercase()))
        && parts[parts.len() - 1].parse::<u8>().is_ok()
}
