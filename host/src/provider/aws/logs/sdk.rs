//! [`LogsApi`] over aws-sdk-cloudwatchlogs, with the credentials and region every orca client
//! shares ([`crate::support::aws_config::load_for`]) and the SDK's standard retries.

use std::time::Duration;

use async_trait::async_trait;
use aws_sdk_cloudwatchlogs::Client;
use aws_sdk_cloudwatchlogs::error::{DisplayErrorContext, ProvideErrorMetadata, SdkError};
use jiff::Timestamp;

use crate::support::aws_config::{ClientSettings, load_for};

use super::{
    Event, EventsPage, EventsRequest, GroupCreation, LogsApi, LogsError, PageStart, classify,
};

/// Attempts per call, the first included; the SDK backs off between them. Few: a throttled
/// follower backs off on its own, and a first read should answer `kubectl logs` quickly.
const MAX_ATTEMPTS: u32 = 2;
const ATTEMPT_TIMEOUT: Duration = Duration::from_secs(10);
const CALL_TIMEOUT: Duration = Duration::from_secs(25);

/// CloudWatch Logs through the SDK.
pub struct SdkLogs {
    client: Client,
}

impl SdkLogs {
    /// A client for `region`, optionally at another endpoint (moto, LocalStack, a VPC
    /// endpoint). Credentials are resolved on the first call.
    pub async fn connect(region: &str, endpoint_url: Option<&str>) -> SdkLogs {
        let settings = ClientSettings {
            max_attempts: MAX_ATTEMPTS,
            attempt_timeout: ATTEMPT_TIMEOUT,
            call_timeout: CALL_TIMEOUT,
        };
        let mut config =
            aws_sdk_cloudwatchlogs::config::Builder::from(&load_for(region, &settings).await);
        if let Some(url) = endpoint_url {
            config = config.endpoint_url(url);
        }
        SdkLogs {
            client: Client::from_conf(config.build()),
        }
    }
}

fn logs_error<E, R>(error: SdkError<E, R>) -> LogsError
where
    E: ProvideErrorMetadata + std::error::Error + Send + Sync + 'static,
    R: std::fmt::Debug,
{
    match &error {
        SdkError::ServiceError(service) => classify(
            service.err().code().unwrap_or("Unknown"),
            &service
                .err()
                .message()
                .map_or_else(|| format!("{}", DisplayErrorContext(&error)), str::to_owned),
        ),
        SdkError::TimeoutError(_) | SdkError::DispatchFailure(_) => LogsError::Throttled {
            code: "Unreachable".to_owned(),
            message: format!("{}", DisplayErrorContext(&error)),
        },
        _ => LogsError::Failed {
            code: "Transport".to_owned(),
            message: format!("{}", DisplayErrorContext(&error)),
        },
    }
}

fn millis(at: Timestamp) -> i64 {
    at.as_millisecond()
}

#[async_trait]
impl LogsApi for SdkLogs {
    async fn create_log_group(&self, group: &str) -> Result<GroupCreation, LogsError> {
        match self
            .client
            .create_log_group()
            .log_group_name(group)
            .send()
            .await
        {
            Ok(_) => Ok(GroupCreation::Created),
            Err(error)
                if error
                    .as_service_error()
                    .is_some_and(|e| e.is_resource_already_exists_exception()) =>
            {
                Ok(GroupCreation::Existed)
            }
            Err(error) => Err(logs_error(error)),
        }
    }

    async fn put_retention_policy(&self, group: &str, days: u32) -> Result<(), LogsError> {
        self.client
            .put_retention_policy()
            .log_group_name(group)
            .retention_in_days(i32::try_from(days).unwrap_or(i32::MAX))
            .send()
            .await
            .map_err(logs_error)?;
        Ok(())
    }

    async fn get_log_events(&self, request: &EventsRequest) -> Result<EventsPage, LogsError> {
        let mut call = self
            .client
            .get_log_events()
            .log_group_name(&request.group)
            .log_stream_name(&request.stream)
            .set_start_time(request.start_time.map(millis))
            .set_limit(request.limit.map(|n| i32::try_from(n).unwrap_or(i32::MAX)));
        call = match &request.from {
            PageStart::Head => call.start_from_head(true),
            PageStart::Tail => call.start_from_head(false),
            // CloudWatch: a forward token must be used with startFromHead=true.
            PageStart::Forward(token) => call.next_token(token).start_from_head(true),
            PageStart::Backward(token) => call.next_token(token).start_from_head(false),
        };
        let output = call.send().await.map_err(logs_error)?;
        let events = output
            .events()
            .iter()
            .map(|event| Event {
                at: event
                    .timestamp()
                    .and_then(|ms| Timestamp::from_millisecond(ms).ok())
                    .unwrap_or(Timestamp::UNIX_EPOCH),
                message: event.message().unwrap_or_default().to_owned(),
            })
            .collect();
        Ok(EventsPage {
            events,
            forward: output.next_forward_token().unwrap_or_default().to_owned(),
            backward: output.next_backward_token().unwrap_or_default().to_owned(),
        })
    }
}
