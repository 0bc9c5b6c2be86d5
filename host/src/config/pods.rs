//! The `pods:` section: how pods are reconciled against the provider.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::{ConfigError, Seconds};

/// Reconciliation timing and limits.
#[derive(Debug, Clone, Deserialize, Serialize, JsonSchema)]
#[serde(deny_unknown_fields, rename_all = "camelCase", default)]
pub struct PodsConfig {
    /// How often all instance statuses are fetched in one batched provider call.
    pub sync_interval: Seconds,
    /// Pods reconciled at the same time (each pod is still reconciled one step at a time).
    pub max_concurrent_reconciles: u16,
    /// An instance whose pod is gone is terminated only once it is this old, so a pod that is
    /// being created right now is never mistaken for an orphan.
    pub orphan_grace_period: Seconds,
    /// A just-launched instance the provider does not list yet is not "lost" within this time
    /// (EC2's DescribeInstances is eventually consistent).
    pub launch_visibility_grace: Seconds,
    /// First and largest retry delay after a transient error (doubling in between).
    pub retry_initial_backoff: Seconds,
    /// The largest retry delay; see `retryInitialBackoff`.
    pub retry_max_backoff: Seconds,
    /// How long orca waits for in-flight work on SIGTERM/SIGINT before exiting.
    pub shutdown_grace_period: Seconds,
}

impl Default for PodsConfig {
    fn default() -> Self {
        PodsConfig {
            sync_interval: Seconds::from_secs(5),
            max_concurrent_reconciles: 64,
            orphan_grace_period: Seconds::from_secs(120),
            launch_visibility_grace: Seconds::from_secs(120),
            retry_initial_backoff: Seconds::from_secs(1),
            retry_max_backoff: Seconds::from_secs(120),
            shutdown_grace_period: Seconds::from_secs(10),
        }
    }
}

impl PodsConfig {
    pub(super) fn validate(&self) -> Result<(), ConfigError> {
        if self.sync_interval.get().is_zero() {
            return Err(ConfigError::invalid(
                "pods.syncInterval",
                self.sync_interval,
                "a duration above zero",
            ));
        }
        if self.max_concurrent_reconciles == 0 {
            return Err(ConfigError::invalid(
                "pods.maxConcurrentReconciles",
                0,
                "a number from 1 to 65535",
            ));
        }
        if self.retry_initial_backoff.get().is_zero()
            || self.retry_initial_backoff > self.retry_max_backoff
        {
            return Err(ConfigError::invalid(
                "pods.retryInitialBackoff",
                self.retry_initial_backoff,
                &format!(
                    "a duration above zero and at most pods.retryMaxBackoff ({})",
                    self.retry_max_backoff
                ),
            ));
        }
        Ok(())
    }
}
