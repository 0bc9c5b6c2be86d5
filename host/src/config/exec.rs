//! `provider.aws.exec`: `kubectl exec` through AWS Systems Manager's Run Command (see
//! [`crate::provider::aws::exec`]).

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::{ConfigError, Seconds};

/// Whether exec runs, and how long a command may run.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize, Serialize, JsonSchema)]
#[serde(deny_unknown_fields, rename_all = "camelCase", default)]
pub struct ExecConfig {
    /// `false`: exec is refused, saying so, and orca calls no Systems Manager API.
    pub enabled: bool,
    /// How long one command may run before Systems Manager stops it (the document's
    /// `executionTimeout`): 1s to 48h.
    pub timeout: Seconds,
    /// Another Systems Manager endpoint (moto, a VPC endpoint); absent: the region's own.
    pub endpoint_url: Option<String>,
}

impl Default for ExecConfig {
    fn default() -> Self {
        ExecConfig {
            enabled: true,
            timeout: Seconds::from_secs(600),
            endpoint_url: None,
        }
    }
}

const FIELD: &str = "provider.aws.exec";
/// Run Command's longest `executionTimeout`.
const MAX_TIMEOUT_SECONDS: u64 = 48 * 3600;

impl ExecConfig {
    pub(super) fn validate(&self) -> Result<(), ConfigError> {
        let seconds = self.timeout.get().as_secs();
        if !(1..=MAX_TIMEOUT_SECONDS).contains(&seconds) || self.timeout.get().subsec_nanos() != 0 {
            return Err(ConfigError::invalid(
                format!("{FIELD}.timeout"),
                self.timeout,
                "whole seconds from 1s to 48h (Systems Manager's executionTimeout)",
            ));
        }
        super::endpoint::check_endpoint_url(
            &format!("{FIELD}.endpointUrl"),
            self.endpoint_url.as_deref(),
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(yaml: &str) -> ExecConfig {
        let value: serde_json::Value = serde_saphyr::from_str(yaml).unwrap();
        serde_json::from_value(value).unwrap()
    }

    #[test]
    fn exec_is_on_with_ten_minutes_unless_told_otherwise() {
        let exec = parse("{}");
        assert_eq!(exec, ExecConfig::default());
        assert!(exec.enabled);
        assert_eq!(exec.timeout.get().as_secs(), 600);
        assert!(exec.validate().is_ok());
        let off = parse("enabled: false\ntimeout: 2h\nendpointUrl: http://127.0.0.1:5000");
        assert!(!off.enabled);
        assert_eq!(off.timeout.get().as_secs(), 7200);
        assert!(off.validate().is_ok());
    }

    #[test]
    fn timeouts_systems_manager_refuses_are_refused() {
        for timeout in ["0s", "49h", "1500ms"] {
            let error = parse(&format!("timeout: {timeout}"))
                .validate()
                .unwrap_err();
            assert!(
                error.to_string().contains("provider.aws.exec.timeout"),
                "{error}"
            );
        }
        assert!(parse("timeout: 48h").validate().is_ok());
    }
}
