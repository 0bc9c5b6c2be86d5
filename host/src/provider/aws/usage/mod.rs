//! The pods' usage in CloudWatch: the instances publish it (the bootstrap's sampler, see
//! [`super::workload::MetricPublishing`]); orca reads every running pod's figures back in
//! batched `GetMetricData` calls ([`read`]), never one call per pod.

pub mod read;
pub mod sdk;

#[cfg(test)]
pub(crate) mod fake;

use async_trait::async_trait;
use jiff::Timestamp;

use crate::provider::Sample;

/// The most metrics one `GetMetricData` call may ask for.
pub const MAX_QUERIES_PER_CALL: usize = 500;

/// The CloudWatch calls orca makes.
#[async_trait]
pub trait CloudWatchApi: Send + Sync + 'static {
    /// `GetMetricData`, every page of it: each query's datapoints, newest first.
    async fn get_metric_data(&self, request: &DataRequest) -> Result<Vec<Series>, CloudWatchError>;
}

/// One `GetMetricData` call: at most [`MAX_QUERIES_PER_CALL`] metrics, each read with the
/// `Maximum` statistic per `period_seconds` between `start` and `end`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DataRequest {
    pub namespace: String,
    pub queries: Vec<MetricQuery>,
    pub start: Timestamp,
    pub end: Timestamp,
    pub period_seconds: u32,
}

/// One metric of the namespace, by name and its exact dimensions.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MetricQuery {
    /// The query's id in the call: a lowercase letter, then letters, digits and `_`.
    pub id: String,
    pub metric: &'static str,
    pub dimensions: Vec<(&'static str, String)>,
}

/// A query's answer: its datapoints, newest first (each at the start of its period).
#[derive(Debug, Clone, PartialEq)]
pub struct Series {
    pub id: String,
    pub points: Vec<Sample>,
}

/// Why a CloudWatch call failed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{code}: {message}")]
pub struct CloudWatchError {
    pub code: String,
    pub message: String,
    /// Throttled or unreachable: the same call may succeed later.
    pub transient: bool,
}

impl CloudWatchError {
    /// The error for `code` and `message` as CloudWatch answers them.
    pub fn classify(code: &str, message: &str) -> CloudWatchError {
        let transient = matches!(
            code,
            "Throttling"
                | "ThrottlingException"
                | "LimitExceeded"
                | "LimitExceededException"
                | "ServiceUnavailable"
                | "InternalServiceError"
                | "RequestLimitExceeded"
                | "Unreachable"
        );
        CloudWatchError {
            code: code.to_owned(),
            message: message.to_owned(),
            transient,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn throttling_and_outages_are_transient_and_refusals_are_not() {
        for (code, transient) in [
            ("Throttling", true),
            ("LimitExceeded", true),
            ("InternalServiceError", true),
            ("Unreachable", true),
            ("AccessDenied", false),
            ("InvalidParameterValue", false),
        ] {
            let error = CloudWatchError::classify(code, "m");
            assert_eq!(error.transient, transient, "{code}");
            assert_eq!(error.to_string(), format!("{code}: m"));
        }
    }
}
