//! `provider.aws.logs`: where containers' output goes (CloudWatch Logs), so `kubectl logs` has
//! the whole history and `-f` follows it for as long as the pod runs.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::ConfigError;
use super::quantity_field::{quantity_bytes, string_or_number};

/// The log group, its retention, and how Docker's `awslogs` driver delivers.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize, Serialize, JsonSchema)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct LogsConfig {
    /// The log group every container of this node writes to, one stream per pod UID and
    /// container (`UID/CONTAINER`). orca creates it at startup if it is missing.
    pub group: String,
    /// How long CloudWatch keeps events, in days, set when orca creates the group (a group
    /// that exists keeps its own setting): one of CloudWatch's values; `0` keeps them forever.
    #[serde(default = "default_retention_days")]
    pub retention_days: u32,
    /// `nonBlocking` (default): a container never waits on CloudWatch; output past
    /// `bufferSize` while CloudWatch is unreachable is dropped. `blocking`: the container's
    /// writes wait instead, and nothing is lost.
    #[serde(default)]
    pub delivery: LogDelivery,
    /// The per-container buffer of `nonBlocking` delivery (a quantity: `4Mi`).
    #[serde(default = "default_buffer_size", deserialize_with = "string_or_number")]
    #[schemars(with = "super::quantity_field::QuantityValue")]
    pub buffer_size: String,
    /// Another CloudWatch Logs endpoint (LocalStack, moto, a VPC endpoint), for orca's reads
    /// and group creation; absent: the region's own. Instances always use their region's.
    #[serde(default)]
    pub endpoint_url: Option<String>,
}

/// How Docker's `awslogs` driver delivers a container's output.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize, Serialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub enum LogDelivery {
    /// A container never waits on CloudWatch; output past `bufferSize` while CloudWatch is
    /// unreachable is dropped.
    #[default]
    NonBlocking,
    /// The container's writes wait on CloudWatch, and nothing is lost; a container whose
    /// stream cannot be created does not start.
    Blocking,
}

/// The retention periods CloudWatch Logs accepts (`PutRetentionPolicy`), in days.
pub const RETENTION_DAYS: [u32; 22] = [
    1, 3, 5, 7, 14, 30, 60, 90, 120, 150, 180, 365, 400, 545, 731, 1096, 1827, 2192, 2557, 2922,
    3288, 3653,
];

const FIELD: &str = "provider.aws.logs";

fn default_retention_days() -> u32 {
    30
}

fn default_buffer_size() -> String {
    "4Mi".to_owned()
}

impl LogsConfig {
    /// The buffer in bytes; valid after [`LogsConfig::validate`].
    pub fn buffer_bytes(&self) -> usize {
        quantity_bytes(&self.buffer_size).unwrap_or(4 << 20)
    }

    pub(super) fn validate(&self) -> Result<(), ConfigError> {
        if !is_group_name(&self.group) {
            return Err(ConfigError::invalid(
                format!("{FIELD}.group"),
                &self.group,
                "a CloudWatch Logs group name: 1 to 512 letters, digits and _ - / . #",
            ));
        }
        if self.retention_days != 0 && !RETENTION_DAYS.contains(&self.retention_days) {
            return Err(ConfigError::invalid(
                format!("{FIELD}.retentionDays"),
                self.retention_days,
                "0 (keep forever) or one of CloudWatch's periods: 1, 3, 5, 7, 14, 30, 60, 90, \
                 120, 150, 180, 365, 400, 545, 731, 1096, 1827, 2192, 2557, 2922, 3288, 3653",
            ));
        }
        if quantity_bytes(&self.buffer_size).is_none_or(|bytes| bytes == 0) {
            return Err(ConfigError::invalid(
                format!("{FIELD}.bufferSize"),
                &self.buffer_size,
                "a positive quantity of bytes such as 4Mi",
            ));
        }
        super::endpoint::check_endpoint_url(
            &format!("{FIELD}.endpointUrl"),
            self.endpoint_url.as_deref(),
        )
    }
}

/// CloudWatch Logs' rule for group names.
fn is_group_name(name: &str) -> bool {
    (1..=512).contains(&name.len())
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'_' | b'-' | b'/' | b'.' | b'#'))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn config(yaml: &str) -> Result<LogsConfig, String> {
        let value: serde_json::Value = serde_saphyr::from_str(yaml).map_err(|e| e.to_string())?;
        let config: LogsConfig = serde_json::from_value(value).map_err(|e| e.to_string())?;
        config.validate().map_err(|e| e.to_string())?;
        Ok(config)
    }

    #[test]
    fn defaults_keep_thirty_days_and_never_block_a_container() {
        let logs = config("group: /orca/pods\n").unwrap();
        assert_eq!(logs.retention_days, 30);
        assert_eq!(logs.delivery, LogDelivery::NonBlocking);
        assert_eq!(logs.buffer_bytes(), 4 << 20);
        assert_eq!(logs.endpoint_url, None);
        let logs =
            config("group: g\nretentionDays: 0\ndelivery: blocking\nbufferSize: 1Mi\n").unwrap();
        assert_eq!(
            (logs.retention_days, logs.delivery, logs.buffer_bytes()),
            (0, LogDelivery::Blocking, 1 << 20)
        );
    }

    #[test]
    fn bad_values_name_their_field() {
        for (yaml, field) in [
            ("group: ''\n", "provider.aws.logs.group"),
            ("group: 'has space'\n", "provider.aws.logs.group"),
            (
                "group: g\nretentionDays: 31\n",
                "provider.aws.logs.retentionDays",
            ),
            (
                "group: g\nbufferSize: lots\n",
                "provider.aws.logs.bufferSize",
            ),
            ("group: g\nbufferSize: 0\n", "provider.aws.logs.bufferSize"),
            (
                "group: g\nendpointUrl: localhost:4566\n",
                "provider.aws.logs.endpointUrl",
            ),
        ] {
            let error = config(yaml).unwrap_err();
            assert!(error.contains(field), "{yaml:?}: {error}");
        }
        assert!(config("group: g\ndelivery: sometimes\n").is_err());
        assert!(config("group: g\nretention: 3\n").is_err());
    }

    #[test]
    fn the_commented_logs_block_of_the_shipped_config_yaml_is_valid_and_shows_the_defaults() {
        let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../config.yaml");
        let shipped = std::fs::read_to_string(path).unwrap();
        let block: String = shipped
            .lines()
            .skip_while(|line| *line != "    # logs:")
            .skip(1)
            .map_while(|line| line.strip_prefix("    #   "))
            .map(|line| format!("{line}\n"))
            .collect();
        assert!(
            block.contains("group:"),
            "no commented logs block:\n{block}"
        );
        let logs = config(&block).unwrap();
        let defaults = config(&format!("group: {}\n", logs.group)).unwrap();
        assert_eq!(
            LogsConfig {
                endpoint_url: None,
                ..logs
            },
            defaults
        );
    }
}
