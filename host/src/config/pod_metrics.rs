//! `provider.aws.metrics`: the pods' CPU, memory and GPU usage, sampled on each instance and
//! published to CloudWatch, so `kubectl top`, the HorizontalPodAutoscaler and orca's own
//! `/metrics` see what a pod on orca uses.

use std::time::Duration;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::{ConfigError, Seconds};

/// The namespace the instances publish to, and how often.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize, Serialize, JsonSchema)]
#[serde(deny_unknown_fields, rename_all = "camelCase", default)]
pub struct PodMetricsConfig {
    /// The CloudWatch namespace of every pod's metrics (dimensions `PodUID` and `Container`,
    /// or `PodUID` alone for the GPU figures).
    pub namespace: String,
    /// How often an instance samples its containers and publishes, and how often orca reads
    /// every running pod's figures back (one `GetMetricData` per 500 figures): CloudWatch's
    /// periods, 1s, 5s, 10s, 30s or a multiple of 60s up to 1h. Below 60s the metrics are
    /// high-resolution ones.
    pub interval: Seconds,
    /// Another CloudWatch endpoint (LocalStack, moto, a VPC endpoint) for orca's reads;
    /// absent: the region's own. Instances always publish to their region's.
    pub endpoint_url: Option<String>,
}

impl Default for PodMetricsConfig {
    fn default() -> Self {
        PodMetricsConfig {
            namespace: "Orca/Pods".to_owned(),
            interval: Seconds::from_secs(60),
            endpoint_url: None,
        }
    }
}

const FIELD: &str = "provider.aws.metrics";

impl PodMetricsConfig {
    /// The interval in whole seconds; valid after [`PodMetricsConfig::validate`].
    pub fn interval_seconds(&self) -> u32 {
        u32::try_from(self.interval.get().as_secs()).unwrap_or(60)
    }

    pub fn interval(&self) -> Duration {
        self.interval.get()
    }

    pub(super) fn validate(&self) -> Result<(), ConfigError> {
        if !is_namespace(&self.namespace) {
            return Err(ConfigError::invalid(
                format!("{FIELD}.namespace"),
                &self.namespace,
                "a CloudWatch namespace: 1 to 255 letters, digits and . - _ / # : or spaces, \
                 not starting with AWS/",
            ));
        }
        if !is_period(self.interval.get()) {
            return Err(ConfigError::invalid(
                format!("{FIELD}.interval"),
                self.interval,
                "one of CloudWatch's periods: 1s, 5s, 10s, 30s, or a multiple of 60s up to 1h",
            ));
        }
        super::endpoint::check_endpoint_url(
            &format!("{FIELD}.endpointUrl"),
            self.endpoint_url.as_deref(),
        )
    }
}

/// CloudWatch's rule for custom namespaces.
fn is_namespace(namespace: &str) -> bool {
    (1..=255).contains(&namespace.len())
        && !namespace.starts_with("AWS/")
        && namespace.bytes().all(|b| {
            b.is_ascii_alphanumeric() || matches!(b, b'.' | b'-' | b'_' | b'/' | b'#' | b':' | b' ')
        })
}

/// A period `GetMetricData` accepts for metrics of that resolution: whole seconds, 1, 5, 10
/// or 30 (high resolution) or a multiple of 60; orca keeps it to an hour.
fn is_period(interval: Duration) -> bool {
    let seconds = interval.as_secs();
    interval.subsec_nanos() == 0
        && (matches!(seconds, 1 | 5 | 10 | 30)
            || (seconds.is_multiple_of(60) && (60..=3600).contains(&seconds)))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn config(yaml: &str) -> Result<PodMetricsConfig, String> {
        let value: serde_json::Value = serde_saphyr::from_str(yaml).map_err(|e| e.to_string())?;
        let config: PodMetricsConfig = serde_json::from_value(value).map_err(|e| e.to_string())?;
        config.validate().map_err(|e| e.to_string())?;
        Ok(config)
    }

    #[test]
    fn defaults_publish_every_minute_to_orca_pods() {
        let metrics = config("{}").unwrap();
        assert_eq!(metrics.namespace, "Orca/Pods");
        assert_eq!(metrics.interval_seconds(), 60);
        assert_eq!(metrics.endpoint_url, None);
    }

    #[test]
    fn each_interval_is_a_cloudwatch_period_or_refused_naming_the_field() {
        let cases = [
            ("1s", true),
            ("5s", true),
            ("10s", true),
            ("30s", true),
            ("1m", true),
            ("5m", true),
            ("1h", true),
            ("2s", false),
            ("45s", false),
            ("90s", false),
            ("1500ms", false),
            ("2h", false),
            ("0s", false),
        ];
        for (interval, valid) in cases {
            let answer = config(&format!("interval: {interval}\n"));
            match valid {
                true => assert!(answer.is_ok(), "{interval}: {answer:?}"),
                false => {
                    let error = answer.expect_err(interval);
                    assert!(error.contains("provider.aws.metrics.interval"), "{error}");
                }
            }
        }
    }

    #[test]
    fn each_namespace_follows_cloudwatchs_rule() {
        let cases = [
            ("Orca/Pods", true),
            ("team-a:gpu #1", true),
            ("", false),
            ("AWS/EC2", false),
            ("pods\u{e9}", false),
            ("a\"b", false),
        ];
        for (namespace, valid) in cases {
            let answer = config(&format!("namespace: {namespace:?}\n"));
            assert_eq!(answer.is_ok(), valid, "{namespace:?}: {answer:?}");
            if !valid {
                assert!(
                    answer
                        .unwrap_err()
                        .contains("provider.aws.metrics.namespace")
                );
            }
        }
        assert!(config(&format!("namespace: {}\n", "n".repeat(256))).is_err());
    }

    #[test]
    fn unknown_fields_and_bad_endpoints_are_refused() {
        assert!(config("intervall: 1m\n").unwrap_err().contains("intervall"));
        let error = config("endpointUrl: not a url\n").unwrap_err();
        assert!(
            error.contains("provider.aws.metrics.endpointUrl"),
            "{error}"
        );
    }
}
