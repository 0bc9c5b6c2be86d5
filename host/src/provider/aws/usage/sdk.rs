//! [`CloudWatchApi`] over aws-sdk-cloudwatch, with the credentials and region every orca
//! client shares ([`crate::support::aws_config::load_for`]) and the SDK's standard retries.

use std::collections::HashMap;
use std::time::Duration;

use async_trait::async_trait;
use aws_sdk_cloudwatch::Client;
use aws_sdk_cloudwatch::error::{DisplayErrorContext, ProvideErrorMetadata, SdkError};
use aws_sdk_cloudwatch::primitives::DateTime;
use aws_sdk_cloudwatch::types::{Dimension, Metric, MetricDataQuery, MetricStat, ScanBy};
use jiff::Timestamp;

use super::{CloudWatchApi, CloudWatchError, DataRequest, MetricQuery, Series};
use crate::provider::Sample;
use crate::support::aws_config::{ClientSettings, load_for};

/// Attempts per call, the first included; a read that fails is made again next period.
const MAX_ATTEMPTS: u32 = 3;
const ATTEMPT_TIMEOUT: Duration = Duration::from_secs(20);
const CALL_TIMEOUT: Duration = Duration::from_secs(60);
/// The statistic every figure is read with (see [`super::read`]).
const STATISTIC: &str = "Maximum";

/// CloudWatch through the SDK.
pub struct SdkCloudWatch {
    client: Client,
}

impl SdkCloudWatch {
    /// A client for `region`, optionally at another endpoint (moto, LocalStack, a VPC
    /// endpoint). Credentials are resolved on the first call.
    pub async fn connect(region: &str, endpoint_url: Option<&str>) -> SdkCloudWatch {
        let settings = ClientSettings {
            max_attempts: MAX_ATTEMPTS,
            attempt_timeout: ATTEMPT_TIMEOUT,
            call_timeout: CALL_TIMEOUT,
        };
        let mut config =
            aws_sdk_cloudwatch::config::Builder::from(&load_for(region, &settings).await);
        if let Some(url) = endpoint_url {
            config = config.endpoint_url(url);
        }
        SdkCloudWatch {
            client: Client::from_conf(config.build()),
        }
    }
}

fn cloudwatch_error<E, R>(error: SdkError<E, R>) -> CloudWatchError
where
    E: ProvideErrorMetadata + std::error::Error + Send + Sync + 'static,
    R: std::fmt::Debug,
{
    let context = || format!("{}", DisplayErrorContext(&error));
    match &error {
        SdkError::ServiceError(service) => CloudWatchError::classify(
            service.err().code().unwrap_or("Unknown"),
            &service.err().message().map_or_else(context, str::to_owned),
        ),
        SdkError::TimeoutError(_) | SdkError::DispatchFailure(_) => {
            CloudWatchError::classify("Unreachable", &context())
        }
        _ => CloudWatchError::classify("Transport", &context()),
    }
}

fn date_time(at: Timestamp) -> DateTime {
    DateTime::from_secs(at.as_second())
}

/// One metric's query: its `Maximum` per period.
fn query(query: &MetricQuery, request: &DataRequest) -> MetricDataQuery {
    let dimensions = query
        .dimensions
        .iter()
        .map(|(name, value)| Dimension::builder().name(*name).value(value).build())
        .collect();
    let metric = Metric::builder()
        .namespace(&request.namespace)
        .metric_name(query.metric)
        .set_dimensions(Some(dimensions))
        .build();
    let stat = MetricStat::builder()
        .metric(metric)
        .period(i32::try_from(request.period_seconds).unwrap_or(60))
        .stat(STATISTIC)
        .build();
    MetricDataQuery::builder()
        .id(&query.id)
        .metric_stat(stat)
        .return_data(true)
        .build()
}

#[async_trait]
impl CloudWatchApi for SdkCloudWatch {
    async fn get_metric_data(&self, request: &DataRequest) -> Result<Vec<Series>, CloudWatchError> {
        let queries: Vec<MetricDataQuery> =
            request.queries.iter().map(|q| query(q, request)).collect();
        let mut points: HashMap<String, Vec<Sample>> = HashMap::new();
        let mut token: Option<String> = None;
        loop {
            let output = self
                .client
                .get_metric_data()
                .set_metric_data_queries(Some(queries.clone()))
                .start_time(date_time(request.start))
                .end_time(date_time(request.end))
                .scan_by(ScanBy::TimestampDescending)
                .set_next_token(token.take())
                .send()
                .await
                .map_err(cloudwatch_error)?;
            for result in output.metric_data_results() {
                let Some(id) = result.id() else { continue };
                let samples = points.entry(id.to_owned()).or_default();
                for (at, value) in result.timestamps().iter().zip(result.values()) {
                    if let Ok(at) = Timestamp::from_second(at.secs()) {
                        samples.push(Sample { at, value: *value });
                    }
                }
            }
            match output.next_token() {
                Some(next) if !next.is_empty() => token = Some(next.to_owned()),
                _ => break,
            }
        }
        Ok(request
            .queries
            .iter()
            .map(|q| {
                let mut points = points.remove(&q.id).unwrap_or_default();
                points.sort_by_key(|point| std::cmp::Reverse(point.at));
                Series {
                    id: q.id.clone(),
                    points,
                }
            })
            .collect())
    }
}
