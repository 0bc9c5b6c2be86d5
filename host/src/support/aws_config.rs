//! The settings every AWS client orca builds shares: aws-config's default credential chain
//! (environment, profile, IRSA web identity, instance role) and the configured region, with
//! each client's own attempts, timeouts and endpoint ([`ClientSettings`]). One place, so the
//! EC2, SQS, STS and CloudWatch Logs clients never disagree on whose credentials they use, and
//! each states only what differs (an SQS long poll lasts 20 s, an EC2 call should not).

use std::time::Duration;

use ::aws_config::retry::RetryConfig;
use ::aws_config::timeout::TimeoutConfig;
use ::aws_config::{BehaviorVersion, Region, SdkConfig};

/// How one client calls its service.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ClientSettings {
    /// Attempts per call, the first included; the SDK's standard retry backs off between them.
    pub max_attempts: u32,
    pub attempt_timeout: Duration,
    pub call_timeout: Duration,
}

/// Loads the shared configuration for `region`. Credentials are resolved lazily, on the first
/// call a client makes, so this does not fail without them.
pub async fn load(region: &str) -> SdkConfig {
    ::aws_config::defaults(BehaviorVersion::latest())
        .region(Region::new(region.to_owned()))
        .load()
        .await
}

/// [`load`] with `settings` applied: what a client's `config::Builder::from` starts from.
///
/// An endpoint override (`…endpointUrl`) is not among them: it goes on the client's own
/// builder, since `Builder::from` prefers `AWS_ENDPOINT_URL` from the environment to the shared
/// configuration's endpoint, while the client's own setting wins over both.
pub async fn load_for(region: &str, settings: &ClientSettings) -> SdkConfig {
    load(region)
        .await
        .into_builder()
        .retry_config(RetryConfig::standard().with_max_attempts(settings.max_attempts))
        .timeout_config(
            TimeoutConfig::builder()
                .operation_attempt_timeout(settings.attempt_timeout)
                .operation_timeout(settings.call_timeout)
                .build(),
        )
        .build()
}
