//! [`SsmApi`] over aws-sdk-ssm, with the credentials and region every orca client shares
//! ([`crate::support::aws_config::load_for`]) and the SDK's standard retries.

use std::time::Duration;

use async_trait::async_trait;
use aws_sdk_ssm::Client;
use aws_sdk_ssm::error::{DisplayErrorContext, ProvideErrorMetadata, SdkError};
use aws_sdk_ssm::types::CommandInvocationStatus;

use super::{
    DELIVERY_TIMEOUT, DOCUMENT, Invocation, InvocationStatus, RunCommand, SsmApi, SsmError,
};
use crate::support::aws_config::{ClientSettings, load_for};

const MAX_ATTEMPTS: u32 = 3;
const ATTEMPT_TIMEOUT: Duration = Duration::from_secs(10);
const CALL_TIMEOUT: Duration = Duration::from_secs(25);

/// Systems Manager through the SDK.
pub struct SdkSsm {
    client: Client,
}

impl SdkSsm {
    /// A client for `region`, optionally at another endpoint (moto, a VPC endpoint).
    /// Credentials are resolved on the first call.
    pub async fn connect(region: &str, endpoint_url: Option<&str>) -> SdkSsm {
        let settings = ClientSettings {
            max_attempts: MAX_ATTEMPTS,
            attempt_timeout: ATTEMPT_TIMEOUT,
            call_timeout: CALL_TIMEOUT,
        };
        let mut config = aws_sdk_ssm::config::Builder::from(&load_for(region, &settings).await);
        if let Some(url) = endpoint_url {
            config = config.endpoint_url(url);
        }
        SdkSsm {
            client: Client::from_conf(config.build()),
        }
    }
}

fn ssm_error<E, R>(error: SdkError<E, R>) -> SsmError
where
    E: ProvideErrorMetadata + std::error::Error + Send + Sync + 'static,
    R: std::fmt::Debug,
{
    match &error {
        SdkError::ServiceError(service) => SsmError::classify(
            service.err().code().unwrap_or("Unknown"),
            &service
                .err()
                .message()
                .map_or_else(|| format!("{}", DisplayErrorContext(&error)), str::to_owned),
        ),
        SdkError::TimeoutError(_) | SdkError::DispatchFailure(_) => SsmError::Transient {
            code: "Unreachable".to_owned(),
            message: format!("{}", DisplayErrorContext(&error)),
        },
        _ => SsmError::Failed {
            code: "Transport".to_owned(),
            message: format!("{}", DisplayErrorContext(&error)),
        },
    }
}

fn status(status: Option<&CommandInvocationStatus>) -> InvocationStatus {
    match status {
        Some(CommandInvocationStatus::Pending) => InvocationStatus::Pending,
        Some(CommandInvocationStatus::InProgress) => InvocationStatus::InProgress,
        Some(CommandInvocationStatus::Delayed) => InvocationStatus::Delayed,
        Some(CommandInvocationStatus::Success) => InvocationStatus::Success,
        Some(CommandInvocationStatus::Cancelled) => InvocationStatus::Cancelled,
        Some(CommandInvocationStatus::Cancelling) => InvocationStatus::Cancelling,
        Some(CommandInvocationStatus::TimedOut) => InvocationStatus::TimedOut,
        Some(CommandInvocationStatus::Failed) => InvocationStatus::Failed,
        Some(other) => InvocationStatus::Other(other.as_str().to_owned()),
        None => InvocationStatus::Other(String::new()),
    }
}

#[async_trait]
impl SsmApi for SdkSsm {
    async fn send_command(&self, command: &RunCommand) -> Result<String, SsmError> {
        let output = self
            .client
            .send_command()
            .document_name(DOCUMENT)
            .instance_ids(&command.instance_id)
            .parameters("commands", command.commands.clone())
            .parameters(
                "executionTimeout",
                vec![command.execution_timeout.as_secs().to_string()],
            )
            .timeout_seconds(i32::try_from(DELIVERY_TIMEOUT.as_secs()).unwrap_or(60))
            .comment(&command.comment)
            .send()
            .await
            .map_err(ssm_error)?;
        output
            .command()
            .and_then(|command| command.command_id())
            .map(str::to_owned)
            .ok_or_else(|| SsmError::Failed {
                code: "NoCommandId".to_owned(),
                message: "SendCommand answered without a command id".to_owned(),
            })
    }

    async fn get_command_invocation(
        &self,
        command_id: &str,
        instance_id: &str,
    ) -> Result<Invocation, SsmError> {
        let output = self
            .client
            .get_command_invocation()
            .command_id(command_id)
            .instance_id(instance_id)
            .send()
            .await
            .map_err(ssm_error)?;
        Ok(Invocation {
            status: status(output.status()),
            status_details: output.status_details().unwrap_or_default().to_owned(),
            response_code: output.response_code(),
            stdout: output
                .standard_output_content()
                .unwrap_or_default()
                .to_owned(),
            stderr: output
                .standard_error_content()
                .unwrap_or_default()
                .to_owned(),
        })
    }

    async fn cancel_command(&self, command_id: &str, instance_id: &str) -> Result<(), SsmError> {
        self.client
            .cancel_command()
            .command_id(command_id)
            .instance_ids(instance_id)
            .send()
            .await
            .map_err(ssm_error)?;
        Ok(())
    }
}
